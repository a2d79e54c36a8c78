// The RoPE kernel arguments of one CUDA call: per-pair turn fractions (exact argument
// reduction on the device), the attention factor and rope_window's integer limits.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/kernel_spec.hpp"
#include "codegen/cuda/kernels/params.cuh"

namespace attnfuse::runtime {

// θ_r / 2π mod 1 as a 0.64 fixed-point fraction (what RopeArgs::turn holds).
uint64_t turn_fraction(double inv_freq);

// Fills the RoPE arguments of a rope / rope_window call with head dim D whose largest position
// + 1 is seq_len (reference::rope_seq_len). The frequencies come from the RoPE library in
// float64, exactly as the reference's. Throws Error(Unsupported) when rotary_dim is not a
// multiple of 4 (the kernels rotate two pairs per 32-bit unit) and Error(Verify) for invalid
// parameters. Results are cached per thread for the last (params, D, seq_len) seen, so a warm
// call with the same RoPE costs a comparison, not a frequency computation.
const attnfuse_kernels::RopeArgs& rope_args(const RopeParams& params, bool windowed, int head_dim,
                                            int64_t seq_len);

// The RoPE arguments of a call whose lengths are device memory (paged caches and documents on
// CUDA), which the host cannot read: rope_args at lengths up to the original context, and the
// rule a block applies when the call is longer (FwdParams::rope_len: dynamic computes its
// frequencies from the length, longrope switches to its long factors). For longrope, long_set
// holds that set as RopeLengthRule::long_set reads it (half turns, then half limits as ints, two
// per word); the caller places a copy in device memory and points rule.long_set at it. Cached
// per thread as rope_args is.
struct DeviceLengthRope {
  attnfuse_kernels::RopeArgs args{};
  attnfuse_kernels::RopeLengthRule rule{};
  std::vector<unsigned long long> long_set;
};
const DeviceLengthRope& device_length_rope_args(const RopeParams& params, bool windowed, int head_dim);

}  // namespace attnfuse::runtime
