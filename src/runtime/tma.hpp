// Tensor maps for Hopper's copy engine (TMA): the host half of the wgmma kernel's K/V loads.
#pragma once

#include <cstdint>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::runtime {

// Encodes into `map` (a CUtensorMap: 128 bytes, 64-byte aligned) the [B, H, N, D] 16-bit tensor at
// `base` (element strides of batch, head and row; D contiguous), read in boxes of box_rows rows x
// 64 elements, 128-byte swizzled, rows past N zero-filled. Returns false, leaving `map` as it was,
// when the copy engine cannot take the tensor (base not 16-byte aligned, a stride that is not a
// multiple of 16 bytes, a driver without cuTensorMapEncodeTiled): the kernel then loads with
// cp.async. Never throws. The last few maps are cached per thread (keyed by every input), so a
// warm dispatch that repeats its tensors costs a few comparisons, not a driver call.
bool encode_tile_map(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows);

// ATTNFUSE_CUDA_TMA=0 keeps the wgmma kernel on cp.async loads (A/B measurements); read once.
bool tma_enabled();

}  // namespace attnfuse::runtime
