// Inputs and checks of the GPU suite's decode, paged, document and block-sparse tests
// (gpu_inputs.hpp).
#include "gpu_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>

#include "attnfuse/program.hpp"
#include "common/dtype.hpp"
#include "common/tensors.hpp"
#include "gpu_harness.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::gpu_test {

namespace {

constexpr uint16_t kPoison16 = 0xFFFF;      // DeviceBuffer::poison's bytes
constexpr uint32_t kPoison32 = 0xFFFFFFFF;  // (a NaN no kernel writes)

float to_f32(DType t, uint16_t x) { return t == DType::BF16 ? bf16_to_f32(x) : f16_to_f32(x); }

uint16_t nan16(DType t) { return t == DType::BF16 ? uint16_t{0x7fc0} : uint16_t{0x7e00}; }

}  // namespace

KernelSpec cuda_spec(const std::string& program, DType dtype, int head_dim, RopeMode mode) {
  return Program::parse(program).compile({Target::Cuda, dtype, head_dim, mode});
}

DeviceBuffer upload(const void* src, size_t bytes) {
  DeviceBuffer b(bytes);
  if (bytes) b.upload(src);
  return b;
}

std::vector<uint16_t> random16(DType dtype, size_t n, std::mt19937_64& rng, float stddev) {
  std::normal_distribution<float> dist(0.f, stddev);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = dtype == DType::BF16 ? f32_to_bf16(dist(rng)) : f32_to_f16(dist(rng));
  return out;
}

std::string dims_name(const Dims& d) {
  return fmt::format("B{} Hq{} Hkv{} Nq{} Nk{} D{}", d.B, d.Hq, d.Hkv, d.Nq, d.Nk, d.D);
}

std::string tuning_name(const LaunchTuning& t) {
  const char* v = t.variant == LaunchTuning::Variant::Auto     ? "auto"
                  : t.variant == LaunchTuning::Variant::Decode ? "decode"
                                                               : "prefill";
  return fmt::format("variant {} splits {}{}", v, t.num_splits == 0 ? std::string("auto") : std::to_string(t.num_splits),
                     t.combine_kernel ? " (combine kernel)" : "");
}

const char* layout_name(PagedKV::Layout l) { return l == PagedKV::Layout::NHD ? "NHD" : "HND"; }

Inputs make_inputs(const KernelSpec& spec, const Dims& d, std::mt19937_64& rng, bool with_kv) {
  Inputs in;
  in.dtype = spec.dtype;
  in.dims = d;
  const DType t = spec.dtype;
  in.q = random16(t, static_cast<size_t>(d.B * d.Hq * d.Nq * d.D), rng);
  if (with_kv) {
    in.k = random16(t, static_cast<size_t>(d.B * d.Hkv * d.Nk * d.D), rng);
    in.v = random16(t, static_cast<size_t>(d.B * d.Hkv * d.Nk * d.D), rng);
  }
  if (spec.needs_bias()) {
    std::normal_distribution<float> dist(0.f, 1.f);
    in.bias.resize(static_cast<size_t>(d.B * d.Hq * d.Nq * d.Nk));
    for (auto& x : in.bias) x = dist(rng);
  }
  in.dq = upload(in.q);
  in.dk = upload(in.k);
  in.dv = upload(in.v);
  in.dbias = upload(in.bias);

  in.host.q = TensorView::contiguous(in.q.data(), t, {d.B, d.Hq, d.Nq, d.D});
  in.device.q = TensorView::contiguous(in.dq.get(), t, {d.B, d.Hq, d.Nq, d.D});
  if (with_kv) {
    in.host.k = TensorView::contiguous(in.k.data(), t, {d.B, d.Hkv, d.Nk, d.D});
    in.host.v = TensorView::contiguous(in.v.data(), t, {d.B, d.Hkv, d.Nk, d.D});
    in.device.k = TensorView::contiguous(in.dk.get(), t, {d.B, d.Hkv, d.Nk, d.D});
    in.device.v = TensorView::contiguous(in.dv.get(), t, {d.B, d.Hkv, d.Nk, d.D});
  }
  if (!in.bias.empty()) {
    in.host.bias = TensorView::contiguous(in.bias.data(), DType::F32, {d.B, d.Hq, d.Nq, d.Nk});
    in.device.bias = TensorView::contiguous(in.dbias.get(), DType::F32, {d.B, d.Hq, d.Nq, d.Nk});
  }
  return in;
}

