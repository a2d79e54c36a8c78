// Tensor maps for the copy engine, encoded per call (a host-only driver function, no GPU work)
// and cached per thread.
#include "runtime/tma.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/cuda_driver.hpp"

namespace attnfuse::runtime {
namespace {

// cuda.h enumerators (stable ABI values).
constexpr int kTmaBfloat16 = 9, kTmaFloat16 = 6;
constexpr int kTmaInterleaveNone = 0, kTmaSwizzle128B = 3, kTmaL2Promote256B = 3, kTmaOobFillZero = 0;

bool encode_uncached(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows) {
  const DriverApi& d = driver();
  if (!d.cuTensorMapEncodeTiled || (dtype != DType::BF16 && dtype != DType::F16)) return false;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || D % 64 != 0 || N <= 0) return false;
  const uint64_t dims[4] = {static_cast<uint64_t>(D), static_cast<uint64_t>(N), static_cast<uint64_t>(H),
                            static_cast<uint64_t>(B)};
  // Byte strides of dims 1..3 (row, head, batch). A dim of extent 1 is never stepped over, so it
  // takes the packed stride (the caller's may be anything, e.g. 0 for a broadcast).
  const int64_t given[3] = {strides[2], strides[1], strides[0]};
  uint64_t byte_strides[3];
  uint64_t packed = static_cast<uint64_t>(D) * 2;
  for (int i = 0; i < 3; ++i) {
    const int64_t s = dims[i + 1] == 1 ? static_cast<int64_t>(packed) : given[i] * 2;
    if (s <= 0 || s % 16 != 0 || s >= (int64_t{1} << 40)) return false;
    byte_strides[i] = static_cast<uint64_t>(s);
    packed = byte_strides[i] * dims[i + 1];
  }
  const uint32_t box[4] = {64, static_cast<uint32_t>(box_rows), 1, 1};
  const uint32_t element_strides[4] = {1, 1, 1, 1};
  alignas(64) unsigned char out[128];
  const CUresult r = d.cuTensorMapEncodeTiled(out, dtype == DType::BF16 ? kTmaBfloat16 : kTmaFloat16, 4,
                                              const_cast<void*>(base), dims, byte_strides, box, element_strides,
                                              kTmaInterleaveNone, kTmaSwizzle128B, kTmaL2Promote256B,
                                              kTmaOobFillZero);
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
  friend bool operator==(const MapKey&, const MapKey&) = default;
};
struct CachedMap {
  MapKey key{};
  bool ok = false;
  alignas(64) unsigned char map[128];
};
constexpr int kCachedMaps = 8;  // per thread: K and V of a few tensors

}  // namespace

bool encode_tile_map(unsigned char* map, const void* base, DType dtype, int64_t B, int64_t H, int64_t N, int64_t D,
                     const long long* strides, int box_rows) {
  thread_local CachedMap cache[kCachedMaps];
  thread_local int used = 0, next = 0;
  const MapKey key{base, B, H, N, D, {strides[0], strides[1], strides[2]}, box_rows, dtype};
  for (int i = 0; i < used; ++i)
    if (cache[i].key == key) {
      if (cache[i].ok) std::memcpy(map, cache[i].map, 128);
      return cache[i].ok;
    }
  CachedMap& slot = cache[next];
  next = (next + 1) % kCachedMaps;
  if (used < kCachedMaps) ++used;
  slot.key = key;
  slot.ok = encode_uncached(slot.map, base, dtype, B, H, N, D, strides, box_rows);
  if (slot.ok) std::memcpy(map, slot.map, 128);
  return slot.ok;
}

bool tma_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("ATTNFUSE_CUDA_TMA");
    return !(env && std::string(env) == "0");
  }();
  return on;
}

}  // namespace attnfuse::runtime
