// The merge_states kernel of merge_states.cuh run as a whole grid on the host
// (codegen/kernel_host.hpp), against the CPU's merge_states on the same states
// (common/merge_cases.hpp), with the runtime's parameters: mixed dtypes, padded O rows and strided
// LSEs, the four load paths (sixteen, eight, four and one element a thread) and the entry of chunks
// of 16 over 16-bit states, rows empty in some states (their O rows NaN, so counting one fails),
// rows empty in all, NaN LSEs, 32 states, and in-place merges. CI has no GPU;
// tests/gpu/cuda_merge_states_test.cpp runs it on one, through the runtime.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "codegen/cuda/emit.hpp"
#include "common/merge_cases.hpp"
#include "runtime/merge_states_cuda.hpp"
// Last: it defines the CUDA keywords as macros.
#include "codegen/kernel_host.hpp"

namespace attnfuse {
namespace {

using test::MergeCase;

// vec: 3 the sixteen-element path, 2 the eight-element one, 1 the four-element one, 0 one element
// (the runtime takes the widest every row allows; the case must allow it). half: the entry of
// chunks of 16 over 16-bit states (vec 3, every state bf16 or fp16).
void check_case(const MergeCase& c, int vec, std::mt19937& rng, bool half = false) {
  SCOPED_TRACE(test::merge_case_name(c));
  test::MergeProblem p = test::make_merge_problem(c, rng);
  const std::vector<AttentionState> states = p.state_views();
  // The runtime's parameters, then the path the case asks for.
  attnfuse_kernels::MergeStatesParams params = runtime::merge_states_params(states, p.target().view(c));
  params.vec = vec;
  const unsigned blocks = attnfuse_kernels::merge_states_shape(params, codegen::cuda::kMergeStatesThreads);
  using Kernel = attnfuse_kernels::MergeStatesKernel<codegen::cuda::kMergeStatesThreads>;
  attnfuse_host_cuda::launch_on_host(blocks, codegen::cuda::kMergeStatesThreads, [&] {
    if (half) return Kernel::run<16, true>(params);
    switch (vec) {
      case 3: return Kernel::run<16>(params);
      case 2: return Kernel::run<8>(params);
      case 1: return Kernel::run<4>(params);
      default: return Kernel::run<1>(params);
    }
  });
  EXPECT_TRUE(test::merge_matches(p));
}

TEST(MergeStatesKernelOnHost, MergesLikeTheCpu) {
  std::mt19937 rng(53);
  using enum DType;
  for (int vec : {3, 2, 1}) {
    SCOPED_TRACE(testing::Message() << "chunks of " << attnfuse_kernels::merge_chunk_elems(vec));
    // fp32 split partials into bf16, LSE in [B, N, H].
    check_case({2, 4, 5, 128, {F32, F32, F32}, BF16, 0, true}, vec, rng);
    // Every dtype mixed, padded rows (pitch D + 8 keeps every chunk aligned), into fp32.
    check_case({1, 3, 7, 64, {BF16, F16, F32, BF16}, F32, 8}, vec, rng);
    // A head dim over 128; one state alone.
    check_case({1, 2, 3, 256, {BF16}, BF16}, vec, rng);
    // The most states one launch takes.
    check_case({1, 2, 4, 64, std::vector<DType>(32, F32), BF16}, vec, rng);
    // In place: out is a state's very view.
    check_case({1, 3, 6, 64, {F32, F32, BF16}, F32, 0, false, 1}, vec, rng);
    // More states than one batch of loads, rows that do not fill the last block.
    check_case({1, 7, 9, 64, {F32, BF16, F16, F32, BF16, F16, F32}, BF16}, vec, rng);
  }
  // One element a thread: an odd head dim and pitch, fp16 out; in place.
  check_case({1, 2, 9, 37, {F16, BF16}, F16, 3, true}, 0, rng);
  check_case({1, 3, 6, 40, {BF16, BF16}, BF16, 2, true, 0}, 0, rng);
  // Rows of more chunks than a block has threads (300 elements one at a time), in place.
  check_case({1, 2, 3, 300, {F32, F32}, F32, 1, false, 0}, 0, rng);
  // The head dim 0: LSEs only.
  check_case({1, 2, 5, 0, {F32, BF16}, F32}, 0, rng);
}

// The entry of chunks of 16 over 16-bit states (ATTNFUSE_CUDA_MERGE_HALF=1): the loaded words are
// converted as they are weighted, each with its own state's dtype.
TEST(MergeStatesKernelOnHost, SixteenBitStatesEntryMergesLikeTheCpu) {
  std::mt19937 rng(59);
  using enum DType;
  check_case({2, 4, 5, 128, {BF16, BF16}, BF16}, 3, rng, true);                    // a cascade
  check_case({1, 3, 7, 64, {BF16, F16, BF16}, F32, 8}, 3, rng, true);             // mixed, padded, fp32 out
  check_case({1, 7, 9, 64, {BF16, F16, BF16, F16, BF16}, F16}, 3, rng, true);     // three batches
  check_case({1, 3, 6, 64, {BF16, BF16, F16}, BF16, 0, false, 0}, 3, rng, true);  // in place
  check_case({1, 2, 3, 256, {F16}, F16}, 3, rng, true);                           // one state, D 256
}

// The runtime's chunk width: of those every O row allows (its alignment in units of 16 bytes, 8 bytes
// for 16-bit chunks of 4, and the head dim a multiple of it), the widest that fills the SMs.
TEST(MergeStatesKernelOnHost, RuntimeTakesTheWidestChunkTheRowsAllow) {
  std::mt19937 rng(7);
  using enum DType;
  struct Want {
    MergeCase c;
    int vec;
  };
  const std::vector<Want> wants = {
      {{1, 2, 3, 128, {BF16, F32}, BF16}, 3},
      {{1, 2, 3, 72, {BF16, F32}, BF16}, 2},      // 72 elements: chunks of 8
      {{1, 2, 3, 64, {BF16, BF16}, BF16, 4}, 1},  // a pitch of 68 bf16 keeps 8 bytes only
      {{1, 2, 3, 64, {F32, F32}, F32, 4}, 3},     // a pitch of 68 floats keeps 16 bytes
      {{1, 2, 3, 64, {F32, BF16}, F32, 4}, 1},    // the bf16 state's rows decide
      {{1, 2, 3, 37, {F16, BF16}, F16}, 0},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(test::merge_case_name(w.c));
    test::MergeProblem p = test::make_merge_problem(w.c, rng);
    EXPECT_EQ(runtime::merge_states_params(p.state_views(), p.out.view(w.c)).vec, w.vec);
  }
  // With the device's SM count: the widest width whose grid has a block per SM, else the narrowest
  // allowed. 2048 rows of 128: 64 blocks of chunks of 16, 128 of 8, 256 of 4.
  test::MergeProblem p = test::make_merge_problem({4, 4, 128, 128, {BF16, BF16}, BF16}, rng);
  const std::vector<AttentionState> states = p.state_views();
  const AttentionState out = p.out.view(p.c);
  EXPECT_EQ(runtime::merge_states_params(states, out, 64).vec, 3);
  EXPECT_EQ(runtime::merge_states_params(states, out, 65).vec, 2);
  EXPECT_EQ(runtime::merge_states_params(states, out, 132).vec, 1);
  EXPECT_EQ(runtime::merge_states_params(states, out, 257).vec, 1);
  // The 16-bit entry, when asked for: chunks of 16 and every state 16-bit.
  EXPECT_EQ(runtime::merge_states_entry(runtime::merge_states_params(states, out, 64), true),
            codegen::cuda::kMergeHalfEntry);
  EXPECT_EQ(runtime::merge_states_entry(runtime::merge_states_params(states, out, 64), false), 3);
  EXPECT_EQ(runtime::merge_states_entry(runtime::merge_states_params(states, out, 65), true), 2);
  test::MergeProblem f = test::make_merge_problem({4, 4, 128, 128, {BF16, F32}, BF16}, rng);
  EXPECT_EQ(runtime::merge_states_entry(runtime::merge_states_params(f.state_views(), f.out.view(f.c), 64), true), 3);
  // A pitch of 68 bf16 allows chunks of 4 only, whatever the SMs.
  test::MergeProblem q = test::make_merge_problem({4, 4, 128, 64, {BF16, BF16}, BF16, 4}, rng);
  EXPECT_EQ(runtime::merge_states_params(q.state_views(), q.out.view(q.c), 1).vec, 1);
}

// The kernel's index splits (MergeDiv) are exact for every divisor and dividend it can meet.
TEST(MergeStatesKernelOnHost, MagicDivisionIsExact) {
  std::mt19937 rng(11);
  std::vector<int> divisors;
  for (int d = 1; d <= 2048; ++d) divisors.push_back(d);
  for (int k = 11; k <= 31; ++k) {
    const long long p = 1ll << k;
    for (long long d : {p - 1, p, p + 1}) if (d < (1ll << 31)) divisors.push_back(static_cast<int>(d));
  }
  for (int k = 0; k < 200; ++k) divisors.push_back(static_cast<int>(rng() % 0x7fffffffu) + 1);
  for (int d : divisors) {
    const attnfuse_kernels::MergeDiv m = attnfuse_kernels::merge_div(d);
    auto divide = [&](unsigned n) { return (__umulhi(n, m.mul) + n) >> m.shift; };
    std::vector<unsigned> ns = {0u, 1u, 0x7fffffffu, 0x7ffffffeu};
    for (unsigned q : {1u, 2u, 1000u, 0x7fffffffu / static_cast<unsigned>(d)})
      for (int e = -1; e <= 1; ++e) {
        const long long n = static_cast<long long>(q) * d + e;
        if (n >= 0 && n < (1ll << 31)) ns.push_back(static_cast<unsigned>(n));
      }
    for (int k = 0; k < 64; ++k) ns.push_back(rng() % 0x80000000u);
    for (unsigned n : ns) ASSERT_EQ(divide(n), n / static_cast<unsigned>(d)) << n << " / " << d;
  }
}

}  // namespace
}  // namespace attnfuse
