// rope and rope_window on the CUDA backend, in both placements (rotation fused into the attention
// kernel, or a rotation kernel first), against the float64 reference (DESIGN §3 tolerance).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "gpu_harness.hpp"
#include "passes/rope_placement.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/device_buffer.hpp"

namespace attnfuse {
namespace {

using gpu_test::Case;
using gpu_test::run_case;

constexpr RopeMode kModes[] = {RopeMode::Fused, RopeMode::Prerotate};

// longrope needs rotary_dim / 2 factors per list.
std::string longrope_program(int pairs) {
  std::string lf, sf;
  for (int r = 0; r < pairs; ++r) {
    lf += fmt::format("{}{:.3f}", r ? ", " : "", 1.0 + 0.1 * r);
    sf += fmt::format("{}{:.3f}", r ? ", " : "", 1.0 + 0.02 * r);
  }
  return fmt::format("softmax(causal(rope(Q, K, rope_type=longrope, factor=8, original_max_position_embeddings=256, "
                     "long_factor=[{}], short_factor=[{}]))) @ V", lf, sf);
}

TEST(CudaRope, EveryFormInBothPlacements) {
  const std::vector<std::string> programs = {
      "softmax(causal(rope(Q, K))) @ V",
      "softmax(causal(rope(Q, K, base=500000, style=gptj))) @ V",
      "softmax(causal(rope(Q, K, rotary_dim=32))) @ V",
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=16, scale=0.2))) @ V",
      // Rotary spans that split an 8-element chunk: the pre-rotation's 32-bit path.
      "softmax(causal(rope(Q, K, rotary_dim=20))) @ V",
      "softmax(causal(rope(Q, K, style=gptj, rotary_dim=12))) @ V",
      "softmax(causal(rope(Q, K, base=500000, rope_type=llama3, factor=32, low_freq_factor=1, "
      "high_freq_factor=4, original_max_position_embeddings=128))) @ V",
      "softmax(causal(rope(Q, K, rope_type=yarn, factor=4, original_max_position_embeddings=128))) @ V",
      "softmax(causal(rope(Q, K, rope_type=dynamic, factor=2, original_max_position_embeddings=128))) @ V",
      "softmax(rope(Q, K, rope_type=linear, factor=4)) @ V",
      "softmax(softcap(alibi(sliding_window(causal(rope(Q, K)), 90)), 20)) @ V",
  };
  uint32_t seed = 300;
  for (const std::string& prog : programs)
    for (RopeMode mode : kModes)
      for (int d : {64, 128})
        run_case({prog, d == 64 ? DType::BF16 : DType::F16, d, 2, 4, 2, 200, 333, std::nullopt, false, mode}, seed++);
  for (RopeMode mode : kModes) run_case({longrope_program(32), DType::BF16, 64, 1, 4, 1, 300, 300, std::nullopt, false, mode}, seed++);
}

// The caller's cos/sin tables (device memory) replace the computed angles in every kernel that
// rotates: the fused prefill tile, the pre-rotation (16-byte and 32-bit paths), the decode tile
// and rope_window (whose windows still come from the program's wavelengths).
TEST(CudaRope, CallerTablesInEveryPlacement) {
  uint32_t seed = 700;
  for (RopeMode mode : kModes) {
    for (const char* prog : {"softmax(causal(rope(Q, K))) @ V", "softmax(causal(rope(Q, K, style=gptj, rotary_dim=32))) @ V",
                             "softmax(causal(rope(Q, K, rotary_dim=20))) @ V"})
      for (int d : {64, 128}) {
        gpu_test::Case c{prog, DType::BF16, d, 1, 4, 2, 150, 333, std::nullopt, false, mode};
        c.rope_tables = true;
        run_case(c, seed++);
      }
    gpu_test::Case window{"softmax(causal(rope_window(Q, K, k=1))) @ V", DType::F16, 128, 1, 4, 2, 200, 300,
                          std::nullopt, false, mode};
    window.rope_tables = true;
    run_case(window, seed++);
  }
  for (int64_t nq : {1, 5}) {  // the decode tile, with a split key axis
    gpu_test::Case decode{"softmax(causal(rope(Q, K, base=500000))) @ V", DType::BF16, 128, 1, 8, 2, nq, 5000,
                          std::nullopt};
    decode.rope_tables = true;
    run_case(decode, seed++);
  }
}

