// Per-call constants the kernels read from device memory: custom ALiBi slopes (params.cuh
// alibi_slopes: one float per query head, read by each tile for its heads) and longrope's long
// factors for calls whose lengths are device memory (RopeLengthRule::long_set). They are per-call
// scalars (DESIGN §1), but a call cannot copy them to the device in its own stream without
// breaking the launch chain (a copy between two kernels ends the programmatic dependent launch),
// and a buffer rewritten per call would race with kernels still reading it on other streams. So
// each distinct set is uploaded once, on its first launch in a context, and kept unchanged for
// the process: calls after the first copy nothing, and a launch in flight never sees its
// constants change.
#pragma once

#include <cstdint>
#include <vector>

namespace attnfuse::runtime {

// How many distinct sets of each kind a context keeps (slopes: 4 * (Hq + kSlopePadding) bytes
// each; RoPE sets: 12 bytes per pair at most); one set more throws Error(Unsupported) rather than
// growing without bound.
inline constexpr int64_t kMaxDeviceSlopeSets = 4096;
inline constexpr int64_t kMaxDeviceRopeSets = 4096;

// Zeros stored after the last head's slope. A GQA-packed decode tile computes its padding rows
// too (rows past group x Nq, which work.cuh row_of maps to heads past the group) and reads their
// slopes: at most one tile of rows (block_q <= 64, tile_sizes.hpp) past the last head.
inline constexpr int64_t kSlopePadding = 128;

// The device copy of `slopes` (one fp32 value per query head, then kSlopePadding zeros) in the
// current context, uploaded now (synchronously) if this set has none yet; thread-safe.
const float* device_alibi_slopes(const std::vector<float>& slopes);

// The device copy of a RoPE set (rope_args.hpp DeviceLengthRope::long_set) in the current
// context, uploaded now (synchronously) if this set has none yet; thread-safe.
const unsigned long long* device_rope_set(const std::vector<unsigned long long>& set);

}  // namespace attnfuse::runtime
