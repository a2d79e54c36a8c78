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

namespace attnfuse {
namespace {

using runtime::DeviceBuffer;

// One host tensor in the kernel's dtype (16-bit), BHSD contiguous.
struct HostTensor {
  std::vector<uint16_t> data;
  TensorView view;
  HostTensor(DType t, std::array<int64_t, 4> shape, std::mt19937& rng) {
    int64_t n = shape[0] * shape[1] * shape[2] * shape[3];
    data.resize(static_cast<size_t>(n));
    std::normal_distribution<float> dist(0.f, 1.f);
    for (auto& x : data) x = t == DType::BF16 ? f32_to_bf16(dist(rng)) : f32_to_f16(dist(rng));
    view = TensorView::contiguous(data.data(), t, shape);
  }
};

struct Case {
  std::string program;
  DType dtype;
  int head_dim;
  int64_t B, Hq, Hkv, Nq, Nk;
  std::optional<int64_t> q_offset;
  bool bshd = false;  // Q/K/V/O stored [B, S, H, D] and passed as strided BHSD views
};

std::string case_name(const Case& c) {
  return c.program + " " + dtype_name(c.dtype) + " D=" + std::to_string(c.head_dim) + " B" +
         std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " Hkv" + std::to_string(c.Hkv) +
         " Nq" + std::to_string(c.Nq) + " Nk" + std::to_string(c.Nk);
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(case_name(c) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const KernelSpec spec =
      Program::parse(c.program).compile({Target::Cuda, c.dtype, c.head_dim});
  HostTensor q(c.dtype, {c.B, c.Hq, c.Nq, c.head_dim}, rng);
  HostTensor k(c.dtype, {c.B, c.Hkv, c.Nk, c.head_dim}, rng);
  HostTensor v(c.dtype, {c.B, c.Hkv, c.Nk, c.head_dim}, rng);
  std::vector<float> bias;
  AttentionArgs host{q.view, k.view, v.view, {}, {}, {}, nullptr, c.q_offset};
  if (spec.needs_bias()) {
    bias.resize(static_cast<size_t>(c.Hq * c.Nq * c.Nk));
    std::normal_distribution<float> dist(0.f, 1.f);
    for (auto& x : bias) x = dist(rng);
    host.bias = TensorView::contiguous(bias.data(), DType::F32, {1, c.Hq, c.Nq, c.Nk});
  }
  const auto ref = reference::attention(spec, host, reference::Precision::F64);
  const auto naive = reference::attention(spec, host, reference::Precision::Naive);

  const size_t elem = 2;
  // BSHD: the same logical tensors stored sequence-major; the kernel reads them through strides.
  auto to_bshd = [](const HostTensor& t) {
    const auto& sh = t.view.shape;
    std::vector<uint16_t> out(t.data.size());
    for (int64_t b = 0; b < sh[0]; ++b)
      for (int64_t h = 0; h < sh[1]; ++h)
        for (int64_t s = 0; s < sh[2]; ++s)
          for (int64_t d = 0; d < sh[3]; ++d)
            out[static_cast<size_t>(((b * sh[2] + s) * sh[1] + h) * sh[3] + d)] =
                t.data[static_cast<size_t>(t.view.offset(b, h, s, d))];
    return out;
  };
  auto bshd_view = [](void* data, DType dt, std::array<int64_t, 4> sh) {
    TensorView v = TensorView::contiguous(data, dt, sh);
    v.strides = {sh[2] * sh[1] * sh[3], sh[3], sh[1] * sh[3], 1};
    return v;
  };
  DeviceBuffer dq(q.data.size() * elem), dk(k.data.size() * elem), dv(v.data.size() * elem);
  DeviceBuffer dout(static_cast<size_t>(c.B * c.Hq * c.Nq * c.head_dim) * elem);
  DeviceBuffer dlse(static_cast<size_t>(c.B * c.Hq * c.Nq) * 4);
  DeviceBuffer dbias(bias.size() * 4);
  if (c.bshd) {
    dq.upload(to_bshd(q).data());
    dk.upload(to_bshd(k).data());
    dv.upload(to_bshd(v).data());
  } else {
    dq.upload(q.data.data());
    dk.upload(k.data.data());
    dv.upload(v.data.data());
  }
  if (!bias.empty()) dbias.upload(bias.data());
  dout.poison();
  dlse.poison();

  AttentionArgs dev = host;
  dev.q.data = dq.get();
  dev.k.data = dk.get();
  dev.v.data = dv.get();
  dev.out = TensorView::contiguous(dout.get(), c.dtype, {c.B, c.Hq, c.Nq, c.head_dim});
  if (c.bshd) {
    dev.q = bshd_view(dq.get(), c.dtype, q.view.shape);
    dev.k = bshd_view(dk.get(), c.dtype, k.view.shape);
    dev.v = bshd_view(dv.get(), c.dtype, v.view.shape);
    dev.out = bshd_view(dout.get(), c.dtype, {c.B, c.Hq, c.Nq, c.head_dim});
  }
  dev.lse = LseView::contiguous(static_cast<float*>(dlse.get()), {c.B, c.Hq, c.Nq});
  if (!bias.empty()) dev.bias->data = dbias.get();
  runtime::run_cuda(spec, dev, nullptr, /*sync=*/true);

  std::vector<uint16_t> out(static_cast<size_t>(c.B * c.Hq * c.Nq * c.head_dim));
  std::vector<float> lse(static_cast<size_t>(c.B * c.Hq * c.Nq));
  dout.download(out.data());
  dlse.download(lse.data());

  if (c.bshd) {  // back to BHSD order for the comparison
    std::vector<uint16_t> bhsd(out.size());
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t s = 0; s < c.Nq; ++s)
          for (int64_t d = 0; d < c.head_dim; ++d)
            bhsd[static_cast<size_t>(((b * c.Hq + h) * c.Nq + s) * c.head_dim + d)] =
                out[static_cast<size_t>(((b * c.Nq + s) * c.Hq + h) * c.head_dim + d)];
    out.swap(bhsd);
  }
  double err = 0, naive_err = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double o = c.dtype == DType::BF16 ? bf16_to_f32(out[i]) : f16_to_f32(out[i]);
    ASSERT_FALSE(std::isnan(o)) << "unwritten or NaN output at " << i;
    err = std::max(err, std::abs(o - ref.out[i]));
    naive_err = std::max(naive_err, std::abs(naive.out[i] - ref.out[i]));
  }
  EXPECT_LE(err, 2 * naive_err + 1e-5) << "max abs error " << err << " vs naive " << naive_err;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "row " << i << " lse " << lse[i];
    } else {
      ASSERT_NEAR(lse[i], ref.lse[i], 1e-2 + 1e-3 * std::abs(ref.lse[i])) << "row " << i;
    }
  }
}

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