TEST(CudaRope, PositionsFollowQOffsetAndHeadDims) {
  uint32_t seed = 400;
  for (RopeMode mode : kModes) {
    // decode, chunked prefill far into the sequence, and positions near 2^17 where fp32 angles
    // (position * θ) would already be off by ~1e-2 rad.
    for (auto [nq, nk, off] : {std::tuple<int64_t, int64_t, int64_t>{1, 1000, 999}, {16, 700, 699 - 15},
                               {100, 300, 5000}, {16, 257, 131000}})
      run_case({"softmax(causal(rope(Q, K, base=500000))) @ V", DType::BF16, 128, 1, 8, 2, nq, nk, off, false, mode},
               seed++);
    for (int d : {96, 256}) {
      run_case({"softmax(causal(rope(Q, K, style=gptj))) @ V", DType::F16, d, 1, 2, 1, 129, 300, std::nullopt, false,
                mode}, seed++);
      // A decode step of a whole GQA group (Phi-3's D = 96: 24 pair units, which do not divide
      // the tile's 128 threads).
      run_case({"softmax(causal(rope(Q, K))) @ V", DType::BF16, d, 2, 8, 2, 1, 3001, std::nullopt, false, mode}, seed++);
    }
    // BSHD inputs: the rotation reads through strides in both placements.
    run_case({"softmax(causal(rope(Q, K))) @ V", DType::BF16, 128, 2, 8, 2, 300, 300, std::nullopt, true, mode}, seed++);
  }
}

TEST(CudaRope, RopeWindowPrunesExactlyPerCell) {
  uint32_t seed = 500;
  for (RopeMode mode : kModes)
    for (double k : {0.25, 1.0, 8.0})
      for (int d : {64, 128}) {
        // base 10000: high-frequency pairs have windows of a few positions, so most tiles hold
        // live, dead and boundary pairs at once.
        run_case({fmt::format("softmax(causal(rope_window(Q, K, k={}))) @ V", k), d == 64 ? DType::F16 : DType::BF16,
                  d, 1, 4, 2, 700, 700, std::nullopt, false, mode}, seed++);
        run_case({fmt::format("softmax(rope_window(Q, K, k={}, style=gptj, rotary_dim=32)) @ V", k), DType::BF16, d, 1,
                  2, 1, 150, 520, std::nullopt, false, mode}, seed++);
      }
  for (RopeMode mode : kModes) {
    run_case({"softmax(alibi(sliding_window(causal(rope_window(Q, K, k=2, base=500000)), 300))) @ V", DType::BF16, 128,
              1, 4, 1, 800, 800, std::nullopt, false, mode}, seed++);
    // decode against a long cache: one query row, many boundary pairs per tile.
    run_case({"softmax(causal(rope_window(Q, K, k=0.5))) @ V", DType::BF16, 128, 1, 8, 2, 1, 5000, std::nullopt, false,
              mode}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=1))) @ V", DType::F16, 256, 1, 2, 1, 200, 400, std::nullopt, false,
              mode}, seed++);
  }
}

// On Hopper the prerotated rope_window runs the wgmma form: Q and K rotated with interleaved
// pairs, leading dead k steps skipped per warpgroup tile, boundary pairs taken back per cell
// (rope.cuh, WindowCut). These cases reach what the plain sweep above does not: neox partial
// spans through both rotation paths (16-byte and 32-bit), a sequence long enough that far tiles
// skip most k steps, base 100 (every window under ~150 positions) so that far tiles keep no
// rotated pair at all (S = 0 from a fully masked step, or only the unrotated dims), and longrope
// factors that make wavelengths non-monotone, so dead pairs also sit past the lead step. (On
// other GPUs they run the mma.sync form.)
TEST(CudaRope, RopeWindowInterleavedPrerotation) {
  uint32_t seed = 700;
  for (int d : {64, 128}) {
    run_case({"softmax(causal(rope_window(Q, K, k=1, rotary_dim=32))) @ V", DType::BF16, d, 1, 4, 2, 400, 400,
              std::nullopt, false, RopeMode::Prerotate}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=1, rotary_dim=20))) @ V", DType::F16, d, 1, 4, 2, 333, 333,
              std::nullopt, false, RopeMode::Prerotate}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=0.25))) @ V", DType::BF16, d, 1, 2, 1, 3000, 3000, std::nullopt,
              false, RopeMode::Prerotate}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=0.25, base=100))) @ V", DType::F16, d, 1, 2, 1, 700, 700,
              std::nullopt, false, RopeMode::Prerotate}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=0.25, base=100, rotary_dim=32))) @ V", DType::BF16, d, 1, 2, 1, 700,
              700, std::nullopt, false, RopeMode::Prerotate}, seed++);
  }
  // Every other pair's frequency divided by 40: wavelengths zigzag.
  std::string lf, sf;
  for (int r = 0; r < 32; ++r) {
    lf += fmt::format("{}{}", r ? ", " : "", r % 2 ? 40 : 1);
    sf += fmt::format("{}{}", r ? ", " : "", r % 2 ? 40 : 1);
  }
  run_case({fmt::format("softmax(causal(rope_window(Q, K, k=1, rope_type=longrope, factor=2, "
                        "original_max_position_embeddings=4096, long_factor=[{}], short_factor=[{}]))) @ V",
                        lf, sf),
            DType::BF16, 64, 1, 4, 1, 900, 900, std::nullopt, false, RopeMode::Prerotate},
           seed++);
  // Chunked prefill: queries at the end of a longer cache (q_offset), non-causal cells too.
  run_case({"softmax(rope_window(Q, K, k=0.5, base=500000)) @ V", DType::BF16, 128, 2, 4, 2, 200, 1500, 1000, false,
            RopeMode::Prerotate}, seed++);
  // Causal chunks whose diagonal is not tile-aligned (q_offset 1167, then 1100 with keys past the
  // last query): the cut's Δ ranges stop at each warp's last query position, and only Δ > limit
  // is taken back, so the cells left out of both must be exactly the masked ones.
  run_case({"softmax(causal(rope_window(Q, K, k=1))) @ V", DType::BF16, 128, 1, 4, 2, 333, 1500, std::nullopt, false,
            RopeMode::Prerotate}, seed++);
  run_case({"softmax(causal(rope_window(Q, K, k=0.5))) @ V", DType::F16, 64, 2, 4, 1, 200, 1500, 1100, false,
            RopeMode::Prerotate}, seed++);
}

