// attnfuse_merge_states through the shared library: on the CPU, the C++ merge_states' bits on the
// same states (mixed dtypes, padded rows, an [B, N, H] LSE, in place); every error as a status code
// and a message, with nothing written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attnfuse.h"
#include "attnfuse/merge_states.hpp"
#include "common/merge_cases.hpp"
#include "runtime/capi_c_callers.h"

namespace {

using attnfuse::DType;
using attnfuse::test::MergeCase;
using attnfuse::test::MergeProblem;

attnfuse_state c_state(const attnfuse::AttentionState& s) {
  attnfuse_state c{};
  c.o.data = s.o.data;
  for (int k = 0; k < 4; ++k) c.o.shape[k] = s.o.shape[k], c.o.strides[k] = s.o.strides[k];
  c.dtype = s.o.dtype == DType::BF16 ? ATTNFUSE_BF16 : s.o.dtype == DType::F16 ? ATTNFUSE_FP16 : ATTNFUSE_FP32;
  c.lse = s.lse.data;
  for (int k = 0; k < 3; ++k) c.lse_strides[k] = s.lse.strides[k];
  return c;
}

// Equal bit for bit (NaN rows included).
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

std::vector<attnfuse_state> c_states(MergeProblem& p) {
  std::vector<attnfuse_state> v;
  for (const auto& s : p.state_views()) v.push_back(c_state(s));
  return v;
}

TEST(CApiMergeStates, CpuMergeIsTheCppMerge) {
  std::mt19937 rng(std::random_device{}());
  using enum DType;
  for (const MergeCase& c : {MergeCase{2, 3, 5, 64, {F32, BF16, F16}, BF16, 4, true},
                             MergeCase{1, 4, 7, 37, {BF16, BF16}, F32, 3},
                             MergeCase{1, 2, 6, 128, {F32, F32, F32}, F32, 0, false, 2}}) {
    SCOPED_TRACE(attnfuse::test::merge_case_name(c));
    MergeProblem p = attnfuse::test::make_merge_problem(c, rng);
    const std::vector<attnfuse_state> states = c_states(p);
    const attnfuse_state out = c.in_place >= 0 ? states[static_cast<size_t>(c.in_place)] : c_state(p.out.view(c));
    ASSERT_EQ(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), std::ssize(states), &out, nullptr),
              ATTNFUSE_OK)
        << attnfuse_last_error();
    const attnfuse::test::MergeStorage& got = p.target();
    EXPECT_TRUE(same_bytes(got.lse, p.expected.lse));
    EXPECT_TRUE(same_bytes(got.full, p.expected.full));
    EXPECT_TRUE(same_bytes(got.half, p.expected.half));
  }
}

TEST(CApiMergeStates, ErrorsAreStatusCodesAndWriteNothing) {
  std::mt19937 rng(7);
  MergeProblem p = attnfuse::test::make_merge_problem({1, 2, 3, 16, {DType::F32, DType::F32}, DType::F32}, rng);
  std::vector<attnfuse_state> states = c_states(p);
  attnfuse_state out = c_state(p.out.view(p.c));
  const std::vector<float> before = p.out.full;
  const auto expect_error = [&](attnfuse_status got, attnfuse_status want, const std::string& says) {
    EXPECT_EQ(got, want) << says;
    EXPECT_NE(std::string(attnfuse_last_error()).find(says), std::string::npos) << attnfuse_last_error();
    EXPECT_EQ(p.out.full, before) << says << ": nothing is written";
  };
  expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, nullptr, 2, &out, nullptr), ATTNFUSE_ERROR_INVALID_ARGUMENT,
               "states and out must not be NULL");
  expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), 0, &out, nullptr),
               ATTNFUSE_ERROR_INVALID_ARGUMENT, "num_states must be >= 1 (got 0)");
  expect_error(capi_merge_states_raw(5, states.data(), 2, &out), ATTNFUSE_ERROR_INVALID_ARGUMENT,
               "device must be ATTNFUSE_DEVICE_CPU or ATTNFUSE_DEVICE_CUDA (got 5)");
  capi_set_state_dtype_raw(&states[1], 9);
  expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), 2, &out, nullptr),
               ATTNFUSE_ERROR_INVALID_ARGUMENT, "states[1].dtype must be ATTNFUSE_FP32");
  states[1].dtype = ATTNFUSE_FP32;
  states[1].o.shape[2] = 4;
  expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), 2, &out, nullptr), ATTNFUSE_ERROR_SHAPE,
               "does not match out.o");
  states[1].o.shape[2] = 3;
  states[0].lse = nullptr;
  expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), 2, &out, nullptr),
               ATTNFUSE_ERROR_MISSING_TENSOR, "states[0].lse has no data pointer");
  states[0].lse = p.states[0].lse.data();
  if (!attnfuse_cuda_available())
    expect_error(attnfuse_merge_states(ATTNFUSE_DEVICE_CUDA, states.data(), 2, &out, nullptr), ATTNFUSE_ERROR_DEVICE,
                 "");
  ASSERT_EQ(attnfuse_merge_states(ATTNFUSE_DEVICE_CPU, states.data(), 2, &out, nullptr), ATTNFUSE_OK);
  EXPECT_STREQ(attnfuse_last_error(), "");
}

}  // namespace
