// The checks the decode and paged GPU tests share (cuda_decode_test.cpp, cuda_paged_test.cpp):
// one contiguous call against the reference under several tunings, chains of calls on one stream,
// and one paged call against the reference and against contiguous calls on the same data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "gpu_inputs.hpp"
#include "runtime/cuda_backend.hpp"

namespace attnfuse::decode_test {

using gpu_test::bitwise_equal;
using gpu_test::cuda_spec;
using gpu_test::Dims;
using gpu_test::expected;
using gpu_test::Inputs;
using gpu_test::make_inputs;
using gpu_test::make_paged;
using gpu_test::matches;
using gpu_test::Outputs;
using gpu_test::PagedInputs;
using gpu_test::run_device;
using gpu_test::tuning_name;
using runtime::LaunchPlan;
using runtime::LaunchTuning;
using Variant = LaunchTuning::Variant;
using Layout = PagedKV::Layout;

class CudaDecode : public gpu_test::SeededCudaTest {};

inline const char* kCausal = "softmax(causal(scaled_dot_product(Q, K))) @ V";

// Split-KV settings every decode shape runs with: no split, 3 and 16 parts (merged by the decode
// kernel's last block), 16 parts merged by the combine kernel instead, the runtime's choice.
inline const std::vector<LaunchTuning> kSplits = {LaunchTuning{1}, LaunchTuning{3}, LaunchTuning{16},
                                           LaunchTuning{16, Variant::Auto, true}, LaunchTuning{0}};

// The plan launch() follows: the decode variant whenever Nq <= 16 and the variant is not forced,
// the forced split count (clamped at most to fewer parts on short caches).
void expect_plan(const KernelSpec& spec, const AttentionArgs& dev, const Dims& d, const LaunchTuning& t);

// One contiguous call: fresh inputs, one reference, then every tuning on the same inputs.
void check(const KernelSpec& spec, const Dims& d, std::optional<int64_t> q_offset, std::mt19937_64& rng,
           const std::vector<LaunchTuning>& tunings = kSplits);
void check(const std::string& program, DType dtype, const Dims& d, std::optional<int64_t> q_offset,
           std::mt19937_64& rng, const std::vector<LaunchTuning>& tunings = kSplits,
           RopeMode mode = RopeMode::Auto);

// `calls` calls queued back to back on the default stream with no host sync, call i's Q being
// call i-1's O (every output NaN-poisoned until written), with tuning t: their O and LSE.
std::vector<Outputs> run_chain(const KernelSpec& spec, const AttentionArgs& device, const Dims& d,
                               const LaunchTuning& t, int calls);
// Each call of `chain` against the reference on the Q it was given (the previous call's O), and
// bit for bit against the same call of `other` (`differs` says what a mismatch means).
void check_chain(const KernelSpec& spec, const AttentionArgs& host, const Dims& d, std::vector<Outputs>& chain,
                 const std::vector<Outputs>& other, const char* differs);

struct PagedCase {
  std::vector<int64_t> lengths;
  int64_t page_size = 16;
  Layout layout = Layout::NHD;
  bool share = false;
  int64_t Hq = 8, Hkv = 2, Nq = 1;
  std::optional<int64_t> q_offset;
};
std::string paged_name(const PagedCase& c);

// Two calls' outputs equal to the rounding of two summation orders: O within 2 ulps of the 16-bit
// type at its magnitude plus `near_zero` (at least 1e-3), LSE within 1e-5 relative. Calls whose
// key warps split a tile differently also round P to 16 bits against different running maxima,
// which moves O by up to the reference rule's error on each side: such callers pass 4 x the
// rows' max |naive - float64| (DESIGN §3: each call is within 2 x of it).
::testing::AssertionResult rounding_close(const Outputs& a, const Outputs& b, DType dtype, double near_zero = 1e-3);

// One paged call per tuning, against the reference; and, for tunings that fix the split count,
// bit for bit (to rounding where the contiguous call takes another key tile) against one
// contiguous call per sequence (its K/V gathered from the pages, its Q the sequence's rows) with
// the same tuning. A sequence of length 0 only meets the reference. `auto_stages`: the pipeline
// depth the runtime's own choice (LaunchTuning{0}) must take.
void check_paged(const KernelSpec& spec, const PagedCase& c, std::mt19937_64& rng,
                 const std::vector<LaunchTuning>& tunings, std::optional<int> auto_stages = std::nullopt);

}  // namespace attnfuse::decode_test
