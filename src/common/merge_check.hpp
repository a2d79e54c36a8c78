// merge_states' argument rules (include/attnfuse/merge_states.hpp), for every device.
#pragma once

#include <span>

#include "attnfuse/merge_states.hpp"

namespace attnfuse {

// Throws Error (Shape / DType / MissingTensor, "merge_states: ...") unless `states` (at least one)
// and `out` are valid merge arguments: sizes >= 0, a contiguous last axis, fp32/bf16/fp16 O, data
// behind anything non-empty, every O of out.o's shape with LSE [B, H, N], and out overlapping a
// state only as the very same view (an in-place merge).
void validate_merge(std::span<const AttentionState> states, const AttentionState& out);

}  // namespace attnfuse
