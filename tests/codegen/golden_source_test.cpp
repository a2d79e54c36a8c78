// Golden generated CUDA source: the emitter's output for a few programs is compared with the
// committed files in tests/codegen/golden/ (ATTNFUSE_UPDATE_GOLDEN=1 rewrites them). The
// generated part is only the Spec struct and the hook body; the kernel is the .cuh template.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "passes/tile_sizes.hpp"

namespace attnfuse {
namespace {

struct Golden {
  const char* name;
  const char* program;
  DType dtype;
  int head_dim;
  RopeMode rope_mode = RopeMode::Auto;
  bool decode_paged = false;  // the decode variant (GQA-packed tile) reading a paged K/V cache
  int arch = 80;              // 90: the tile the runtime builds on Hopper (the wgmma form)
};

const Golden kGolden[] = {
    {"causal_bf16_d128", "softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128},
    {"window_alibi_fp16_d64", "softmax(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 1024))) @ V",
     DType::F16, 64},
    {"bias_softcap_bf16_d96", "softmax(softcap(additive_bias(scaled_dot_product(Q, K)), 30)) @ V", DType::BF16, 96},
    {"relu_bf16_d256", "relu_attention(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 256},
    {"rope_fused_gptj_bf16_d128", "softmax(causal(rope(Q, K, style=gptj))) @ V", DType::BF16, 128, RopeMode::Fused},
    {"rope_prerotate_bf16_d128", "softmax(causal(rope(Q, K, base=500000))) @ V", DType::BF16, 128,
     RopeMode::Prerotate},
    {"rope_window_fp16_d64", "softmax(causal(rope_window(Q, K, k=1))) @ V", DType::F16, 64},
    {"decode_paged_rope_bf16_d128", "softmax(causal(rope(Q, K, base=500000))) @ V", DType::BF16, 128,
     RopeMode::Fused, true},
    {"document_window_bf16_d128", "softmax(sliding_window(document(causal(scaled_dot_product(Q, K))), 512)) @ V",
     DType::BF16, 128},
    {"block_sparse_alibi_fp16_d64", "softmax(alibi(block_sparse(causal(scaled_dot_product(Q, K))))) @ V",
     DType::F16, 64},
    {"causal_sm90_bf16_d128", "softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128, RopeMode::Auto,
     false, 90},
    {"document_alibi_sm90_fp16_d64", "softmax(alibi(document(causal(scaled_dot_product(Q, K))))) @ V", DType::F16,
     64, RopeMode::Auto, false, 90},
    // rope_window's wgmma form: the rotation writes neox pairs interleaved, the kernel reads gptj.
    {"rope_window_prerotate_sm90_bf16_d128", "softmax(causal(rope_window(Q, K, k=1, base=500000))) @ V", DType::BF16,
     128, RopeMode::Prerotate, false, 90},
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GoldenSource, EmitterOutputMatchesCommittedFiles) {
  const bool update = std::getenv("ATTNFUSE_UPDATE_GOLDEN") != nullptr;
  for (const Golden& g : kGolden) {
    SCOPED_TRACE(g.name);
    KernelSpec spec = Program::parse(g.program).compile({Target::Cuda, g.dtype, g.head_dim, g.rope_mode});
    if (g.decode_paged) {
      spec.tile = passes::cuda_decode_tile({.head_dim = g.head_dim, .rows = 16});
      spec.kv_layout = KvLayout::Paged;
    }
    spec.tile = passes::cuda_arch_tile(spec, g.arch);
    const std::string got = std::string("// program: ") + g.program + "\n" + codegen::cuda::emit_forward(spec);
    const std::string path = std::string(ATTNFUSE_SOURCE_DIR) + "/tests/codegen/golden/" + g.name + ".cu";
    if (update) std::ofstream(path) << got;
    EXPECT_EQ(read(path), got) << "golden file " << path
                               << " differs (rerun with ATTNFUSE_UPDATE_GOLDEN=1 if the change is intended)";
  }
}

TEST(GoldenSource, EmittedUnitIncludesTheTemplateAndNoKernelBody) {
  const KernelSpec spec = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V")
                              .compile({Target::Cuda, DType::BF16, 128});
  const std::string src = codegen::cuda::emit_forward(spec);
  EXPECT_NE(src.find("#include \"attention_fwd.cuh\""), std::string::npos);
  EXPECT_NE(src.find("FwdKernel<attnfuse_kernels::Spec>::run"), std::string::npos);
  EXPECT_EQ(src.find("mma.sync"), std::string::npos) << "the kernel body belongs in the .cuh template";
  EXPECT_EQ(src.find("ldmatrix"), std::string::npos);
}

TEST(GoldenSource, UnsupportedSpecsAreRejectedClearly) {
  auto expect_unsupported = [](const char* program, DType dtype, int d, const char* phrase) {
    try {
      const KernelSpec spec = Program::parse(program).compile({Target::Cuda, dtype, d});
      codegen::cuda::emit_forward(spec);
      ADD_FAILURE() << program << ": expected Unsupported";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::Unsupported || e.code() == ErrorCode::Shape) << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  expect_unsupported("softmax(causal(scaled_dot_product(Q, K))) @ V", DType::F32, 128, "bf16");
  expect_unsupported("softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 80, "head dim");
  expect_unsupported("softmax(block_sparse(document(scaled_dot_product(Q, K)))) @ V", DType::BF16, 128,
                     "fold the documents");
}

}  // namespace
}  // namespace attnfuse
