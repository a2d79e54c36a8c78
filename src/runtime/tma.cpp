// Tensor maps for the copy engine, encoded per call (a host-only driver function, no GPU work)
// and cached per thread.
#include "runtime/tma.hpp"

#include <cstring>

#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {
namespace {

// cuda.h enumerators (stable ABI values).
constexpr int kTmaBfloat16 = 9, kTmaFloat16 = 6;
constexpr int kTmaInterleaveNone = 0, kTmaSwizzle128B = 3, kTmaOobFillZero = 0;

bool encode_uncached(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows, TmaL2Promotion l2) {
  const DriverApi& d = driver();
  if (!d.cuTensorMapEncodeTiled || (dtype != DType::BF16 && dtype != DType::F16)) return false;
  const auto g = tile_map_geometry(base, B, H, N, D, strides, box_rows);
  if (!g) return false;
  const uint32_t element_strides[4] = {1, 1, 1, 1};
  alignas(64) unsigned char out[128];
  const CUresult r = d.cuTensorMapEncodeTiled(out, dtype == DType::BF16 ? kTmaBfloat16 : kTmaFloat16, 4,
                                              const_cast<void*>(base), g->dims, g->byte_strides, g->box,
                                              element_strides, kTmaInterleaveNone, kTmaSwizzle128B,
                                              static_cast<int>(l2), kTmaOobFillZero);
  if (r != 0) return false;
  std::memcpy(map, out, 128);
  return true;
}

// A map depends only on these; a call that repeats recent tensors (every benchmark iteration, a
// decode loop over preallocated caches, a layer's K and V) reuses the bytes instead of the driver.
struct MapKey {
  const void* base;
  int64_t B, H, N, D;
  long long strides[3];
  int box_rows;
  DType dtype;
  TmaL2Promotion l2;
  friend bool operator==(const MapKey&, const MapKey&) = default;
};
struct CachedMap {
  MapKey key{};
  bool ok = false;
  alignas(64) unsigned char map[128];
};
constexpr int kCachedMaps = 8;  // per thread: K and V of a few tensors

}  // namespace

std::optional<TileMapGeometry> tile_map_geometry(const void* base, int64_t B, int64_t H, int64_t N, int64_t D,
                                                 const long long* strides, int box_rows) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || D <= 0 || D % 64 != 0 || N <= 0 || H <= 0 || B <= 0 ||
      box_rows <= 0 || box_rows > 256)
    return std::nullopt;
  TileMapGeometry g{};
  const int64_t extent[4] = {D, N, H, B};
  for (int i = 0; i < 4; ++i) g.dims[i] = static_cast<uint64_t>(extent[i]);
  const int64_t given[3] = {strides[2], strides[1], strides[0]};  // row, head, batch (elements)
  int64_t packed = D * 2;
  for (int i = 0; i < 3; ++i) {
    const int64_t s = extent[i + 1] == 1 ? packed : given[i] * 2;
    if (s <= 0 || s % 16 != 0 || s >= (int64_t{1} << 40)) return std::nullopt;
    g.byte_strides[i] = static_cast<uint64_t>(s);
    packed = s * extent[i + 1];
  }
  g.box[0] = 64;  // 128 bytes: one swizzle span
  g.box[1] = static_cast<uint32_t>(box_rows);
  g.box[2] = g.box[3] = 1;
  return g;
}

bool encode_tile_map(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows, TmaL2Promotion l2) {
  thread_local CachedMap cache[kCachedMaps];
  thread_local int used = 0, next = 0;
  const MapKey key{base, B, H, N, D, {strides[0], strides[1], strides[2]}, box_rows, dtype, l2};
  for (int i = 0; i < used; ++i)
    if (cache[i].key == key) {
      if (cache[i].ok) std::memcpy(map, cache[i].map, 128);
      return cache[i].ok;
    }
  CachedMap& slot = cache[next];
  next = (next + 1) % kCachedMaps;
  if (used < kCachedMaps) ++used;
  slot.key = key;
  slot.ok = encode_uncached(slot.map, base, dtype, B, H, N, D, strides, box_rows, l2);
  if (slot.ok) std::memcpy(map, slot.map, 128);
  return slot.ok;
}

}  // namespace attnfuse::runtime
