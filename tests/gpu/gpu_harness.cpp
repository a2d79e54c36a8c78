// The GPU suite's harness (gpu_harness.hpp).
#include "gpu_harness.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/program.hpp"
#include "common/dtype.hpp"
#include "reference/reference.hpp"
#include "rope/frequencies.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/device_buffer.hpp"

namespace attnfuse::gpu_test {

using runtime::DeviceBuffer;

namespace {

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

}  // namespace

std::string case_name(const Case& c) {
  return c.program + " " + dtype_name(c.dtype) + " D=" + std::to_string(c.head_dim) + " B" +
         std::to_string(c.B) + " Hq" + std::to_string(c.Hq) + " Hkv" + std::to_string(c.Hkv) +
         " Nq" + std::to_string(c.Nq) + " Nk" + std::to_string(c.Nk) +
         (c.q_offset ? " q_offset" + std::to_string(*c.q_offset) : "") + " rope_mode=" + rope_mode_name(c.rope_mode) +
         (c.rope_tables ? " with rope tables" : "") + (c.key_ramp != 0.f ? fmt::format(" key_ramp {}", c.key_ramp) : "") +
         (c.bias_16bit ? " bias in the inputs' dtype" : "");
}

void run_case(const Case& c, uint32_t seed) {
  SCOPED_TRACE(case_name(c) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const KernelSpec spec =
      Program::parse(c.program).compile({Target::Cuda, c.dtype, c.head_dim, c.rope_mode});
  HostTensor q(c.dtype, {c.B, c.Hq, c.Nq, c.head_dim}, rng);
  HostTensor k(c.dtype, {c.B, c.Hkv, c.Nk, c.head_dim}, rng);
  HostTensor v(c.dtype, {c.B, c.Hkv, c.Nk, c.head_dim}, rng);
  if (c.key_ramp != 0.f) {
    const auto enc = [&](float x) { return c.dtype == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x); };
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < c.Nq; ++i) q.data[static_cast<size_t>(q.view.offset(b, h, i, 0))] = enc(1.f);
      for (int64_t h = 0; h < c.Hkv; ++h)
        for (int64_t j = 0; j < c.Nk; ++j)
          k.data[static_cast<size_t>(k.view.offset(b, h, j, 0))] = enc(c.key_ramp * static_cast<float>(j));
    }
  }
  std::vector<float> bias;
  std::vector<uint16_t> bias16;
  AttentionArgs host;
  host.q = q.view;
  host.k = k.view;
  host.v = v.view;
  host.q_offset = c.q_offset;
  if (spec.needs_bias()) {
    bias.resize(static_cast<size_t>(c.Hq * c.Nq * c.Nk));
    std::normal_distribution<float> dist(0.f, 1.f);
    for (auto& x : bias) x = dist(rng);
    host.bias = TensorView::contiguous(bias.data(), DType::F32, {1, c.Hq, c.Nq, c.Nk});
    if (c.bias_16bit) {
      bias16.resize(bias.size());
      for (size_t i = 0; i < bias.size(); ++i) store_elem(bias16.data(), c.dtype, static_cast<int64_t>(i), bias[i]);
      host.bias = TensorView::contiguous(bias16.data(), c.dtype, {1, c.Hq, c.Nq, c.Nk});
    }
  }
  std::vector<float> cos_t, sin_t;
  if (c.rope_tables) {
    // Tables of unrelated random values (not a rotation), so a kernel that computed its own
    // angles instead would fail the comparison.
    const int64_t pairs = rope::rotary_dim_of(spec.scalars.rope, c.head_dim) / 2;
    const int64_t positions = reference::rope_seq_len(host);
    std::normal_distribution<float> dist(0.f, 0.8f);
    cos_t.resize(static_cast<size_t>(positions * pairs));
    sin_t.resize(cos_t.size());
    for (size_t i = 0; i < cos_t.size(); ++i) cos_t[i] = dist(rng), sin_t[i] = dist(rng);
    host.rope_tables = RopeTablesView{cos_t.data(), sin_t.data(), positions, pairs};
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
  DeviceBuffer dbias(c.bias_16bit ? bias16.size() * 2 : bias.size() * 4);
  if (c.bshd) {
    dq.upload(to_bshd(q).data());
    dk.upload(to_bshd(k).data());
    dv.upload(to_bshd(v).data());
  } else {
    dq.upload(q.data.data());
    dk.upload(k.data.data());
    dv.upload(v.data.data());
  }
  if (!bias.empty()) dbias.upload(c.bias_16bit ? static_cast<const void*>(bias16.data()) : bias.data());
  DeviceBuffer dcos(cos_t.size() * 4), dsin(sin_t.size() * 4);
  if (!cos_t.empty()) {
    dcos.upload(cos_t.data());
    dsin.upload(sin_t.data());
  }
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
  if (c.rope_tables)
    dev.rope_tables = RopeTablesView{static_cast<const float*>(dcos.get()), static_cast<const float*>(dsin.get()),
                                     host.rope_tables->positions, host.rope_tables->pairs};
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
  const double naive_lse = naive_lse_error(ref, naive);
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "row " << i << " lse " << lse[i];
    } else {
      ASSERT_NEAR(lse[i], ref.lse[i], lse_tolerance(ref.lse[i], naive_lse)) << "row " << i;
    }
  }
}

double naive_lse_error(const reference::Result& ref, const reference::Result& naive) {
  double e = 0;
  for (size_t i = 0; i < ref.lse.size() && i < naive.lse.size(); ++i)
    if (std::isfinite(ref.lse[i]) && std::isfinite(naive.lse[i])) e = std::max(e, std::abs(naive.lse[i] - ref.lse[i]));
  return e;
}

}  // namespace attnfuse::gpu_test
