// Dependent decode launches whose kernel ahead appends to their KV cache (programmatic dependent
// launch: a decode block is scheduled while the kernel ahead finishes, and must read K only after
// griddepcontrol.wait). Every TMA decode block copies its first key tiles right after that wait;
// the thirty-third session also tried asking them into L2 before it (not kept,
// bench/experiments/kv_l2_prefetch.patch), which this test checked as well.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "attnfuse/attention.hpp"
#include "gpu_inputs.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"

namespace attnfuse {
namespace {

using gpu_test::Dims;
using gpu_test::Inputs;
using gpu_test::Outputs;
using runtime::DeviceBuffer;
using runtime::LaunchTuning;

class CudaCacheAppend : public gpu_test::SeededCudaTest {};

constexpr int kCalls = 6;
// Call i writes its O into this key row of the cache call i + 1 reads: inside the first key tile
// of that call's first split block, the tile it copies right after its wait.
int64_t append_row(int i) { return 5 + 7 * i; }

// Two caches, each a copy of in.k at first. Call i reads cache i % 2 and writes its O [1, H, 1, D]
// (H = Hkv) into row append_row(i) of every head of cache (i + 1) % 2, the next call's: a cache
// append by the kernel ahead. Queued back to back with no host sync; returns both caches and the
// LSE of every call.
struct Chain {
  std::vector<uint16_t> cache[2];
  std::vector<std::vector<float>> lse;
};
Chain run_chain(const KernelSpec& spec, const Inputs& in, const Dims& d, const LaunchTuning& t) {
  DeviceBuffer caches[2] = {gpu_test::upload(in.k), gpu_test::upload(in.k)};
  std::vector<DeviceBuffer> lses;
  const auto n_lse = static_cast<size_t>(d.B * d.Hq * d.Nq);
  for (int i = 0; i < kCalls; ++i) lses.emplace_back(n_lse * 4).poison();
  for (int i = 0; i < kCalls; ++i) {
    AttentionArgs a = in.device;
    a.k = TensorView::contiguous(caches[i % 2].get(), spec.dtype, {d.B, d.Hkv, d.Nk, d.D});
    TensorView o = a.k;  // the cache's strides: heads Nk * D apart
    o.data = static_cast<uint16_t*>(caches[(i + 1) % 2].get()) + append_row(i) * d.D;
    o.shape = {d.B, d.Hq, d.Nq, d.D};
    a.out = o;
    a.lse = LseView::contiguous(static_cast<float*>(lses[size_t(i)].get()), {d.B, d.Hq, d.Nq});
    runtime::run_cuda(spec, a, nullptr, /*sync=*/false, t);
  }
  runtime::check(runtime::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  Chain c;
  for (int b = 0; b < 2; ++b) {
    c.cache[b].resize(in.k.size());
    caches[b].download(c.cache[b].data());
  }
  for (const DeviceBuffer& l : lses) {
    c.lse.emplace_back(n_lse);
    l.download(c.lse.back().data());
  }
  return c;
}

TEST_F(CudaCacheAppend, DependentDecodeReadsTheKernelAheadsAppend) {
  // Each call against the float64 reference on the cache it was given (in.k with the rows the
  // calls before it appended), and every bit of the chain equal to the same chain launched in
  // plain stream order.
  TRACE_SEED();
  const KernelSpec spec = gpu_test::cuda_spec("softmax(causal(scaled_dot_product(Q, K))) @ V", DType::BF16, 128);
  const Dims d{1, 8, 8, 1, 9001, 128};
  Inputs in = gpu_test::make_inputs(spec, d, rng_);
  LaunchTuning dependent{16}, ordered{16};
  dependent.dependent_launch = LaunchTuning::DependentLaunch::On;
  ordered.dependent_launch = LaunchTuning::DependentLaunch::Off;
  const Chain got = run_chain(spec, in, d, dependent);
  const Chain plain = run_chain(spec, in, d, ordered);
  EXPECT_EQ(got.cache[0], plain.cache[0]) << "the dependent chain's appended rows differ from stream order";
  EXPECT_EQ(got.cache[1], plain.cache[1]) << "the dependent chain's appended rows differ from stream order";

  const auto at = [&](int64_t h, int64_t r) { return static_cast<size_t>((h * d.Nk + r) * d.D); };
  std::vector<uint16_t> state[2] = {in.k, in.k};  // the caches as call i finds them
  for (int i = 0; i < kCalls; ++i) {
    SCOPED_TRACE(fmt::format("call {}", i));
    const std::vector<uint16_t>& written = got.cache[(i + 1) % 2];
    Outputs o;
    o.out.resize(static_cast<size_t>(d.Hq * d.D));
    for (int64_t h = 0; h < d.Hq; ++h)
      std::memcpy(o.out.data() + h * d.D, written.data() + at(h, append_row(i)), size_t(d.D) * 2);
    o.lse = got.lse[size_t(i)];
    AttentionArgs h = in.host;
    h.k = TensorView::contiguous(state[i % 2].data(), spec.dtype, {d.B, d.Hkv, d.Nk, d.D});
    EXPECT_TRUE(gpu_test::matches(gpu_test::expected(spec, h, d), spec.dtype, o));
    EXPECT_EQ(o.lse, plain.lse[size_t(i)]);
    for (int64_t hh = 0; hh < d.Hq; ++hh)  // the append call i + 1 reads
      std::memcpy(state[(i + 1) % 2].data() + at(hh, append_row(i)), o.out.data() + hh * d.D, size_t(d.D) * 2);
  }
}

}  // namespace
}  // namespace attnfuse
