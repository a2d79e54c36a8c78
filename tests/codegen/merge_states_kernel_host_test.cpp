// The merge_states kernel of merge_states.cuh run as a whole grid on the host
// (codegen/kernel_host.hpp), against the CPU's merge_states on the same states
// (common/merge_cases.hpp), with the runtime's parameters: mixed dtypes, padded O rows and strided
// LSEs, the three load paths (eight, four and one element a thread), rows empty in some states
// (their O rows NaN, so counting one fails), rows empty in all, NaN LSEs, 32 states, and in-place
// merges. CI has no GPU; tests/gpu/cuda_merge_states_test.cpp runs it on one, through the runtime.
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

// vec: 2 the eight-element path, 1 the four-element one, 0 one element (the runtime takes the
// widest every row allows; the case must allow it).
void check_case(const MergeCase& c, int vec, std::mt19937& rng) {
  SCOPED_TRACE(test::merge_case_name(c));
  test::MergeProblem p = test::make_merge_problem(c, rng);
  const std::vector<AttentionState> states = p.state_views();
  // The runtime's parameters, then the path the case asks for.
  attnfuse_kernels::MergeStatesParams params = runtime::merge_states_params(states, p.target().view(c));
  params.vec = vec;
  const unsigned blocks = attnfuse_kernels::merge_states_shape(params, codegen::cuda::kMergeStatesThreads);
  attnfuse_host_cuda::launch_on_host(blocks, codegen::cuda::kMergeStatesThreads, [&] {
    attnfuse_kernels::MergeStatesKernel<codegen::cuda::kMergeStatesThreads>::run(params);
  });
  EXPECT_TRUE(test::merge_matches(p));
}

TEST(MergeStatesKernelOnHost, MergesLikeTheCpu) {
  std::mt19937 rng(53);
  using enum DType;
  for (int vec : {2, 1}) {
    SCOPED_TRACE(testing::Message() << "chunks of " << (vec == 2 ? 8 : 4));
    // fp32 split partials into bf16, LSE in [B, N, H].
    check_case({2, 4, 5, 128, {F32, F32, F32}, BF16, 0, true}, vec, rng);
    // Every dtype mixed, padded rows (pitch D + 8 keeps the chunks aligned), into fp32.
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

}  // namespace
}  // namespace attnfuse
