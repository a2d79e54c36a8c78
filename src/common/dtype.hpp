// Scalar conversions between fp32 and the 16-bit storage types (round-to-nearest-even), and a
// typed element loader used by every CPU-side consumer of a TensorView.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attnfuse/tensor.hpp"

namespace attnfuse {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float v = static_cast<float>(man) * 0x1p-24f;
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {  // result is subnormal or zero: round value * 2^24 to an integer
    float v = std::bit_cast<float>(a) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(v)));
  }
  // normal: rebias exponent, round mantissa to 10 bits (nearest even)
  uint32_t m = a + 0xc8000000u;  // exponent -112
  m += 0xfffu + ((m >> 13) & 1u);
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(m >> 13));
}

// Round an fp32 value to what the storage type can hold (identity for F32).
inline float round_to(DType t, float x) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
    case DType::F16: return f16_to_f32(f32_to_f16(x));
    default: return x;
  }
}

inline float load_elem(const void* base, DType t, int64_t index) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[index]);
    default: return static_cast<const float*>(base)[index];
  }
}

inline void store_elem(void* base, DType t, int64_t index, float x) {
  switch (t) {
    case DType::BF16: static_cast<uint16_t*>(base)[index] = f32_to_bf16(x); break;
    case DType::F16: static_cast<uint16_t*>(base)[index] = f32_to_f16(x); break;
    default: static_cast<float*>(base)[index] = x; break;
  }
}

}  // namespace attnfuse