Outputs run_device(const KernelSpec& spec, const AttentionArgs& args, const Dims& d, const LaunchTuning& tuning) {
  const auto n_out = static_cast<size_t>(d.B * d.Hq * d.Nq * d.D), n_lse = static_cast<size_t>(d.B * d.Hq * d.Nq);
  DeviceBuffer dout(n_out * 2), dlse(n_lse * 4);
  if (n_out) dout.poison();
  if (n_lse) dlse.poison();
  AttentionArgs a = args;
  a.out = TensorView::contiguous(dout.get(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
  a.lse = LseView::contiguous(static_cast<float*>(dlse.get()), {d.B, d.Hq, d.Nq});
  runtime::run_cuda(spec, a, nullptr, /*sync=*/true, tuning);
  Outputs o;
  o.out.resize(n_out);
  o.lse.resize(n_lse);
  if (n_out) dout.download(o.out.data());
  if (n_lse) dlse.download(o.lse.data());
  return o;
}

void expect_refused(const KernelSpec& spec, const AttentionArgs& args, const Dims& d, ErrorCode code,
                    const std::string& phrase, const LaunchTuning& tuning) {
  const auto n_out = static_cast<size_t>(d.B * d.Hq * d.Nq * d.D), n_lse = static_cast<size_t>(d.B * d.Hq * d.Nq);
  DeviceBuffer dout(n_out * 2), dlse(n_lse * 4);
  dout.poison();
  dlse.poison();
  AttentionArgs a = args;
  a.out = TensorView::contiguous(dout.get(), spec.dtype, {d.B, d.Hq, d.Nq, d.D});
  a.lse = LseView::contiguous(static_cast<float*>(dlse.get()), {d.B, d.Hq, d.Nq});
  try {
    runtime::run_cuda(spec, a, nullptr, /*sync=*/true, tuning);
    ADD_FAILURE() << "accepted; expected Error(" << error_code_name(code) << ") mentioning \"" << phrase << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << "message: " << e.what();
  }
  std::vector<uint16_t> out(n_out);
  std::vector<uint32_t> lse(n_lse);
  dout.download(out.data());
  dlse.download(lse.data());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint16_t x) { return x == kPoison16; })) << "O was written";
  EXPECT_TRUE(std::all_of(lse.begin(), lse.end(), [](uint32_t x) { return x == kPoison32; })) << "LSE was written";
}

Expected expected(const KernelSpec& spec, const AttentionArgs& host, const Dims& d) {
  return {reference::attention(spec, host, reference::Precision::F64),
          reference::attention(spec, host, reference::Precision::Naive), d};
}

