// merge_states on CUDA: the log-sum-exp merge of partial attention results in device memory
// (kernels/merge_states.cuh), with the CPU's rules and errors (include/attnfuse/merge_states.hpp).
#pragma once

#include <span>

#include "attnfuse/merge_states.hpp"
#include "codegen/cuda/kernels/params.cuh"
#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {

// The most states one launch merges (a lane of the row's warp each). More, up to its square, merge
// in two levels: groups of this many into fp32 states in a per-stream workspace, then those.
inline constexpr int kMergeStatesPerLaunch = 32;
inline constexpr int kMergeStatesMax = kMergeStatesPerLaunch * kMergeStatesPerLaunch;

// The kernel's parameters for out = merge(states), at most kMergeStatesPerLaunch states of valid
// shapes: their descriptors, and the chunk width (16, 8, 4 or 1 elements). Of the widths every row
// allows, the widest whose grid has a block for each of `multiprocessors` SMs, else the narrowest
// (the most threads: a small merge is bound by latency, not by instructions); with
// multiprocessors = 0 the widest. attnfuse_kernels::merge_states_shape then sets the launch shape.
// No GPU needed.
attnfuse_kernels::MergeStatesParams merge_states_params(std::span<const AttentionState> states,
                                                        const AttentionState& out, int multiprocessors = 0);

// The module entry that runs p (codegen::cuda::merge_states_entry_name): p.vec's, or with `half`
// (the default; ATTNFUSE_CUDA_MERGE_HALF=0 clears it) the entry of chunks of 16 over 16-bit states
// when p takes chunks of 16 and every state is bf16 or fp16. No GPU needed.
int merge_states_entry(const attnfuse_kernels::MergeStatesParams& p, bool half);

// out = merge(states) on `stream`; every pointer is device memory. Validates first (Error before
// any launch: the CPU's errors, and Unsupported past kMergeStatesMax states); asynchronous.
// Compiles the module on first use (NVRTC, through the disk cache).
void merge_states_cuda(std::span<const AttentionState> states, const AttentionState& out, CUstream stream);

}  // namespace attnfuse::runtime