TEST(CudaRope, AutoPlacementRunsWhicheverItPicks) {
  // The cost model picks fused for short sequences and prerotate for long ones; both are right.
  const passes::RopeCostModel m = passes::rope_cost_model_h200();
  const passes::RopeCallShape small{1, 8, 2, 256, 256, 128, 0, true, 0};
  const passes::RopeCallShape large{1, 8, 2, 8192, 8192, 128, 0, true, 0};
  EXPECT_EQ(passes::choose_rope_mode(small, m), RopeMode::Fused);
  EXPECT_EQ(passes::choose_rope_mode(large, m), RopeMode::Prerotate);
  run_case({"softmax(causal(rope(Q, K))) @ V", DType::BF16, 128, 1, 8, 2, 256, 256, std::nullopt}, 600);
  run_case({"softmax(causal(rope(Q, K))) @ V", DType::BF16, 128, 1, 8, 2, 8192, 8192, std::nullopt}, 601);
}

// Small shapes for compute-sanitizer (memcheck, racecheck): every kernel path of RoPE once.
TEST(CudaRope, SanitizerSubset) {
  uint32_t seed = 700;
  for (RopeMode mode : kModes) {
    run_case({"softmax(causal(rope(Q, K))) @ V", DType::BF16, 128, 1, 2, 1, 150, 300, std::nullopt, false, mode}, seed++);
    run_case({"softmax(causal(rope_window(Q, K, k=0.5, style=gptj))) @ V", DType::F16, 64, 1, 2, 1, 200, 200,
              std::nullopt, false, mode}, seed++);
  }
}

// 16 bf16 rows of D = 64 for Q = K = V and O in `buf`: a call refused before launch, or too small
// to matter.
AttentionArgs tiny_bf16_args(runtime::DeviceBuffer& buf) {
  AttentionArgs a;
  a.q = TensorView::contiguous(buf.get(), DType::BF16, {1, 1, 16, 64});
  a.k = a.q;
  a.v = a.q;
  a.out = TensorView::contiguous(static_cast<char*>(buf.get()) + 4096, DType::BF16, {1, 1, 16, 64});
  return a;
}

// Runs the call and expects Error(Unsupported) whose message holds `text`.
void expect_unsupported(const KernelSpec& spec, const AttentionArgs& a, const std::string& text) {
  try {
    runtime::run_cuda(spec, a, nullptr, true);
    FAIL() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(CudaRope, OddRotaryDimIsRefusedBeforeLaunch) {
  const KernelSpec spec =
      Program::parse("softmax(rope(Q, K, rotary_dim=6)) @ V").compile({Target::Cuda, DType::BF16, 64});
  runtime::DeviceBuffer buf(1 << 20);
  expect_unsupported(spec, tiny_bf16_args(buf), "multiple of 4");
}

// rope_window's window test runs in 32 bits with positions within ±2^29 (cuda_backend.cpp).
TEST(CudaRope, RopeWindowPositionsPast2To29AreRefused) {
  const KernelSpec spec =
      Program::parse("softmax(rope_window(Q, K, k=1)) @ V").compile({Target::Cuda, DType::BF16, 64});
  runtime::DeviceBuffer buf(1 << 20);
  AttentionArgs a = tiny_bf16_args(buf);
  a.q_offset = (int64_t{1} << 29) - 16;  // the last query at 2^29 - 1: allowed
  runtime::run_cuda(spec, a, nullptr, true);
  a.q_offset = int64_t{1} << 29;
  expect_unsupported(spec, a, "2^29");
}

}  // namespace
}  // namespace attnfuse
