// Checking a kernel's output against the float64 reference with DESIGN §3's rule, and counting
// the work of a problem (kept cells) for GFLOP/s.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "reference/reference.hpp"

namespace attnfuse::cli {

// The float64 oracle and the naive same-precision decomposition of one problem, computed once
// and used to judge any number of outputs (the fused kernel and the ablation variants).
struct ReferenceSet {
  reference::Result exact;  // float64
  reference::Result naive;  // same precision as the inputs
};
ReferenceSet compute_reference(const KernelSpec& spec, const AttentionArgs& args);

// Max abs error of one output against the float64 reference. An element counts as a mismatch
// (and fails the check) when exactly one side is NaN, or when infinities differ.
struct ErrorStats {
  double max_abs = 0.0;  // over elements where both sides are finite
  double max_ref = 0.0;  // max |reference|, for the relative error
  int64_t mismatches = 0;
  int64_t count = 0;
};
ErrorStats compare(std::span<const float> got, std::span<const double> ref);
ErrorStats compare(std::span<const double> got, std::span<const double> ref);

// DESIGN §3: err(kernel) <= 2 * err(naive) + 1e-5, and for fp32 inputs also
// err / max(1, max|ref|) <= 1e-5 (relative to the output's magnitude, absolute below 1).
// NaN never passes: any mismatch fails.
struct Verdict {
  ErrorStats out, out_naive;
  std::optional<ErrorStats> lse, lse_naive;
  double out_bound = 0.0, lse_bound = 0.0;
  bool pass = false;
};
Verdict judge(const ReferenceSet& ref, DType dtype, std::span<const float> out,
              std::optional<std::span<const float>> lse);

// "out: max abs err 1.2e-07 vs float64 (naive fp32 3.4e-07, bound 1.07e-05) ..." lines and
// the final PASS/FAIL line, each indented by `indent`.
std::string describe(const Verdict& v, DType dtype, const std::string& indent);

// Number of (b, hq, i, j) cells the masks keep (causal, sliding window, block mask), counted
// per row in closed form (no cell is materialized). The other score ops/modifiers keep all.
double kept_cells(const KernelSpec& spec, const AttentionArgs& args);

}  // namespace attnfuse::cli
