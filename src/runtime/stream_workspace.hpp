// Per-stream scratch of CUDA launches: slot kRopeWorkspace holds prerotate mode's rotated Q and
// K, slot kSplitWorkspace the split-KV partials, slot kMergeCounters the decode variant's
// per-tile split counters (zeroed when allocated; the kernel leaves them zero after each call),
// slot kMergeStatesWorkspace the fp32 group states of a merge_states call over more than 32 states.
// One grow-only device buffer per (stream, slot): launches on one stream are ordered, so reuse
// is safe, and two streams never share one. Growing syncs the stream first, since its earlier
// kernels may still read the old buffer.
#pragma once

#include <cstddef>

#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

enum WorkspaceSlot { kRopeWorkspace = 0, kSplitWorkspace = 1, kMergeCounters = 2, kMergeStatesWorkspace = 3 };

// A device buffer of at least `bytes` for (stream, slot), owned by the runtime (thread-safe).
void* stream_workspace(CUstream stream, WorkspaceSlot slot, size_t bytes);

}  // namespace attnfuse::runtime
