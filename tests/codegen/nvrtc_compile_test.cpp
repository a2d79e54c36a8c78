// Every combinator x dtype x head dim compiles through NVRTC to sm_80 and sm_90 cubins with no
// register spills (no GPU needed); the registers per variant are printed as a table.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse {
namespace {

// Each combinator on its own (with the masks it needs to be meaningful) plus dense compositions.
const char* kPrograms[] = {
    "softmax(full(scaled_dot_product(Q, K))) @ V",
    "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(sliding_window(scaled_dot_product(Q, K), 128)) @ V",
    "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V",
    "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
    "softmax(additive_bias(scaled_dot_product(Q, K))) @ V",
    "softmax(softcap(scaled_dot_product(Q, K), 30)) @ V",
    "relu_attention(scaled_dot_product(Q, K)) @ V",
    "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(softcap(additive_bias(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 256))), 50)) @ V",
    // The partial blocks' row bits next to a window's per-cell limits (the case that spilled
    // at 128-key tiles) and next to a modifier.
    "softmax(block_sparse(sliding_window(scaled_dot_product(Q, K), 150))) @ V",
    "softmax(alibi(block_sparse(causal(scaled_dot_product(Q, K))))) @ V",
    // Documents: on sm_90 the wgmma tile copies their K/V by TMA and zeroes the V rows past a
    // document's end (fwd_wgmma.cuh), alone and next to a window and a modifier.
    "softmax(document(causal(scaled_dot_product(Q, K)))) @ V",
    "softmax(alibi(document(sliding_window(causal(scaled_dot_product(Q, K)), 300)))) @ V",
};

// RoPE programs in each placement: fused rotates inside the attention kernel; prerotate is the
// plain kernel plus the rotation kernel in one module.
struct RopeProgram {
  const char* text;
  RopeMode mode;
};
const RopeProgram kRopePrograms[] = {
    {"softmax(causal(rope(Q, K, base=500000))) @ V", RopeMode::Fused},
    {"softmax(causal(rope(Q, K, base=500000))) @ V", RopeMode::Prerotate},
    {"softmax(causal(rope(Q, K, style=gptj, rotary_dim=32))) @ V", RopeMode::Fused},
    {"softmax(softcap(causal(rope(Q, K, style=gptj, rotary_dim=32)), 30)) @ V", RopeMode::Prerotate},
    {"softmax(causal(rope_window(Q, K, k=1, base=500000))) @ V", RopeMode::Fused},
    {"softmax(causal(rope_window(Q, K, k=1, base=500000))) @ V", RopeMode::Prerotate},
    {"softmax(alibi(sliding_window(causal(rope_window(Q, K, k=2, style=gptj)), 1024))) @ V", RopeMode::Fused},
    {"softmax(alibi(sliding_window(causal(rope_window(Q, K, k=2, style=gptj)), 1024))) @ V", RopeMode::Prerotate},
};

// Programs of the decode variant (GQA-packed 64-row tiles, split-KV) and of the sequence masks,
// each with contiguous and paged K/V.
const char* kDecodePrograms[] = {
    "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(softcap(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 256)), 30)) @ V",
    "softmax(additive_bias(scaled_dot_product(Q, K))) @ V",
    "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(causal(rope(Q, K, base=500000))) @ V",
    "softmax(alibi(causal(rope_window(Q, K, k=2, style=gptj)))) @ V",
    "softmax(block_sparse(alibi(causal(rope(Q, K))))) @ V",
    "softmax(sliding_window(document(causal(rope(Q, K))), 512)) @ V",
};

struct Variant {
  std::string program;
  DType dtype;
  int head_dim;
  int arch;
  RopeMode mode = RopeMode::Auto;
  int decode_rows = 0;  // > 0: the decode tile for this many rows (passes::cuda_decode_tile)
  bool paged = false;
  bool split = false;  // the narrow decode tile of a split call (three stages)
  bool large_boxes = false;  // paged split on sm_90: pages in TMA boxes of 64 rows (128-key tiles)
  bool producer = false;     // sm_90 TMA decode tile with a producer warp (TileConfig::producer_warp)
  bool producer_off = false;  // the wgmma tile without its producer warpgroup (ATTNFUSE_CUDA_WGMMA_PRODUCER=0)
  bool row_groups = false;    // block-sparse wgmma tile whose warpgroups skip blocks (TileConfig::skip_row_groups)
  bool rows64 = false;        // block-sparse 64-row wgmma tile (passes::cuda_wgmma_64_rows)
};

// The variants of one group: the plain programs' prefill tiles, the rope programs' prefill
// tiles, or the decode and paged tiles. Three tests, so each stays well inside ctest's limit on
// a two-core machine. Every head dim builds for sm_90 in bf16 (where the prefill tile takes its
// wgmma form at D 64 / 128), and in fp16 at D 64 / 128: the two types share every tile, and of
// 51 program x head-dim pairs swept in both (2026-12-01) 50 used the same registers (the other:
// 193 / 204, no spill). sm_80 builds the mma.sync form, whose code sm_90 also runs at D 96 / 256
// and in every decode tile, at bf16 D = 128 only (a compile takes 2-5 s; the whole sweep is a
// few hundred).
enum class Group { Prefill, Rope, Decode };

std::vector<Variant> variants_of(Group group) {
  std::vector<Variant> variants;
  auto add = [&](const char* program, RopeMode mode) {
    for (DType t : {DType::BF16, DType::F16})
      for (int d : {64, 96, 128, 256})
        for (int arch : {80, 90})
          if ((arch == 90 && (t == DType::BF16 || d == 64 || d == 128)) || (arch == 80 && t == DType::BF16 && d == 128))
            variants.push_back({program, t, d, arch, mode});
  };
  if (group == Group::Prefill) {
    for (const char* p : kPrograms) add(p, RopeMode::Auto);
    // The wgmma tile without its producer warpgroup (ATTNFUSE_CUDA_WGMMA_PRODUCER=0: 256 threads,
    // the loader a thread of warpgroup 1), for the plain and causal programs.
    for (const char* p : {kPrograms[0], kPrograms[1]})
      for (int d : {64, 128})
        variants.push_back({p, DType::BF16, d, 90, RopeMode::Auto, 0, false, false, false, false, true});
    // The block-sparse modules whose warpgroups skip blocks (CudaKernel::row_group_module): the
    // plain mask, causal, next to a window's limits and next to a modifier.
    for (const char* p : {"softmax(block_sparse(scaled_dot_product(Q, K))) @ V",
                          "softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V",
                          "softmax(block_sparse(sliding_window(scaled_dot_product(Q, K), 150))) @ V",
                          "softmax(alibi(block_sparse(causal(scaled_dot_product(Q, K))))) @ V"})
      for (int d : {64, 128})  // the wgmma head dims
        variants.push_back({p, DType::BF16, d, 90, RopeMode::Auto, 0, false, false, false, false, false, true});
    // The 64-row tile of masks in 64-row blocks (D = 64, CudaKernel::rows64_module), bf16 and fp16.
    for (const char* p : {"softmax(block_sparse(scaled_dot_product(Q, K))) @ V",
                          "softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V",
                          "softmax(alibi(block_sparse(causal(scaled_dot_product(Q, K))))) @ V"})
      for (DType t : {DType::BF16, DType::F16})
        variants.push_back({p, t, 64, 90, RopeMode::Auto, 0, false, false, false, false, false, false, true});
  }
  if (group == Group::Rope)
    for (const RopeProgram& p : kRopePrograms) add(p.text, p.mode);
  if (group != Group::Decode) return variants;

  // Decode tiles: narrow (16 rows, key-split warps; also in the split call's three-stage form
  // where it differs) and wide (64 rows), each contiguous and paged, plus the
  // paged prefill tile; sm_80 for the paged prefill tile at D = 128 only.
  for (const char* p : kDecodePrograms)
    for (int d : {64, 128, 256})
      for (int rows : {0, 16, 64})
        for (bool paged : {false, true}) {
          if (rows == 0 && !paged) continue;  // the prefill contiguous variants are swept above
          const DType t = d == 64 ? DType::F16 : DType::BF16;
          // (Fused RoPE over a contiguous cache keeps two stages in split calls too.)
          const bool rotates = !paged && std::string_view(p).find("rope(") != std::string_view::npos;
          const bool deep = rows == 16 &&
                            passes::cuda_decode_tile({.head_dim = d, .rows = rows, .split = true, .paged = paged,
                                                      .rotates = rotates})
                                    .stages > 2 &&
                            std::string_view(p).find("rope_window") == std::string_view::npos;
          for (bool split : {false, true})
            for (int arch : {80, 90})
              if ((arch == 90 || (d == 128 && rows == 0)) && (!split || deep)) {
                variants.push_back({p, t, d, arch, RopeMode::Fused, rows, paged, split});
                // Pages in boxes of 64 rows: the 128-key tile where the copy engine takes K/V (the
                // plain scores; passes::cuda_decode_wide_keys).
                if (paged && split && arch == 90 && d == 128 &&
                    std::string_view(p).find("scaled_dot_product") != std::string_view::npos)
                  variants.push_back({p, t, d, arch, RopeMode::Fused, rows, paged, split, true});
              }
        }
  // The producer-warp experiment (ATTNFUSE_CUDA_DECODE_PRODUCER=1): the narrow TMA decode tiles,
  // contiguous and paged (boxes of 64 rows and of fewer), split and not, one fp16 D = 64, and
  // the wide tile.
  const char* plain = kDecodePrograms[0];
  for (bool split : {false, true}) {
    variants.push_back({plain, DType::BF16, 128, 90, RopeMode::Fused, 16, false, split, false, true});
    variants.push_back({plain, DType::BF16, 128, 90, RopeMode::Fused, 16, true, split, true, true});
    variants.push_back({plain, DType::BF16, 128, 90, RopeMode::Fused, 16, true, split, false, true});
  }
  variants.push_back({plain, DType::F16, 64, 90, RopeMode::Fused, 16, true, true, false, true});
  for (bool paged : {false, true})  // the wide tile (64 rows: speculative decoding's wide groups)
    variants.push_back({plain, DType::BF16, 128, 90, RopeMode::Fused, 64, paged, false, false, true});
  // Packed documents' decode tiles by TMA (a serving batch of short query runs): narrow, split
  // and not, wide, fp16 D = 64, and with the producer warp.
  const char* docs = "softmax(alibi(document(causal(scaled_dot_product(Q, K))))) @ V";
  for (bool split : {false, true}) variants.push_back({docs, DType::BF16, 128, 90, RopeMode::Fused, 16, false, split});
  variants.push_back({docs, DType::BF16, 128, 90, RopeMode::Fused, 64, false, false});
  variants.push_back({docs, DType::F16, 64, 90, RopeMode::Fused, 16, false, true});
  variants.push_back({docs, DType::BF16, 128, 90, RopeMode::Fused, 16, false, true, false, true});
  return variants;
}

// Compiles every variant of the group to a cubin (two at a time: NVRTC is thread-safe and CI has
// two cores) and expects no errors and no spills; prints the registers per variant, and appends
// them to the file ATTNFUSE_REGISTER_TABLE names (bench/results/ holds the committed table).
void expect_compiles_without_spills(Group group) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const std::vector<Variant> variants = variants_of(group);
  std::vector<runtime::NvrtcResult> results(variants.size());
  std::vector<std::string> errors(variants.size());
  auto work = [&](size_t begin) {
    for (size_t i = begin; i < variants.size(); i += 2) {
      const Variant& v = variants[i];
      try {
        KernelSpec spec = Program::parse(v.program).compile({Target::Cuda, v.dtype, v.head_dim, v.mode});
        // sm_90 decode tiles, contiguous or paged, take K/V by TMA where the runtime would
        // (CudaKernel::decode_tma: every program but rope_window, fused RoPE rotating each landed
        // stage in place), contiguous ones with Hopper's 128-key tile at D = 128 unless they rotate.
        const bool tma = v.decode_rows > 0 && v.arch == 90 && v.head_dim % 64 == 0 && v.head_dim <= 128 &&
                         spec.score != ScoreKind::RopeWindow;
        if (v.decode_rows > 0)
          spec.tile = passes::cuda_decode_tile({.head_dim = v.head_dim,
                                                .rows = v.decode_rows,
                                                .split = v.split,
                                                .wide_keys = passes::cuda_decode_wide_keys(tma, v.paged, v.large_boxes),
                                                .paged = v.paged,
                                                .rotates = !v.paged && codegen::cuda::rotates_in_kernel(spec)});
        if (v.paged) spec.kv_layout = KvLayout::Paged;
        spec.tile = passes::cuda_arch_tile(spec, v.arch);  // sm_90: the wgmma form where it applies
        spec.tile.tma_kv = tma;
        spec.tile.producer_warp = (spec.tile.producer_warp || v.producer) && !v.producer_off;
        spec.tile.skip_row_groups = v.row_groups && spec.tile.wgmma;
        if (v.rows64 && spec.tile.wgmma) spec.tile = passes::cuda_wgmma_64_rows(spec.tile);
        results[i] = runtime::nvrtc_compile(codegen::cuda::emit_forward(spec), "variant", v.arch,
                                            runtime::NvrtcOutput::Cubin);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  auto other = std::async(std::launch::async, work, size_t{1});
  work(0);
  other.get();

  std::string table;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    SCOPED_TRACE(fmt::format("{} {} D={} sm_{} rope_mode={} decode_rows={} paged={} split={} large_boxes={} "
                             "producer={} producer_off={} row_groups={} rows64={}",
                             v.program, dtype_name(v.dtype), v.head_dim, v.arch, rope_mode_name(v.mode),
                             v.decode_rows, v.paged, v.split, v.large_boxes, v.producer, v.producer_off,
                             v.row_groups, v.rows64));
    ASSERT_TRUE(errors[i].empty()) << errors[i];
    EXPECT_FALSE(results[i].binary.empty());
    EXPECT_GT(results[i].registers, 0) << results[i].log;
    EXPECT_EQ(results[i].spill_bytes, 0) << results[i].log;
    if (v.arch == 80 && i + 1 < variants.size() && variants[i + 1].arch == 90)
      table += fmt::format("  {:>4} D={:<3} {:>3} / {:>3}  {}{}{}\n", dtype_name(v.dtype), v.head_dim,
                           results[i].registers, results[i + 1].registers, v.program,
                           v.mode == RopeMode::Auto ? "" : fmt::format("  [{}]", rope_mode_name(v.mode)),
                           v.decode_rows || v.paged
                               ? fmt::format("  [{}{}]", v.decode_rows == 0 ? "prefill" : (v.decode_rows <= 16 ? "decode narrow" : "decode wide"),
                                             std::string(v.paged ? ", paged" : "") + (v.split ? ", split" : ""))
                               : "");
    else if (v.arch == 90 && (i == 0 || variants[i - 1].arch != 80))
      table += fmt::format("  {:>4} D={:<3}   - / {:>3}  {}  [{}{}]\n", dtype_name(v.dtype), v.head_dim,
                           results[i].registers, v.program,
                           v.decode_rows == 0 ? "prefill" : (v.decode_rows <= 16 ? "decode narrow" : "decode wide"),
                           std::string(v.paged ? ", paged" : "") + (v.split ? ", split" : "") +
                               (v.large_boxes ? ", 64-row boxes" : "") + (v.producer ? ", producer warp" : "") +
                               (v.producer_off ? ", no producer" : "") + (v.row_groups ? ", row-group skips" : "") +
                               (v.rows64 ? ", 64 rows" : ""));
  }
  std::cout << "registers per variant (sm_80 / sm_90):\n" << table;
  if (const char* path = std::getenv("ATTNFUSE_REGISTER_TABLE")) std::ofstream(path, std::ios::app) << table;
}

TEST(NvrtcCompile, PrefillVariantsCompileWithoutSpills) { expect_compiles_without_spills(Group::Prefill); }
TEST(NvrtcCompile, RopeVariantsCompileWithoutSpills) { expect_compiles_without_spills(Group::Rope); }
TEST(NvrtcCompile, DecodeAndPagedVariantsCompileWithoutSpills) { expect_compiles_without_spills(Group::Decode); }

// The merge_states module (one per architecture, every dtype at run time, an entry per chunk
// width and one for 16-bit states) compiles to both cubins without spills.
TEST(NvrtcCompile, MergeStatesModuleCompilesWithoutSpills) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (int arch : {80, 90}) {
    const auto r = runtime::nvrtc_compile(codegen::cuda::emit_merge_states(), "merge_states", arch,
                                          runtime::NvrtcOutput::Cubin);
    EXPECT_FALSE(r.binary.empty()) << "sm_" << arch;
    EXPECT_EQ(r.spill_bytes, 0) << "sm_" << arch << ": " << r.log;
    std::cout << fmt::format("merge_states sm_{}: {} registers (the widest entry)\n", arch, r.registers);
  }
}

TEST(NvrtcCompile, PtxForOtherArchitectures) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelSpec spec = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V")
                              .compile({Target::Cuda, DType::BF16, 128});
  const auto r = runtime::nvrtc_compile(codegen::cuda::emit_forward(spec), "ptx", 80, runtime::NvrtcOutput::Ptx);
  const std::string ptx(r.binary.data());
  EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
  EXPECT_NE(ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos);
  EXPECT_NE(ptx.find("ex2.approx"), std::string::npos);
}

