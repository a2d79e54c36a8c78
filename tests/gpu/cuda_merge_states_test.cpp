// merge_states on the GPU (runtime/merge_states_cuda.cpp, kernels/merge_states.cuh): the CPU
// merge's results on the same states (common/merge_cases.hpp: mixed dtypes, padded rows, strided
// LSEs, empty and NaN rows, in place, one launch and two levels); a chain of in-place merges on one
// stream; and a cascade, attention over a shared prefix and over a suffix merged on the device,
// against the float64 reference of the attention over both.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/dtype.hpp"
#include "common/merge_cases.hpp"
#include "gpu_harness.hpp"
#include "gpu_inputs.hpp"
#include "runtime/cuda_backend.hpp"
#include "runtime/cuda_driver.hpp"
#include "runtime/merge_states_cuda.hpp"

namespace attnfuse {
namespace {

using gpu_test::DeviceBuffer;
using test::MergeCase;

class CudaMergeStates : public gpu_test::SeededCudaTest {};

// The problem's states (and out) copied to the device, merged there, and the result copied back
// into the problem's target storage.
void merge_on_device(test::MergeProblem& p) {
  const MergeCase& c = p.c;
  struct Device {
    DeviceBuffer o, lse;
  };
  auto upload = [](test::MergeStorage& s) {
    return Device{gpu_test::upload(s.o_data(), s.o_bytes()), gpu_test::upload(s.lse)};
  };
  std::vector<Device> dev;
  std::vector<AttentionState> views;
  for (auto& s : p.states) {
    dev.push_back(upload(s));
    views.push_back(s.view(c, dev.back().o.get(), static_cast<float*>(dev.back().lse.get())));
  }
  Device out_dev = c.in_place >= 0 ? Device{} : upload(p.out);
  const AttentionState out = c.in_place >= 0
                                 ? views[static_cast<size_t>(c.in_place)]
                                 : p.out.view(c, out_dev.o.get(), static_cast<float*>(out_dev.lse.get()));
  runtime::merge_states_cuda(views, out, nullptr);
  runtime::check(runtime::driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  const Device& from = c.in_place >= 0 ? dev[static_cast<size_t>(c.in_place)] : out_dev;
  test::MergeStorage& to = p.target();
  from.o.download(to.o_data());
  from.lse.download(to.lse.data());
}

TEST_F(CudaMergeStates, MergesLikeTheCpu) {
  TRACE_SEED();
  std::mt19937 rng(static_cast<uint32_t>(seed_));
  using enum DType;
  const std::vector<MergeCase> cases = {
      {2, 8, 33, 128, {BF16, BF16}, BF16},                         // a cascade's two parts
      {1, 4, 9, 72, {BF16, F32}, BF16},                            // chunks of 8 elements
      {1, 32, 17, 128, std::vector<DType>(16, F32), BF16, 0, true},  // split partials, LSE [B, N, H]
      {1, 4, 9, 64, {BF16, F16, F32}, F32, 4},                     // mixed, padded rows, chunks of 4
      {1, 2, 5, 37, {F16, BF16}, F16, 3, true},                    // one element per lane
      {1, 2, 3, 256, {BF16, F32}, BF16},                           // a head dim over 128
      {1, 2, 3, 300, {F32, F32}, F32, 1},                          // rows longer than a block: two chunks per lane
      {1, 4, 7, 128, {BF16, BF16, BF16}, BF16, 0, false, 1},       // in place
      {1, 2, 3, 64, std::vector<DType>(100, F32), BF16},            // two levels
      {1, 1, 2, 32, std::vector<DType>(1024, BF16), F32},           // the most states
  };
  for (const MergeCase& c : cases) {
    SCOPED_TRACE(test::merge_case_name(c));
    test::MergeProblem p = test::make_merge_problem(c, rng);
    merge_on_device(p);
    EXPECT_TRUE(test::merge_matches(p));
  }
}

// Eight merges on one stream, each into state 0 in place, so each reads what the one before wrote
// (on sm_90+ they launch as programmatic dependents: a merge that read before the previous one
// finished would see its poisoned NaN rows or stale rows). The chain rounds state 0 to fp32 at every
// step, so it gets eight steps' roundings against the CPU's merge of all nine at once, and an
// absolute 2e-5 (O is in [-2, 2]; the CPU's own chain of these merges reached 4e-6 at most over five
// seeds, and fails the one-step tolerance).
TEST_F(CudaMergeStates, ChainedMergesSeeEachOthersWrites) {
  TRACE_SEED();
  std::mt19937 rng(static_cast<uint32_t>(seed_));
  using enum DType;
  std::vector<DType> dtypes(9, BF16);
  dtypes[0] = F32;
  const MergeCase c{2, 32, 257, 128, dtypes, F32, 0, false, 0};
  test::MergeProblem p = test::make_merge_problem(c, rng);
  std::vector<DeviceBuffer> o, lse;
  std::vector<AttentionState> views;
  for (auto& s : p.states) {
    o.push_back(gpu_test::upload(s.o_data(), s.o_bytes()));
    lse.push_back(gpu_test::upload(s.lse));
    views.push_back(s.view(c, o.back().get(), static_cast<float*>(lse.back().get())));
  }
  for (size_t k = 1; k < views.size(); ++k)
    runtime::merge_states_cuda(std::vector<AttentionState>{views[0], views[k]}, views[0], nullptr);
  o[0].download(p.states[0].o_data());
  lse[0].download(p.states[0].lse.data());
  EXPECT_TRUE(test::merge_matches(p, 16, 2e-5));
}

TEST_F(CudaMergeStates, RefusedBeforeAnyLaunch) {
  using enum DType;
  std::mt19937 rng(1);
  test::MergeProblem p = test::make_merge_problem({1, 1, 2, 32, std::vector<DType>(1025, F32), F32}, rng);
  try {
    runtime::merge_states_cuda(p.state_views(), p.out.view(p.c), nullptr);
    FAIL() << "1025 states were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("at most 1024"), std::string::npos) << e.what();
  }
  std::vector<AttentionState> two = {p.state_views()[0], p.state_views()[1]};
  two[1].o.shape[2] = 3;
  EXPECT_THROW(runtime::merge_states_cuda(two, p.out.view(p.c), nullptr), Error);
  // No rows: nothing to launch.
  AttentionState empty = p.out.view(p.c);
  empty.o.shape[2] = 0, empty.lse.shape[2] = 0;
  EXPECT_NO_THROW(runtime::merge_states_cuda(std::vector<AttentionState>{empty, empty}, empty, nullptr));
}

// Decode over a shared prefix of 1000 keys and a request's own 301: each part on the GPU with its
// LSE, merged on the GPU, is the attention over all 1301 keys. The partial O are bf16, so the
// merge carries their rounding: the tolerance is the reference check's (2 x the naive
// decomposition's error + 1e-5) plus two bf16 roundings of the largest output.
TEST_F(CudaMergeStates, CascadeOfPrefixAndSuffixIsTheWholeAttention) {
  TRACE_SEED();
  const KernelSpec spec = gpu_test::cuda_spec("softmax(scaled_dot_product(Q, K)) @ V", DType::BF16, 128);
  const gpu_test::Dims d{2, 32, 8, 4, 1301, 128};
  const int64_t prefix = 1000;
  gpu_test::Inputs in = gpu_test::make_inputs(spec, d, rng_);
  const gpu_test::Expected want = gpu_test::expected(spec, in.host, d);
  const int64_t rows = d.B * d.Hq * d.Nq;
  DeviceBuffer o_parts[2] = {DeviceBuffer(size_t(rows * d.D) * 2), DeviceBuffer(size_t(rows * d.D) * 2)};
  DeviceBuffer lse_parts[2] = {DeviceBuffer(size_t(rows) * 4), DeviceBuffer(size_t(rows) * 4)};
  std::vector<AttentionState> parts;
  for (int part = 0; part < 2; ++part) {
    AttentionArgs a = in.device;
    const int64_t first = part == 0 ? 0 : prefix, keys = part == 0 ? prefix : d.Nk - prefix;
    for (TensorView* t : {&a.k, &a.v}) {
      t->data = static_cast<uint16_t*>(t->data) + first * t->strides[2];
      t->shape[2] = keys;
    }
    o_parts[part].poison(), lse_parts[part].poison();
    a.out = TensorView::contiguous(o_parts[part].get(), DType::BF16, {d.B, d.Hq, d.Nq, d.D});
    a.lse = LseView::contiguous(static_cast<float*>(lse_parts[part].get()), {d.B, d.Hq, d.Nq});
    runtime::run_cuda(spec, a, nullptr, /*sync=*/false);
    parts.push_back({a.out, *a.lse});
  }
  DeviceBuffer o(size_t(rows * d.D) * 2), lse(size_t(rows) * 4);
  o.poison(), lse.poison();
  const AttentionState merged{TensorView::contiguous(o.get(), DType::BF16, {d.B, d.Hq, d.Nq, d.D}),
                              LseView::contiguous(static_cast<float*>(lse.get()), {d.B, d.Hq, d.Nq})};
  runtime::merge_states_cuda(parts, merged, nullptr);
  std::vector<uint16_t> got(static_cast<size_t>(rows * d.D));
  std::vector<float> got_lse(static_cast<size_t>(rows));
  o.download(got.data());
  lse.download(got_lse.data());
  double err = 0, naive_err = 0, biggest = 0;
  for (size_t x = 0; x < got.size(); ++x) {
    const double ref = want.ref.out[x];
    err = std::max(err, std::fabs(bf16_to_f32(got[x]) - ref));
    naive_err = std::max(naive_err, std::fabs(want.naive.out[x] - ref));
    biggest = std::max(biggest, std::fabs(ref));
  }
  EXPECT_LE(err, 2 * naive_err + 1e-5 + 2 * std::ldexp(biggest, -8))
      << "naive error " << naive_err << ", largest |O| " << biggest;
  for (size_t r = 0; r < got_lse.size(); ++r)
    ASSERT_NEAR(got_lse[r], want.ref.lse[r], gpu_test::lse_tolerance(want.ref.lse[r], 0)) << "row " << r;
}

}  // namespace
}  // namespace attnfuse
