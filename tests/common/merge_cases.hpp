// merge_states test problems shared by the host-emulated kernel test and the GPU suite: random
// partial states (mixed dtypes, padded O rows, LSE as [B, H, N] or [B, N, H]) with rows empty in
// some states (their O rows left NaN, so a merge that reads one fails), a row empty in every
// state, a row with a NaN LSE; the output poisoned (its padding too), and the CPU merge_states'
// result on copies as what every device must give.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnfuse/merge_states.hpp"

namespace attnfuse::test {

struct MergeCase {
  int64_t B, H, N, D;
  std::vector<DType> dtypes;  // of the states
  DType out_dtype;
  int64_t pad = 0;            // O row pitch = D + pad
  bool nhl = false;           // LSE stored as [B, N, H] (FlashInfer's layout)
  int in_place = -1;          // out is this state's very view (its dtype must be out_dtype)
};
std::string merge_case_name(const MergeCase& c);

// One state's host storage: O [B, H, N] rows of `pitch` elements, and its LSE.
struct MergeStorage {
  DType dtype = DType::F32;
  int64_t pitch = 0;
  bool nhl = false;
  std::vector<uint16_t> half;  // bf16 / fp16 O
  std::vector<float> full;     // fp32 O
  std::vector<float> lse;
  void* o_data() { return dtype == DType::F32 ? static_cast<void*>(full.data()) : static_cast<void*>(half.data()); }
  size_t o_bytes() const { return dtype == DType::F32 ? full.size() * 4 : half.size() * 2; }
  // The view of this storage, or of the same layout at other addresses (a device copy).
  AttentionState view(const MergeCase& c, void* o, float* lse) const;
  AttentionState view(const MergeCase& c) { return view(c, o_data(), lse.data()); }
};

struct MergeProblem {
  MergeCase c;
  std::vector<MergeStorage> states;
  MergeStorage out;       // poisoned; unused for an in-place case (the state's storage is out)
  MergeStorage expected;  // the CPU merge of copies of the states, in out's layout
  std::vector<AttentionState> state_views() {
    std::vector<AttentionState> v;
    for (auto& s : states) v.push_back(s.view(c));
    return v;
  }
  // Where the merge writes: out's storage, or the in-place state's.
  MergeStorage& target() { return c.in_place >= 0 ? states[static_cast<size_t>(c.in_place)] : out; }
};
MergeProblem make_merge_problem(const MergeCase& c, std::mt19937& rng);

// target() against expected: NaN where expected is NaN, -inf LSE and O = 0 where no state kept a
// key, else LSE within 1e-6 x `roundings` relative and O within `roundings` roundings of the output
// dtype plus `slack` (two and 1e-6: the CPU may contract into FMAs); out's row padding still
// poisoned. A chain of merges takes more of both: its error follows the inputs' scale, not the
// output's.
::testing::AssertionResult merge_matches(MergeProblem& p, int roundings = 2, double slack = 1e-6);

}  // namespace attnfuse::test