// On sm_90 the prefill tile takes the wgmma form: warpgroup MMAs, K/V by the copy engine on an
// mbarrier, no mma.sync left in the forward kernel.
TEST(NvrtcCompile, HopperPtxUsesWarpgroupMmaAndTma) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  KernelSpec spec = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V").compile({Target::Cuda, DType::BF16, 128});
  spec.tile = passes::cuda_arch_tile(spec, 90);
  ASSERT_TRUE(spec.tile.wgmma);
  const auto r = runtime::nvrtc_compile(codegen::cuda::emit_forward(spec), "ptx", 90, runtime::NvrtcOutput::Ptx);
  const std::string ptx(r.binary.data());
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.bulk.tensor.4d"), std::string::npos);
  EXPECT_NE(ptx.find("mbarrier.try_wait.parity"), std::string::npos);
  EXPECT_NE(ptx.find("fence.proxy.async"), std::string::npos);
  EXPECT_EQ(ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos);
}

TEST(NvrtcCompile, FailureReportsLogAndSavedSource) {
  std::string why;
  if (!runtime::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  try {
    runtime::nvrtc_compile("this is not CUDA;", "broken_unit", 90, runtime::NvrtcOutput::Cubin);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Device);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("generated source saved to"), std::string::npos) << msg;
    EXPECT_NE(msg.find("broken_unit.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace attnfuse
