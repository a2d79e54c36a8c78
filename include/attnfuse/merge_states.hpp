// merge_states: combine softmax attention results computed over disjoint key sets into the result
// over their union, through the log-sum-exp (FlashInfer's cascade building block; what a split-KV
// combine does with its partials).
#pragma once

#include <span>

#include "attnfuse/tensor.hpp"

namespace attnfuse {

// One (partial) softmax attention result: O [B, H, N, D] in fp32/bf16/fp16, any strides with a
// contiguous last axis, and its LSE [B, H, N] (fp32, natural log, any strides) as run_cpu writes
// them. A row with no kept key has O = 0 and LSE = -inf (DESIGN §2).
struct AttentionState {
  TensorView o;
  LseView lse;
};

// out = the merge of `states` (at least one), row by row:
//   LSE = log Σ_k e^{LSE_k},   O = Σ_k e^{LSE_k - LSE} O_k
// computed in fp32 with the row maximum subtracted, so large LSEs neither overflow nor lose the
// small terms. A state whose row has LSE = -inf holds no key: it contributes nothing (its O row does
// not count, NaN there included), so merging with it is the identity; a row where every state is
// -inf gets O = 0 and LSE = -inf, never NaN. NaN propagates (a NaN LSE makes the row's O and LSE
// NaN) as it would in one attention over all the keys.
//
// Every O must have out.o's shape and every LSE [B, H, N] = out.o's first three dims; dtypes may
// differ (fp32 partials merged into a bf16 output is the usual split-KV case). out may be one of
// the states (same data and strides: an in-place merge), but must not otherwise overlap them.
// Throws Error (Shape / DType / MissingTensor) before writing anything.
// Only softmax states merge this way: relu_attention has no log-sum-exp.
void merge_states(std::span<const AttentionState> states, const AttentionState& out);

// Two states: out = merge(a, b). out may be a or b.
void merge_states(const AttentionState& a, const AttentionState& b, const AttentionState& out);

// acc = merge(acc, other): accumulate partials one at a time.
inline void merge_state_in_place(const AttentionState& acc, const AttentionState& other) {
  merge_states(acc, other, acc);
}

}  // namespace attnfuse