TEST_F(CudaForward, StridedBshdLayout) {
  // BSHD tensors (sequence-major, as most model code stores them) need no copy.
  run_case({"softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128, 2, 8, 2, 300, 300, std::nullopt, true}, 80);
  run_case({"softmax(alibi(sliding_window(scaled_dot_product(Q, K), 64))) @ V", DType::F16, 64, 1, 4, 4, 129, 200,
            std::nullopt, true}, 81);
}

TEST_F(CudaForward, MisalignedRowsAreRejectedBeforeLaunch) {
  const KernelSpec spec = Program::parse("softmax(scaled_dot_product(Q, K)) @ V").compile({Target::Cuda, DType::BF16, 64});
  DeviceBuffer buf(1 << 20);
  AttentionArgs a;
  a.q = TensorView::contiguous(buf.get(), DType::BF16, {1, 1, 16, 64});
  a.k = a.q;
  a.v = a.q;
  a.out = TensorView::contiguous(static_cast<char*>(buf.get()) + 4096, DType::BF16, {1, 1, 16, 64});
  a.k.data = static_cast<char*>(buf.get()) + 2;  // 2-byte aligned
  try {
    runtime::run_cuda(spec, a, nullptr, true);
    FAIL() << "expected a Shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Shape);
    EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
  }
}

TEST_F(CudaForward, AdditiveBiasAtEdgeTiles) {
  // Bias rows of aligned and odd lengths, partial query and key tiles, broadcast over batch.
  const char* prog = "softmax(additive_bias(causal(scaled_dot_product(Q, K)))) @ V";
  uint32_t seed = 90;
  for (int d : {64, 128})
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{129, 256}, {300, 300}, {1, 64}, {100, 333}, {77, 101}})
      run_case({prog, d == 64 ? DType::BF16 : DType::F16, d, 2, 4, 2, nq, nk, std::nullopt}, seed++);
  run_case({"softmax(softcap(additive_bias(scaled_dot_product(Q, K)), 20)) @ V", DType::BF16, 256, 1, 2, 1, 150, 512,
            std::nullopt}, seed++);
}

TEST_F(CudaForward, FreshSeed) {
  const uint32_t seed = std::random_device{}();
  run_case({"softmax(causal(alibi(scaled_dot_product(Q, K)))) @ V", DType::BF16, 128, 2, 8, 2, 1000, 1000, std::nullopt}, seed);
}

}  // namespace
}  // namespace attnfuse
