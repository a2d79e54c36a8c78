// The DESIGN §3 tolerance check: a kernel's output against the float64 reference, with the
// same-precision naive implementation's error as the yardstick.
#pragma once

#include <gtest/gtest.h>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::test {

// Compares `out` (and `lse`, if given) with reference::attention(spec, args) in float64:
//   max|out - ref| <= 2 * max|naive - ref| + 1e-5, naive = the same-precision reference;
//   for fp32 inputs also max|out - ref| / max(1, max|ref|) <= 1e-5.
// NaN passes only where the reference is NaN (and there it must be NaN); +-inf must match
// exactly; an element still holding the poison pattern was never written and fails.
// The LSE gets the same rule (with the naive LSE as yardstick). `slack` widens O's bound by an
// absolute amount that the caller accounts for: merges of partial results stored in a 16-bit
// dtype carry their rounding (merge_states_test.cpp, partials_rounding).
::testing::AssertionResult matches_reference(const KernelSpec& spec, const AttentionArgs& args,
                                             const TensorView& out, const LseView* lse = nullptr,
                                             double slack = 0.0);

// EXPECT form of matches_reference, checking args.lse too when present.
void expect_matches_reference(const KernelSpec& spec, const AttentionArgs& args, const TensorView& out);
inline void expect_matches_reference(const KernelSpec& spec, const AttentionArgs& args) {
  expect_matches_reference(spec, args, args.out);
}

}  // namespace attnfuse::test
