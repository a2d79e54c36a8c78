// The CUDA backend's host-side choices that need no GPU (runtime/cuda_backend.hpp): tiles fitted
// to a device's shared memory per block (fit_shared_memory), the queries per sequence that
// choose the decode variant, and the in-memory module key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attnfuse/program.hpp"
#include "codegen/cuda/emit.hpp"
#include "passes/tile_sizes.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/nvrtc.hpp"

namespace attnfuse::runtime {
namespace {

constexpr int kHopper = 227 * 1024, kA100 = 163 * 1024, kConsumer = 99 * 1024;  // opt-in limits

KernelSpec decode_spec(int head_dim, int64_t rows, bool split, bool tma, bool paged, bool large_boxes = false) {
  KernelSpec s = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V")
                     .compile({Target::Cuda, head_dim == 64 ? DType::F16 : DType::BF16, head_dim});
  s.tile = passes::cuda_decode_tile({.head_dim = head_dim,
                                     .rows = rows,
                                     .split = split,
                                     .wide_keys = passes::cuda_decode_wide_keys(tma, paged, large_boxes),
                                     .paged = paged});
  s.tile.tma_kv = tma && head_dim % 64 == 0 && head_dim <= 128;
  if (paged) s.kv_layout = KvLayout::Paged;
  return s;
}

template <class F>
void for_each_decode_spec(F&& f) {
  for (int d : {64, 96, 128, 256})
    for (int64_t rows : {8, 64})
      for (bool split : {false, true})
        for (bool tma : {false, true})
          for (int paged : {0, 1, 2}) {  // contiguous; pages in boxes of 8-32 rows; of 64 or more
            SCOPED_TRACE(::testing::Message() << "D " << d << " rows " << rows << " split " << split << " tma "
                                              << tma << " paged " << paged);
            f(decode_spec(d, rows, split, tma, paged > 0, paged == 2));
          }
}

TEST(DecodeChoice, QueriesPerSequenceAreTheCallsOrTheMeanPerDocument) {
  // Without documents (docs = 1) the call's queries decide; packed documents decide by their
  // mean, rounded up: 32 one-token sequences are a decode call, not 32 queries of one sequence.
  EXPECT_EQ(queries_per_sequence(16, 1), 16);
  EXPECT_EQ(queries_per_sequence(17, 1), 17);
  EXPECT_EQ(queries_per_sequence(32, 32), 1);
  EXPECT_EQ(queries_per_sequence(27, 12), 3);   // README's example: 1-3 tokens each
  EXPECT_EQ(queries_per_sequence(88, 24), 4);   // 24 sequences, one of 40 (as in CudaSparse's varlen test)
  EXPECT_EQ(queries_per_sequence(17 * 3, 3), 17);  // just past kDecodeMaxQueries
  EXPECT_EQ(queries_per_sequence(0, 4), 0);
  EXPECT_LE(queries_per_sequence(32, 32), kDecodeMaxQueries);
  EXPECT_GT(queries_per_sequence(2048 + 7, 8), kDecodeMaxQueries);  // a prefill chunk among decodes
}

TEST(FitSharedMemory, HopperAndA100DecodeTilesAreLeftAsTheTilePassChoseThem) {
  for_each_decode_spec([](const KernelSpec& s) {
    const TileConfig& t = s.tile;
    if (codegen::cuda::shared_memory_bytes(s) <= kA100) {
      const TileConfig f = fit_shared_memory(s, kA100).tile;
      EXPECT_EQ(f.block_k, t.block_k);
      EXPECT_EQ(f.stages, t.stages);
    }
    const TileConfig h = fit_shared_memory(s, kHopper).tile;
    EXPECT_EQ(h.block_k, t.block_k);
    EXPECT_EQ(h.stages, t.stages);
    EXPECT_EQ(h.num_warps, t.num_warps);
    EXPECT_EQ(h.key_warps, t.key_warps);
  });
}

TEST(FitSharedMemory, NinetyNineKilobyteDevicesGetAValidDecodeTileThatFits) {
  for_each_decode_spec([](const KernelSpec& s) {
    const KernelSpec f = fit_shared_memory(s, kConsumer);
    const TileConfig& t = f.tile;
    EXPECT_LE(codegen::cuda::shared_memory_bytes(f), kConsumer);
    // The shapes the kernel accepts (the decode tile knob's rules, runtime/cuda_knobs.cpp).
    EXPECT_GE(t.stages, 2);
    EXPECT_EQ(t.num_warps % t.key_warps, 0);
    EXPECT_EQ(t.block_q % (16 * (t.num_warps / t.key_warps)), 0);
    EXPECT_EQ(t.block_k % (16 * t.key_warps), 0);
    EXPECT_EQ(t.block_q, s.tile.block_q);  // the same rows: GQA packing and the split choice hold
    EXPECT_LE(t.block_k, s.tile.block_k);
  });
  // Hopper's 128-key three-stage tile (198 KB) on a 99 KB TMA device (sm_120): 64 keys, 2 stages.
  const TileConfig t = fit_shared_memory(decode_spec(128, 8, true, true, false), kConsumer).tile;
  EXPECT_EQ(t.block_k, 64);
  EXPECT_EQ(t.stages, 2);
  EXPECT_EQ(t.key_warps, 4);
  // D = 256's narrow tile needs fewer key-split warps to drop below 64 keys per tile.
  const TileConfig n = fit_shared_memory(decode_spec(256, 8, false, false, false), kConsumer).tile;
  EXPECT_LT(n.key_warps, 4);
  EXPECT_EQ(n.num_warps, n.key_warps);
}

KernelSpec prefill_spec(const char* program, int head_dim) {
  return Program::parse(program).compile({Target::Cuda, DType::BF16, head_dim, RopeMode::Fused});
}

constexpr const char* kPrefillPrograms[] = {
    "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(causal(rope(Q, K))) @ V",
    "softmax(sliding_window(rope_window(Q, K, k=1), 100)) @ V",
    "softmax(softcap(alibi(causal(scaled_dot_product(Q, K))), 30)) @ V",
};

// The mma.sync prefill tile (every GPU but Hopper) at D = 128 is 128 x 128 keys: 174 KB, over the
// A100's 163 KB. Fitted, it keeps its 128 rows and takes 64-key tiles; every prefill tile fits
// the A100 and 99 KB GPUs with a shape the kernel accepts; the wgmma form is left alone.
TEST(FitSharedMemory, PrefillTilesFitTheA100AndSmallerGpus) {
  const KernelSpec d128 = prefill_spec(kPrefillPrograms[0], 128);
  ASSERT_GT(codegen::cuda::shared_memory_bytes(d128), kA100);
  const TileConfig a100 = fit_shared_memory(d128, kA100).tile;
  EXPECT_EQ(a100.block_q, 128);
  EXPECT_EQ(a100.block_k, 64);
  EXPECT_EQ(a100.num_warps, d128.tile.num_warps);
  for (const char* program : kPrefillPrograms)
    for (int d : {64, 96, 128, 256})
      for (int limit : {kHopper, kA100, kConsumer}) {
        SCOPED_TRACE(::testing::Message() << program << " D " << d << " limit " << limit);
        const KernelSpec s = prefill_spec(program, d);
        const KernelSpec f = fit_shared_memory(s, limit);
        const TileConfig& t = f.tile;
        EXPECT_LE(codegen::cuda::shared_memory_bytes(f), limit);
        EXPECT_EQ(t.block_q % (16 * t.num_warps), 0);
        EXPECT_EQ(t.block_q / t.num_warps, s.tile.block_q / s.tile.num_warps) << "rows per warp";
        EXPECT_EQ(t.block_k % 16, 0);
        if (codegen::cuda::shared_memory_bytes(s) <= limit) {
          EXPECT_EQ(t.block_q, s.tile.block_q);
          EXPECT_EQ(t.block_k, s.tile.block_k);
        }
      }
  KernelSpec hopper = d128;
  hopper.tile = passes::cuda_arch_tile(d128, 90);
  ASSERT_TRUE(hopper.tile.wgmma);
  EXPECT_EQ(fit_shared_memory(hopper, kA100).tile.block_k, hopper.tile.block_k) << "the wgmma form is Hopper's";
}

TEST(FitSharedMemory, FittedTilesCompile) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  // The shrunken shapes no default tile takes: decode D = 256 narrow and wide, D = 128 TMA on
  // sm_90 ...
  // ... and the prefill tiles fitted to the A100 and to 99 KB at D = 128 and 256.
  for (const auto& [s, limit] : std::vector<std::pair<KernelSpec, int>>{
           {decode_spec(256, 8, false, false, false), kConsumer},
           {decode_spec(256, 64, false, false, true), kConsumer},
           {decode_spec(128, 8, true, true, false), kConsumer},
           {prefill_spec(kPrefillPrograms[0], 128), kA100},
           {prefill_spec(kPrefillPrograms[1], 256), kConsumer},
           {prefill_spec(kPrefillPrograms[3], 128), kConsumer}}) {
    const KernelSpec f = fit_shared_memory(s, limit);
    SCOPED_TRACE(::testing::Message() << "D " << f.head_dim << " tile " << f.tile.block_q << "x" << f.tile.block_k
                                      << " warps " << f.tile.num_warps << "/" << f.tile.key_warps);
    const NvrtcResult r = nvrtc_compile(codegen::cuda::emit_forward(f), "fitted", f.tile.tma_kv ? 90 : 80,
                                        NvrtcOutput::Cubin);
    EXPECT_FALSE(r.binary.empty()) << r.log;
    EXPECT_EQ(r.spill_bytes, 0) << r.log;
  }
}

// The runtime's in-memory module cache is keyed by module_key, which leaves the scalars out so
// that a new window size or slope reuses its module. So every two specs with one key must emit
// one source, or a warm lookup serves one program's kernel to another: in session 40 the
// compile-time pair count of the fused rotation (Spec::kRopeHalf) was emitted from rotary_dim
// while the key held no trace of it, and a partial rotary span ran a full span's kernel on the
// GPU (the key now holds that count's log2). Each program below is taken in both RoPE
// placements, in its prefill, decode and paged tiles, at three head dims, on sm_80 and sm_90.
TEST(ModuleKey, SpecsWithOneKeyEmitOneSource) {
  const std::vector<std::string> programs = {
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 128)) @ V",
      "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 4096)) @ V",
      "softmax(softcap(causal(scaled_dot_product(Q, K)), 30)) @ V",
      "softmax(softcap(causal(scaled_dot_product(Q, K)), 50)) @ V",
      "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
      "softmax(alibi(causal(scaled_dot_product(Q, K)), slopes=[0.5])) @ V",
      "softmax(causal(scaled_dot_product(Q, K, scale=0.1))) @ V",
      "softmax(causal(rope(Q, K))) @ V",
      "softmax(causal(rope(Q, K, base=500000))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=16))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=24))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=40))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=32))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=64))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=128))) @ V",
      "softmax(causal(rope(Q, K, style=gptj))) @ V",
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=16))) @ V",
      "softmax(causal(rope(Q, K, rope_type=yarn, factor=4, original_max_position_embeddings=4096))) @ V",
      "softmax(causal(rope_window(Q, K, k=1))) @ V",
      "softmax(causal(rope_window(Q, K, k=2, rotary_dim=32))) @ V",
      "softmax(causal(rope_window(Q, K, k=2, style=gptj))) @ V",
  };
  struct Built {
    std::string name;
    KernelSpec spec;
  };
  std::vector<Built> specs;
  for (const std::string& text : programs)
    for (int d : {64, 96, 128})
      for (RopeMode mode : {RopeMode::Fused, RopeMode::Prerotate})
        for (int tile : {0, 1, 2}) {  // prefill, decode, paged decode
          if (d < 128 && text.find("rotary_dim=128") != std::string::npos) continue;  // past the head
          KernelSpec s = Program::parse(text).compile({Target::Cuda, DType::BF16, d});
          if (s.score == ScoreKind::ScaledDot && mode == RopeMode::Prerotate) continue;
          if (s.score != ScoreKind::ScaledDot) {
            s.rope_mode = mode;
            s.tile = passes::cuda_tile_for_rope_mode(s, mode);
          }
          if (tile > 0) {
            s.tile = passes::cuda_decode_tile(
                {.head_dim = d, .rows = 8, .split = true, .paged = tile == 2, .rotates = codegen::cuda::rotates_in_kernel(s)});
            if (tile == 2) s.kv_layout = KvLayout::Paged;
          }
          specs.push_back({fmt::format("{} D={} {} tile {}", text, d, rope_mode_name(mode), tile), s});
        }
  std::map<uint64_t, std::pair<std::string, std::string>> first;  // key -> (name, source)
  int shared = 0;
  for (int arch : {80, 90})
    for (const Built& b : specs) {
      const std::string source = codegen::cuda::emit_forward(b.spec);
      const auto [it, fresh] = first.try_emplace(module_key(b.spec, arch), b.name, source);
      if (fresh) continue;
      ++shared;
      EXPECT_TRUE(it->second.second == source) << "one module key, two sources: " << it->second.first << " and " << b.name;
    }
  // The scalars stay out of the key: the window sizes, softcaps, slopes, scales, bases and
  // scalings above share modules (a fixed count, so a key that took in a scalar fails).
  EXPECT_GE(shared, 100);
  // The fused rotation's pair count is structure where its units number a power of two (a
  // module per count), and a run-time argument otherwise (one module for all such spans); the
  // prerotate placement's forward kernel never rotates.
  const auto key = [](const char* text, RopeMode mode) {
    KernelSpec s = Program::parse(text).compile({Target::Cuda, DType::BF16, 128});
    s.rope_mode = mode;
    return module_key(s, 90);
  };
  EXPECT_NE(key("softmax(causal(rope(Q, K, rotary_dim=32))) @ V", RopeMode::Fused),
            key("softmax(causal(rope(Q, K))) @ V", RopeMode::Fused));
  EXPECT_NE(key("softmax(causal(rope(Q, K, rotary_dim=32))) @ V", RopeMode::Fused),
            key("softmax(causal(rope(Q, K, rotary_dim=64))) @ V", RopeMode::Fused));
  EXPECT_EQ(key("softmax(causal(rope(Q, K, rotary_dim=24))) @ V", RopeMode::Fused),
            key("softmax(causal(rope(Q, K, rotary_dim=40))) @ V", RopeMode::Fused));
  // A whole head is one code whatever its dim (the dim is structure already).
  EXPECT_EQ(codegen::cuda::rope_span_code([] {
              KernelSpec s = Program::parse("softmax(causal(rope(Q, K))) @ V").compile({Target::Cuda, DType::BF16, 96});
              s.rope_mode = RopeMode::Fused;
              return s;
            }()),
            1);
  EXPECT_EQ(key("softmax(causal(rope(Q, K, rotary_dim=32))) @ V", RopeMode::Prerotate),
            key("softmax(causal(rope(Q, K))) @ V", RopeMode::Prerotate));
}

}  // namespace
}  // namespace attnfuse::runtime
