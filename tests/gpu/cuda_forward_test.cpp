// The CUDA backend against the float64 reference (DESIGN §3 tolerance), on the GPU machine.
// tests/gpu/main.cpp skips the whole suite with one line where there is no CUDA device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "common/dtype.hpp"
#include "reference/reference.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/device_buffer.hpp"
#include "gpu_harness.hpp"

namespace attnfuse {
namespace {

using gpu_test::Case;
using gpu_test::run_case;
using runtime::DeviceBuffer;

class CudaForward : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!runtime::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

const char* kPrograms[] = {
    "softmax(full(scaled_dot_product(Q, K))) @ V",
    "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 100)) @ V",
    "softmax(sliding_window(scaled_dot_product(Q, K), 70)) @ V",
    "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
    "softmax(additive_bias(scaled_dot_product(Q, K))) @ V",
    "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(softcap(causal(scaled_dot_product(Q, K)), 5)) @ V",
    "softmax(causal(scaled_dot_product(Q, K, scale=0.3))) @ V",
};

TEST_F(CudaForward, EveryCombinatorAgainstReference) {
  uint32_t seed = 1;
  for (const char* prog : kPrograms)
    for (DType t : {DType::BF16, DType::F16})
      for (int d : {64, 128}) run_case({prog, t, d, 2, 4, 2, 200, 333, std::nullopt}, seed++);
}

// Long key lists run the wgmma loop's barrier phases through several wraps: D = 64 takes the
// pingpong schedule (4 stages, the empty/full mbarriers and the turn-taking named barriers),
// D = 128 the lockstep one. Key counts that leave 1, 2 and 3 tiles past a stage multiple, and a
// sliding window that gives each row block a different list length.
TEST_F(CudaForward, LongKeyListsThroughEveryPipelineStage) {
  uint32_t seed = 400;
  for (int d : {64, 128})
    for (const char* prog : {"softmax(full(scaled_dot_product(Q, K))) @ V", "softmax(causal(scaled_dot_product(Q, K))) @ V",
                             "softmax(alibi(sliding_window(causal(scaled_dot_product(Q, K)), 900))) @ V"})
      for (auto [nq, nk] : {std::pair<int64_t, int64_t>{640, 2177}, {1031, 1031}, {257, 1409}})
        run_case({prog, DType::BF16, d, 1, 4, 2, nq, nk, std::nullopt}, seed++);
}

TEST_F(CudaForward, HeadDimsAndOddLengths) {
  uint32_t seed = 100;
  for (int d : {64, 96, 128, 256})
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{1, 1}, {17, 17}, {113, 127}, {129, 129}, {1, 1023}, {300, 129}})
      run_case({"softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, d, 1, 8, 1, nq, nk, std::nullopt}, seed++);
}

TEST_F(CudaForward, FullyMaskedRowsAndQOffset) {
  // q_offset far before key 0: causal rows see nothing -> O = 0, LSE = -inf.
  run_case({"softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128, 1, 2, 2, 64, 64, int64_t{-32}}, 7);
  run_case({"softmax(sliding_window(causal(scaled_dot_product(Q, K)), 8)) @ V", DType::F16, 64, 1, 2, 1, 150, 40, int64_t{0}}, 8);
}

TEST_F(CudaForward, ScalarsChangeWithoutRecompileAndStillApply) {
  // Same structure, different run-time values: one cached kernel, each call with its own values.
  for (int w : {300, 8, 64, 1})
    run_case({fmt::format("softmax(sliding_window(causal(scaled_dot_product(Q, K)), {})) @ V", w),
              DType::BF16, 64, 1, 2, 2, 200, 260, std::nullopt}, 50 + w);
  for (const char* scale : {"0.02", "0.3", "0.125"})
    run_case({fmt::format("softmax(scaled_dot_product(Q, K, scale={})) @ V", scale), DType::F16, 128, 1, 2, 1,
              150, 150, std::nullopt}, 60);
  for (const char* cap : {"2", "50"})
    run_case({fmt::format("softmax(softcap(scaled_dot_product(Q, K, scale=0.5), {})) @ V", cap), DType::BF16, 64,
              1, 2, 1, 100, 100, std::nullopt}, 70);
}

// Lazy rescaling (scores_to_probs in attention_fwd.cuh): a row keeps its running maximum until a
// tile's maximum exceeds it by more than 8 (base 2), and the wgmma loop skips O's rescale when no
// row of the warp moved it. Scores drifting along the keys take each path: a steep rise moves the
// maximum on every tile (24 bits per 128 keys at D = 128), a gentle one every few tiles (about 2.5
// bits per 128 keys, so probabilities up to 2^8 accumulate unscaled in between), and a fall never
// after the first tile. Prefill (wgmma at both head dims) and decode rows (split and merged).
// The steep ramp runs in fp16 only: its scores reach hundreds, where bf16's naive reference
// (S rounded to bf16) errs by O(1) and the tolerance could not catch a missing rescale.
// bench/experiments/lazy_rescale_test_model.py models these cases in numpy: a kernel that never
// rescales fails every rising one by 2.4-120x the tolerance, and the lazy rule passes with a
// 2-1000x margin (least on the falling ramp, where the kernel's and the naive errors are alike).
TEST_F(CudaForward, ScoresRisingAndFallingAcrossTiles) {
  uint32_t seed = 900;
  const std::pair<float, DType> ramps[] = {
      {1.5f, DType::F16}, {0.15f, DType::BF16}, {0.15f, DType::F16}, {-0.5f, DType::BF16}};
  for (auto [ramp, dtype] : ramps)
    for (int d : {64, 128})
      for (const char* prog : {"softmax(full(scaled_dot_product(Q, K))) @ V", "softmax(causal(scaled_dot_product(Q, K))) @ V"})
        for (auto [nq, nk] : {std::pair<int64_t, int64_t>{333, 1500}, {1, 3001}, {7, 2000}}) {
          Case c{prog, dtype, d, 1, 4, 2, nq, nk, std::nullopt};
          c.key_ramp = ramp;
          run_case(c, seed++);
        }
  Case gqa{"softmax(causal(scaled_dot_product(Q, K))) @ V", DType::F16, 128, 2, 8, 2, 640, 2177, std::nullopt};
  gqa.key_ramp = 0.15f;
  run_case(gqa, seed++);
}

TEST_F(CudaForward, StridedBshdLayout) {
  // BSHD tensors (sequence-major, as most model code stores them) need no copy.
  run_case({"softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128, 2, 8, 2, 300, 300, std::nullopt, true}, 80);
  run_case({"softmax(alibi(sliding_window(scaled_dot_product(Q, K), 64))) @ V", DType::F16, 64, 1, 4, 4, 129, 200,
            std::nullopt, true}, 81);
}

TEST_F(CudaForward, MisalignedRowsAreRejectedBeforeLaunch) {
  const KernelSpec spec = Program::parse("softmax(scaled_dot_product(Q, K)) @ V").compile({Target::Cuda, DType::BF16, 64});
  DeviceBuffer buf(1 << 20);
  const auto expect_refused = [&](const AttentionArgs& a, const char* words) {
    try {
      runtime::run_cuda(spec, a, nullptr, true);
      FAIL() << "expected a Shape error naming '" << words << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Shape);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  AttentionArgs a;
  a.q = TensorView::contiguous(buf.get(), DType::BF16, {1, 1, 16, 64});
  a.v = a.q;
  a.k = a.q;
  a.k.data = static_cast<char*>(buf.get()) + 2;  // 2-byte aligned
  a.out = TensorView::contiguous(static_cast<char*>(buf.get()) + 4096, DType::BF16, {1, 1, 16, 64});
  expect_refused(a, "16-byte aligned");
  // O rows are stored as 32-bit pairs: an odd head stride would misalign every other head's rows.
  a.q = TensorView::contiguous(buf.get(), DType::BF16, {1, 2, 16, 64});
  a.k = a.v = TensorView::contiguous(buf.get(), DType::BF16, {1, 1, 16, 64});
  a.out = TensorView::contiguous(static_cast<char*>(buf.get()) + 4096, DType::BF16, {1, 2, 16, 64});
  a.out.strides[1] = 16 * 64 + 1;
  expect_refused(a, "even strides");
}

TEST_F(CudaForward, AdditiveBiasAtEdgeTiles) {
  // Bias rows of aligned and odd lengths, partial query and key tiles, broadcast over batch; the
  // bias in fp32 and in the inputs' dtype (prefill, wgmma and decode tiles).
  const char* prog = "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V";
  uint32_t seed = 90;
  for (const bool b16 : {false, true})
    for (int d : {64, 128})
      for (auto [nq, nk] : {std::pair<int64_t, int64_t>{129, 256}, {300, 300}, {1, 64}, {100, 333}, {77, 101}}) {
        Case c{prog, d == 64 ? DType::BF16 : DType::F16, d, 2, 4, 2, nq, nk, std::nullopt};
        c.bias_16bit = b16;
        run_case(c, seed++);
      }
  run_case({"softmax(softcap(additive_bias(scaled_dot_product(Q, K)), 20)) @ V", DType::BF16, 256, 1, 2, 1, 150, 512,
            std::nullopt}, seed++);
}

// Custom slopes come from a device copy made once per distinct set (runtime/device_slopes.hpp).
// Programs of one structure share a kernel, so the second and third sets run the kernel the first
// compiled, with only the slopes changed; the decode shapes (Nq 1 and 3, GQA groups of 4 and 8)
// take the GQA-packed tile, whose padding rows read slopes past the last head.
TEST_F(CudaForward, CustomAlibiSlopes) {
  uint32_t seed = 700;
  const char* sets[] = {"slopes=[0.5, 0.03125, 0.25, 0.0078125, 1.5, 0.001, 0.125, 0.0625]",
                        "slopes=[0.0625, 0.125, 0.001, 1.5, 0.0078125, 0.25, 0.03125, 0.5]",
                        "slopes=[-0.01, 0.2, 0, 0.3, -0.002, 0.05, 0.7, 0.01]", "slopes=[0.3]"};
  for (const char* slopes : sets)
    for (int d : {64, 128}) {
      const std::string causal = fmt::format("softmax(alibi(causal(scaled_dot_product(Q, K)), {})) @ V", slopes);
      const std::string window =
          fmt::format("softmax(alibi(sliding_window(scaled_dot_product(Q, K), 300), {})) @ V", slopes);
      run_case({causal, DType::BF16, d, 2, 8, 2, 200, 333, std::nullopt}, seed++);
      run_case({window, DType::F16, d, 1, 8, 1, 129, 700, std::nullopt}, seed++);
      run_case({causal, DType::BF16, d, 2, 8, 2, 1, 3001, std::nullopt}, seed++);
      run_case({causal, DType::BF16, d, 1, 8, 1, 3, 777, std::nullopt}, seed++);
    }
}

TEST_F(CudaForward, FreshSeed) {
  const uint32_t seed = std::random_device{}();
  run_case({"softmax(causal(alibi(scaled_dot_product(Q, K)))) @ V", DType::BF16, 128, 2, 8, 2, 1000, 1000, std::nullopt}, seed);
}

}  // namespace
}  // namespace attnfuse
