// BlockMask's per-cell evaluation, compiled where the predicate is written (block_mask.hpp's
// template factories), so a mask predicate is inlined into the loop over a block's cells rather
// than called through std::function per cell.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace attnfuse::block_mask_cells {

// Eight bytes, each 0 or 1, as eight bits: byte i -> bit i. The multiply moves byte i's low bit
// to bit 56 + i; no two partial products share a bit, so nothing carries into the top byte.
inline uint64_t pack8(const uint8_t* bytes) {
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t x;
    std::memcpy(&x, bytes, 8);
    return (x * 0x0102040810204080ull) >> 56;
  } else {
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i) x |= uint64_t{bytes[i]} << i;
    return x;
  }
}

// ORs the 64 bits of `w` into the bitmap at bit `bit` (least significant first in each word); the
// bits past a row's end are zero, so the second word is touched only when a kept bit lands there.
inline void put_bits(uint64_t* cell, int64_t bit, uint64_t w) {
  const int s = static_cast<int>(bit & 63);
  cell[bit >> 6] |= w << s;
  if (s != 0 && (w >> (64 - s)) != 0) cell[(bit >> 6) + 1] |= w >> (64 - s);
}

// The cells [q0, q1) x [k0, k1) of (b, h) into `cell` (row q - q0 at bit (q - q0) * block_k, zeroed
// by the caller); returns how many are kept. Keys go 64 at a time through a byte per cell, a loop
// of fixed length that the compiler vectorizes for arithmetic predicates (causal, windows,
// documents through a table), then packed into one word.
template <class Keep>
int64_t evaluate(const Keep& keep_arg, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                 int64_t block_k, uint64_t* cell) {
  // A local copy of a small trivially copyable predicate (a lambda's captures, a functor's fields)
  // lives in registers; read through the reference, a capture read under `&&` is a conditional
  // load that GCC does not vectorize (a causal window's `q - kv >= 0 && q - kv < w`).
  using Local = std::conditional_t<std::is_trivially_copyable_v<Keep> && sizeof(Keep) <= 64, const Keep, const Keep&>;
  Local keep = keep_arg;
  int64_t kept = 0;
  alignas(64) uint8_t kept_byte[64];
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t row_bit = (q - q0) * block_k;
    for (int64_t kv0 = k0; kv0 < k1; kv0 += 64) {
      if (k1 - kv0 >= 64) {
        for (int i = 0; i < 64; ++i) kept_byte[i] = keep(b, h, q, kv0 + i) ? 1 : 0;
      } else {
        const int n = static_cast<int>(k1 - kv0);
        for (int i = 0; i < n; ++i) kept_byte[i] = keep(b, h, q, kv0 + i) ? 1 : 0;
        std::memset(kept_byte + n, 0, static_cast<size_t>(64 - n));
      }
      uint64_t w = 0;
      for (int j = 0; j < 8; ++j) w |= pack8(kept_byte + 8 * j) << (8 * j);
      if (w == 0) continue;
      kept += std::popcount(w);
      put_bits(cell, row_bit + (kv0 - k0), w);
    }
  }
  return kept;
}

}  // namespace attnfuse::block_mask_cells
