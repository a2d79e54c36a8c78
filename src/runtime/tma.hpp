// Tensor maps for Hopper's copy engine (TMA): the host half of the wgmma kernel's K/V loads.
#pragma once

#include <cstdint>
#include <optional>

#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::runtime {

// The L2 promotion of a map: how many bytes around a copy engine's request the L2 fetches from
// DRAM (cuda.h's CUtensorMapL2promotion values).
enum class TmaL2Promotion : int { None = 0, Bytes64 = 1, Bytes128 = 2, Bytes256 = 3 };

// Encodes into `map` (a CUtensorMap: 128 bytes, 64-byte aligned) the [B, H, N, D] 16-bit tensor at
// `base` (element strides of batch, head and row; D contiguous), read in boxes of box_rows rows x
// 64 elements, 128-byte swizzled, rows past N zero-filled, with the given L2 promotion. Returns
// false, leaving `map` as it was, when the copy engine cannot take the tensor (base not 16-byte
// aligned, a stride that is not a multiple of 16 bytes, a driver without cuTensorMapEncodeTiled):
// the kernel then loads with cp.async. Never throws. The last few maps are cached per thread
// (keyed by every input), so a warm dispatch that repeats its tensors costs a few comparisons, not
// a driver call.
bool encode_tile_map(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows, TmaL2Promotion l2);

// The geometry handed to the driver for such a map: dims innermost first (D, N, H, B), the byte
// strides of dims 1..3, and the box. Empty where the copy engine's rules refuse the tensor (base
// or a stride not a multiple of 16 bytes, a stride of 2^40 or more, D not a multiple of 64, an
// empty tensor). A dim of extent 1 takes the packed stride, since it is never stepped over.
struct TileMapGeometry {
  uint64_t dims[4];
  uint64_t byte_strides[3];
  uint32_t box[4];
};
std::optional<TileMapGeometry> tile_map_geometry(const void* base, int64_t B, int64_t H, int64_t N, int64_t D,
                                                 const long long* strides, int box_rows);

}  // namespace attnfuse::runtime