::testing::AssertionResult matches(const Expected& e, DType dtype, const Outputs& got) {
  const Dims& d = e.dims;
  const int64_t rows = d.B * d.Hq * d.Nq;
  auto at = [&](int64_t row) {
    const int64_t i = row % d.Nq, h = (row / d.Nq) % d.Hq, b = row / (d.Nq * d.Hq);
    return fmt::format("[b {}, h {}, q {}]", b, h, i);
  };
  if (std::ssize(got.out) != rows * d.D || std::ssize(got.lse) != rows || std::ssize(e.ref.lse) != rows)
    return ::testing::AssertionFailure() << "size mismatch: outputs " << got.out.size() << " / " << got.lse.size()
                                         << ", reference " << e.ref.out.size() << " / " << e.ref.lse.size();
  std::string failures;
  int failed = 0;
  auto fail = [&](const std::string& msg) {
    if (failed++ < 6) failures += "  " + msg + "\n";
  };
  double err = 0, naive_err = 0;
  std::string worst;
  const double naive_lse = naive_lse_error(e.ref, e.naive);
  for (int64_t row = 0; row < rows; ++row) {
    const bool empty_row = std::isinf(e.ref.lse[size_t(row)]) && e.ref.lse[size_t(row)] < 0;
    for (int64_t x = 0; x < d.D; ++x) {
      const auto idx = static_cast<size_t>(row * d.D + x);
      const uint16_t bits = got.out[idx];
      const double ref = e.ref.out[idx];
      if (bits == kPoison16) {
        fail(fmt::format("O{} dim {} was never written (still poisoned)", at(row), x));
        continue;
      }
      const double o = to_f32(dtype, bits);
      if (std::isnan(o) || std::isinf(o)) {
        fail(fmt::format("O{} dim {} = {}, reference {}", at(row), x, o, ref));
        continue;
      }
      if (empty_row && o != 0.0) fail(fmt::format("O{} dim {} = {} in a row without kept keys (must be 0)", at(row), x, o));
      const double er = std::abs(o - ref);
      if (er > err) {
        err = er;
        worst = fmt::format("O{} dim {} = {} vs reference {}, naive {}", at(row), x, o, ref, e.naive.out[idx]);
      }
      if (std::isfinite(e.naive.out[idx])) naive_err = std::max(naive_err, std::abs(e.naive.out[idx] - ref));
    }
    const float l = got.lse[size_t(row)];
    const double rl = e.ref.lse[size_t(row)];
    if (std::bit_cast<uint32_t>(l) == kPoison32) {
      fail(fmt::format("LSE{} was never written (still poisoned)", at(row)));
    } else if (std::isinf(rl)) {
      if (!(std::isinf(l) && (l < 0) == (rl < 0))) fail(fmt::format("LSE{} = {}, reference {}", at(row), l, rl));
    } else if (std::isnan(l) || !(std::abs(double(l) - rl) <= lse_tolerance(rl, naive_lse))) {
      fail(fmt::format("LSE{} = {}, reference {}", at(row), l, rl));
    }
  }
  if (err > 2 * naive_err + 1e-5)
    fail(fmt::format("O max abs error {:.3g} > 2 * naive error {:.3g} + 1e-5 (at {})", err, naive_err, worst));
  // ATTNFUSE_TEST_MARGINS=1: every check's share of its O bound, for studies of how close the
  // kernels come to it.
  static const bool margins = std::getenv("ATTNFUSE_TEST_MARGINS") != nullptr;
  if (margins)
    std::cout << fmt::format("margin {:.3f} of the O bound ({}; error {:.3g}, naive {:.3g}; largest at {})\n",
                             err / (2 * naive_err + 1e-5), dims_name(d), err, naive_err, worst);
  if (failed == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failed << " check(s) failed (" << dims_name(d) << "):\n"
                                       << failures << (failed > 6 ? "  ...\n" : "");
}

::testing::AssertionResult bitwise_equal(const Outputs& a, const Outputs& b, const Dims& d) {
  if (a.out.size() != b.out.size() || a.lse.size() != b.lse.size())
    return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.lse.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i);
    if (std::bit_cast<uint32_t>(a.lse[i]) != std::bit_cast<uint32_t>(b.lse[i]))
      return ::testing::AssertionFailure()
             << fmt::format("LSE [b {}, h {}, q {}]: {} vs {}", row / (d.Nq * d.Hq), (row / d.Nq) % d.Hq,
                            row % d.Nq, a.lse[i], b.lse[i]);
    for (int64_t x = 0; x < d.D; ++x) {
      const auto j = static_cast<size_t>(row * d.D + x);
      if (a.out[j] != b.out[j])
        return ::testing::AssertionFailure()
               << fmt::format("O [b {}, h {}, q {}] dim {}: bits {:#06x} vs {:#06x}", row / (d.Nq * d.Hq),
                              (row / d.Nq) % d.Hq, row % d.Nq, x, a.out[j], b.out[j]);
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Paged KV caches --------------------------------------------------------------------------

namespace {

size_t pool_offset(PagedKV::Layout layout, int64_t ps, int64_t Hkv, int D, int64_t page, int64_t row, int64_t h) {
  const int64_t o = layout == PagedKV::Layout::NHD ? ((page * ps + row) * Hkv + h) * D : ((page * Hkv + h) * ps + row) * D;
  return static_cast<size_t>(o);
}

std::vector<uint16_t> gather(const PagedInputs& p, const std::vector<uint16_t>& pool, int64_t b, int64_t Hkv, int D) {
  const int64_t n = p.lengths[size_t(b)];
  std::vector<uint16_t> out(static_cast<size_t>(Hkv * n * D));
  for (int64_t h = 0; h < Hkv; ++h)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t page = p.indices[size_t(p.indptr[size_t(b)] + j / p.page_size)];
      const size_t src = pool_offset(p.layout, p.page_size, Hkv, D, page, j % p.page_size, h);
      std::copy_n(pool.begin() + static_cast<std::ptrdiff_t>(src), D,
                  out.begin() + static_cast<std::ptrdiff_t>((h * n + j) * D));
    }
  return out;
}

}  // namespace

std::vector<uint16_t> PagedInputs::gather_k(int64_t b, int64_t Hkv, int D) const { return gather(*this, k_pool, b, Hkv, D); }
std::vector<uint16_t> PagedInputs::gather_v(int64_t b, int64_t Hkv, int D) const { return gather(*this, v_pool, b, Hkv, D); }

PagedInputs make_paged(DType dtype, PagedKV::Layout layout, const std::vector<int64_t>& lengths, int64_t page_size,
                       int64_t Hkv, int D, bool share_prefix, std::mt19937_64& rng) {
  PagedInputs p;
  p.layout = layout;
  p.page_size = page_size;
  p.lengths = lengths;
  const int64_t B = std::ssize(lengths);
  auto pages_of = [&](int64_t n) { return (n + page_size - 1) / page_size; };
  // How many leading pages of sequence b are the first sequence's (full) pages.
  std::vector<int64_t> shared(static_cast<size_t>(B), 0);
  int64_t own = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (share_prefix && b > 0) shared[size_t(b)] = std::min(lengths[0] / page_size, (pages_of(lengths[size_t(b)]) + 1) / 2);
    own += pages_of(lengths[size_t(b)]) - shared[size_t(b)];
  }
  p.num_pages = own + 3;  // spare pages nobody uses
  std::vector<int32_t> order(static_cast<size_t>(p.num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  p.indptr.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)], pages = pages_of(n);
    for (int64_t t = 0; t < pages; ++t) {
      const int32_t page = t < shared[size_t(b)] ? p.indices[size_t(t)] : order[next++];
      p.indices.push_back(page);
    }
    p.indptr.push_back(static_cast<int32_t>(p.indices.size()));
    p.last.push_back(static_cast<int32_t>(pages == 0 ? 0 : n - (pages - 1) * page_size));
  }

  // NaN everywhere, then random values in every row some sequence covers.
  const auto pool_size = static_cast<size_t>(p.num_pages * page_size * Hkv * D);
  p.k_pool.assign(pool_size, nan16(dtype));
  p.v_pool.assign(pool_size, nan16(dtype));
  std::vector<uint8_t> filled(static_cast<size_t>(p.num_pages * page_size), 0);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto rnd = [&] { return dtype == DType::BF16 ? f32_to_bf16(dist(rng)) : f32_to_f16(dist(rng)); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < lengths[size_t(b)]; ++j) {
      const int64_t page = p.indices[size_t(p.indptr[size_t(b)] + j / page_size)], row = j % page_size;
      if (std::exchange(filled[size_t(page * page_size + row)], 1)) continue;
      for (int64_t h = 0; h < Hkv; ++h) {
        const size_t o = pool_offset(layout, page_size, Hkv, D, page, row, h);
        for (int x = 0; x < D; ++x) p.k_pool[o + size_t(x)] = rnd(), p.v_pool[o + size_t(x)] = rnd();
      }
    }

  p.dk = upload(p.k_pool);
  p.dv = upload(p.v_pool);
  p.dindices = upload(p.indices);
  p.dindptr = upload(p.indptr);
  p.dlast = upload(p.last);
  const std::array<int64_t, 4> shape = layout == PagedKV::Layout::NHD
                                           ? std::array<int64_t, 4>{p.num_pages, page_size, Hkv, D}
                                           : std::array<int64_t, 4>{p.num_pages, Hkv, page_size, D};
  p.host.layout = p.device.layout = layout;
  p.host.k_pages = TensorView::contiguous(p.k_pool.data(), dtype, shape);
  p.host.v_pages = TensorView::contiguous(p.v_pool.data(), dtype, shape);
  p.host.page_indices = p.indices;
  p.host.page_indptr = p.indptr;
  p.host.last_page_len = p.last;
  p.device.k_pages = TensorView::contiguous(p.dk.get(), dtype, shape);
  p.device.v_pages = TensorView::contiguous(p.dv.get(), dtype, shape);
  p.device.page_indices = {static_cast<const int32_t*>(p.dindices.get()), p.indices.size()};
  p.device.page_indptr = {static_cast<const int32_t*>(p.dindptr.get()), p.indptr.size()};
  p.device.last_page_len = {static_cast<const int32_t*>(p.dlast.get()), p.last.size()};
  return p;
}

void SeededCudaTest::SetUp() {
  std::string why;
  if (!runtime::cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  seed_ = test::fresh_seed();
  rng_.seed(seed_);
}

}  // namespace attnfuse::gpu_test
