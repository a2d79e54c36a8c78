// The SIMD building blocks of the CPU kernel: vectorizable fast math and the micro-kernels of the
// two matmuls. Compiled once per instruction-set level (src/cpu/isa.hpp): every source that
// includes this header is built for each level with ATTNFUSE_CPU_ISA_NS naming that level's
// namespace, so no two levels ever share a definition (one compiled for AVX-512 and picked by the
// linker for the SSE2 path would fault on a CPU without it).
#pragma once

#ifndef ATTNFUSE_CPU_ISA_NS
#error "cpu/simd.hpp is part of the per-ISA CPU kernel sources (ATTNFUSE_CPU_ISA_NS names the level)"
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/dtype.hpp"
#include "cpu/fused_kernel.hpp"

namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS {

namespace simd {
// 16 fp32 lanes, the kernel's unit of query rows: one zmm with AVX-512, two ymm with AVX2, four
// xmm with SSE2.
constexpr int kLanes = 16;
typedef float Vec __attribute__((vector_size(4 * kLanes)));

// The vector code itself runs on the machine's own width (NVec: kNativeLanes fp32 lanes, a Vec is
// kSub of them). Written on 64-byte Vecs, GCC splits the vector ops for AVX2 and SSE2 but builds
// each scalar-times-Vec broadcast and each compare-select through the stack: the AVX2 kernel ran
// 40x below the AVX-512 one on the same machine.
#if defined(__AVX512F__)
constexpr int kNativeLanes = 16;
#elif defined(__AVX__)
constexpr int kNativeLanes = 8;
#else
constexpr int kNativeLanes = 4;
#endif
typedef float NVec __attribute__((vector_size(4 * kNativeLanes)));
constexpr int kSub = kLanes / kNativeLanes;
}  // namespace simd

// ---- Fast math, written so loops over it vectorize ---------------------------------------------

namespace fastmath {

// Taylor coefficients of 2^f = e^(f ln 2): (ln 2)^k / k!.
constexpr double kLn2 = 0.693147180559945309417232121458;
constexpr float c1 = float(kLn2), c2 = float(kLn2 * kLn2 / 2), c3 = float(kLn2 * kLn2 * kLn2 / 6),
                c4 = float(kLn2 * kLn2 * kLn2 * kLn2 / 24),
                c5 = float(kLn2 * kLn2 * kLn2 * kLn2 * kLn2 / 120),
                c6 = float(kLn2 * kLn2 * kLn2 * kLn2 * kLn2 * kLn2 / 720),
                c7 = float(kLn2 * kLn2 * kLn2 * kLn2 * kLn2 * kLn2 * kLn2 / 5040);

// 2^f for |f| <= 1/2: the Taylor polynomial above by Horner, for float or a vector of floats.
template <class F>
inline F exp2_taylor(F f) {
  F p = F{} + c7;
  p = p * f + c6;
  p = p * f + c5;
  p = p * f + c4;
  p = p * f + c3;
  p = p * f + c2;
  p = p * f + c1;
  return p * f + 1.0f;
}

// 2^x in float, accurate to ~2 ulp for -126 <= x < 127.5 (softmax only uses x <= 0). Returns
// exactly 0 below 2^-126 (masked scores are -inf), +inf from x >= 127.5 on, NaN for NaN.
// Degree-7 Taylor polynomial of 2^f on |f| <= 1/2 (truncation 5e-9 relative), scaled by 2^n
// built in the exponent bits.
inline float exp2(float x) {
  // NaN fails both comparisons and flows through unchanged.
  const float xc = x < -126.0f ? -126.0f : (x > 128.0f ? 128.0f : x);
  const float n = std::nearbyint(xc);
  const float p = exp2_taylor(xc - n);
  const int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);  // NaN -> f is NaN anyway
  const float two_n = std::bit_cast<float>(static_cast<uint32_t>(ni + 127) << 23);
  const float r = p * two_n;
  return x < -126.0f ? 0.0f : r;
}

// The unsigned integers of F's size, lane for lane.
template <class F>
struct BitsOf {
  typedef uint32_t type __attribute__((vector_size(sizeof(F))));
};
template <>
struct BitsOf<float> {
  using type = uint32_t;
};

// 2^x for x <= 0 (softmax's exponents: s - max), the same polynomial with fewer operations, for
// float or a GCC vector of floats: the round-to-integer is the 1.5 * 2^23 trick (the low bits of
// the sum are n), and x < -126.5 gives 2^-127 built as the bit pattern 0, i.e. exactly 0 (so
// -inf -> 0). NaN in -> NaN out. Results for x > 0.5 are not defined.
template <class F>
inline F exp2_nonpositive(F x) {
  using U = typename BitsOf<F>::type;
  const F lo = F{} + -127.0f, round = F{} + 0x1.8p23f;
  const F xc = x < lo ? lo : x;
  const F t = xc + round;  // bits: 0x4b400000 + n
  const F p = exp2_taylor(xc - (t - round));
  // (0x4b400000 + n + 127) << 23 keeps only (n + 127) << 23: 2^n, and 0 for n = -127.
  const F two_n = std::bit_cast<F>(static_cast<U>((std::bit_cast<U>(t) + 127u) << 23));
  return p * two_n;
}

// tanh in float, ~2 ulp: an odd Taylor polynomial below |x| = 0.4, else 1 - 2 / (e^{2|x|} + 1).
inline float tanh(float x) {
  constexpr float log2e2 = 2.0f * 1.44269504088896340736f;
  const float ax = std::fabs(x);
  const float x2 = x * x;
  // Taylor coefficients of tanh(x)/x in x^2 up to x^14 (truncation < 1e-10 at |x| = 0.4).
  float s = -929569.0f / 638512875.0f;
  s = s * x2 + 21844.0f / 6081075.0f;
  s = s * x2 - 1382.0f / 155925.0f;
  s = s * x2 + 62.0f / 2835.0f;
  s = s * x2 - 17.0f / 315.0f;
  s = s * x2 + 2.0f / 15.0f;
  s = s * x2 - 1.0f / 3.0f;
  const float small = x + x * x2 * s;
  const float big = 1.0f - 2.0f / (exp2(ax * log2e2) + 1.0f);
  return ax < 0.4f ? small : std::copysign(big, x);
}

// fp16 bits (the low half of each 32-bit lane of h) -> float, for float or a GCC vector of
// floats, exactly (same results as f16_to_f32 of common/dtype.hpp) but branch-free so tile
// conversion loops vectorize: the exponent is rebiased by one multiply by 2^112, which also turns
// fp16 subnormals (read as float subnormals) into the right normal floats.
template <class F>
inline F half_bits_to_float(typename BitsOf<F>::type h) {
  using U = typename BitsOf<F>::type;
  const U em = h & 0x7fffu;
  const F finite = std::bit_cast<F>(static_cast<U>(em << 13)) * 0x1p112f;
  const U special = 0x7f800000u | ((em & 0x3ffu) << 13);  // inf / NaN
  const U bits = (em >= 0x7c00u ? special : std::bit_cast<U>(finite)) | ((h & 0x8000u) << 16);
  return std::bit_cast<F>(bits);
}
inline float half_to_float(uint16_t h) { return half_bits_to_float<float>(h); }

}  // namespace fastmath

// ---- SIMD building blocks of the kernel -------------------------------------------------------

namespace simd {

constexpr int kStride = kMaxBlockQ;  // row stride (floats) of the Q^T and S^T tiles
static_assert(kStride % kLanes == 0 && kStride <= 4 * kLanes, "QK micro-kernel: <= 4 vectors");

// Register blocking of the micro-kernels, per instruction-set level: the accumulators plus the
// operand vectors loaded once per step (pinned in registers, pin() below) must fit the register
// file, with room for the broadcast scalar, and there must be enough accumulators to cover the
// FMA latency (8 or more).
//  - AVX-512, 32 zmm, a Vec is one: QK 4 keys x 4 Vecs of queries (16 accumulators + 4 Q),
//    P V 4 query rows x 4 Vecs of Dv (16 + 4 V).
//  - AVX2, 16 ymm, a Vec is two: QK 2 keys x 2 Vecs (8 accumulators + 4 Q), P V 2 x 2 (8 + 4).
//  - SSE2, 16 xmm, a Vec is four: QK 2 keys x 1 Vec (8 + 4, and a temporary: no FMA), P V 2 x 1.
// Measured on the build machine (README, "CPU instruction sets").
#if defined(__AVX512F__)
constexpr int kQkRows = 4, kQkCols = 4, kPvRows = 4, kPvCols = 4;
#elif defined(__AVX__)
constexpr int kQkRows = 2, kQkCols = 2, kPvRows = 2, kPvCols = 2;
#else
constexpr int kQkRows = 2, kQkCols = 1, kPvRows = 2, kPvCols = 1;
#endif
static_assert(kQkRows >= 1 && kQkRows <= 4 && kQkCols >= 1 && kQkCols <= 4, "QK blocking");
static_assert(kPvRows >= 1 && 4 % kPvRows == 0 && kPvCols >= 1 && kPvCols <= 4, "P V blocking");

// The two matmul micro-kernels use GCC vector extensions (16 fp32 lanes, blocked as above):
// written as plain loops, the auto-vectorizer kept the accumulators in memory.
// Full unrolling keeps them in registers, and an empty asm pins each loaded operand in a register
// (GCC otherwise re-reads it as a memory operand of every FMA: 4x the loads, measured ~12% slower
// on Zen 4). Elementwise work is plain loops the auto-vectorizer handles, except the softmax,
// whose column statistics are kept in registers here too.

inline NVec load_u(const float* p) {
  NVec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline NVec load_a(const float* p) { return *reinterpret_cast<const NVec*>(p); }
inline void store_a(float* p, NVec v) { *reinterpret_cast<NVec*>(p) = v; }
// Keeps v in a register from here on: GCC otherwise re-reads it as a memory operand of every FMA
// (4x the loads, ~12% slower on Zen 4 with AVX-512).
inline void pin(NVec& v) {
#ifdef __AVX512F__
  asm("" : "+v"(v));  // any of the 32
#else
  asm("" : "+x"(v));
#endif
}

typedef uint16_t NHalf __attribute__((vector_size(2 * kNativeLanes)));
typedef uint32_t NBits __attribute__((vector_size(4 * kNativeLanes)));

// kNativeLanes elements of a K or V row stored as T, from element d, as fp32 (bf16 and fp16
// exactly as load_row converts them): 16-bit rows are widened in registers by the products
// (qk_rows.hpp, pv_micro) instead of converted into an fp32 copy first.
template <DType T>
inline NVec load_k(const void* row, int64_t d) {
  if constexpr (T == DType::F32) {
    return load_u(static_cast<const float*>(row) + d);
  } else {
    NHalf h;
    std::memcpy(&h, static_cast<const uint16_t*>(row) + d, sizeof h);
    const NBits x = __builtin_convertvector(h, NBits);
    if constexpr (T == DType::BF16) {
      return std::bit_cast<NVec>(x << 16);
    } else {
      return fastmath::half_bits_to_float<NVec>(x);
    }
  }
}

// A micro-kernel's R x NC accumulator block: loaded from / stored to rows of stride ld.
template <int R, int NC>
inline void load_block(NVec (&acc)[R][NC], const float* src, int64_t ld) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) acc[r][c] = load_a(src + r * ld + c * kNativeLanes);
}
template <int R, int NC>
inline void store_block(const NVec (&acc)[R][NC], float* dst, int64_t ld) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) store_a(dst + r * ld + c * kNativeLanes, acc[r][c]);
}
// acc[r][c] += x[r] * y[c]: one step of both products (a scalar broadcast per row).
template <int R, int NC>
inline void rank1(NVec (&acc)[R][NC], const float (&x)[R], const NVec (&y)[NC]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) acc[r][c] += x[r] * y[c];
}

// S^T[j][0 .. 16*QV) = sum_d K[j][d] * Q^T[d][..] for R keys: an outer product over d, with K
// read in place (broadcast per key) and Q pre-transposed once per query tile.
// kAcc adds to S^T instead (rope_window runs the product over several ranges of kept dims).
template <int R, int QV, bool kAcc = false>
inline void qk_micro(const float* const* krow, const float* __restrict qt, int64_t D,
                     float* __restrict st) {
  constexpr int NC = QV * kSub;
  NVec acc[R][NC] = {};
  if constexpr (kAcc) load_block(acc, st, kStride);
  const float* kr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) kr[r] = krow[r];
  for (int64_t d = 0; d < D; ++d) {
    const float* q = qt + d * kStride;
    NVec qv[NC];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      qv[c] = load_a(q + c * kNativeLanes);
      pin(qv[c]);  // NC loads per d, not one memory operand per FMA
    }
    float kd[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) kd[r] = kr[r][d];
    rank1(acc, kd, qv);
  }
  store_block(acc, st, kStride);
}

// The QK product of a tile by micro-kernel blocks: kQkRows keys by up to kQkCols vectors of
// query columns, column group C0 onwards (one group where the register file holds all of QV).
template <int QV, bool kAcc, int C0 = 0>
inline void qk_columns(const float* const* krow, int j, int n, const float* qt, int64_t D, float* st) {
  constexpr int kC = QV - C0 < kQkCols ? QV - C0 : kQkCols;
  const float* q = qt + C0 * kLanes;
  float* s = st + C0 * kLanes;
  for (; j + kQkRows <= n; j += kQkRows) qk_micro<kQkRows, kC, kAcc>(krow + j, q, D, s + j * kStride);
  switch (n - j) {  // kQkRows is at most 4
    case 3: qk_micro<3, kC, kAcc>(krow + j, q, D, s + j * kStride); break;
    case 2: qk_micro<2, kC, kAcc>(krow + j, q, D, s + j * kStride); break;
    case 1: qk_micro<1, kC, kAcc>(krow + j, q, D, s + j * kStride); break;
    default: break;
  }
  if constexpr (C0 + kC < QV) qk_columns<QV, kAcc, C0 + kC>(krow, 0, n, qt, D, st);
}

template <int QV, bool kAcc = false>
void qk_tile(const float* const* krow, int n, const float* qt, int64_t D, float* st) {
  qk_columns<QV, kAcc>(krow, 0, n, qt, D, st);
}

template <bool kAcc = false>
inline void qk(int qv, const float* const* krow, int n, const float* qt, int64_t D, float* st) {
  switch (qv) {
    case 1: qk_tile<1, kAcc>(krow, n, qt, D, st); break;
    case 2: qk_tile<2, kAcc>(krow, n, qt, D, st); break;
    case 3: qk_tile<3, kAcc>(krow, n, qt, D, st); break;
    default: qk_tile<4, kAcc>(krow, n, qt, D, st); break;
  }
}

// O[i0 + r][c0 .. c0 + 16*NV) += sum_j P^T[j][i0 + r] * V[j][c0 ..] for RI query rows: P
// broadcast, V rows read contiguously in place (no transpose), the j reduction innermost.
// V rows stored as T (Row: const float* for fp32, else const void*), widened on load.
template <int RI, int NV, DType T = DType::F32, class Row = const float*>
inline void pv_micro(const float* __restrict pt, const Row* vrow, int64_t c0, int n, float* __restrict o,
                     int64_t ldo) {
  constexpr int NC = NV * kSub;
  NVec acc[RI][NC];
  load_block(acc, o, ldo);
  for (int j = 0; j < n; ++j) {
    NVec vv[NC];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      vv[c] = load_k<T>(vrow[j], c0 + c * kNativeLanes);
      pin(vv[c]);  // one load, shared by the RI rows
    }
    float w[RI];
#pragma GCC unroll 8
    for (int r = 0; r < RI; ++r) w[r] = pt[j * kStride + r];
    rank1(acc, w, vv);
  }
  store_block(acc, o, ldo);
}

// O[0 .. rows) += P V over n keys; rows is a multiple of kPvRows, dvp of 16 (V rows stored as T
// hold dvp elements).
template <DType T = DType::F32, class Row = const float*>
inline void pv(const float* pt, const Row* vrow, int n, int rows, int64_t dvp, float* o) {
  for (int i = 0; i < rows; i += kPvRows)
    for (int64_t c0 = 0; c0 < dvp; c0 += kPvCols * kLanes) {
      float* oi = o + i * dvp + c0;
      switch (std::min<int64_t>(kPvCols, (dvp - c0) / kLanes)) {
        case 1: pv_micro<kPvRows, 1, T>(pt + i, vrow, c0, n, oi, dvp); break;
        case 2: pv_micro<kPvRows, 2, T>(pt + i, vrow, c0, n, oi, dvp); break;
        case 3: pv_micro<kPvRows, 3, T>(pt + i, vrow, c0, n, oi, dvp); break;
        default: pv_micro<kPvRows, kPvCols, T>(pt + i, vrow, c0, n, oi, dvp); break;
      }
    }
}
// The same over 16-bit V rows as stored (whole vectors: dvp == Dv).
inline void pv_stored(DType t, const float* pt, const void* const* vrow, int n, int rows, int64_t dvp, float* o) {
  if (t == DType::BF16) pv<DType::BF16>(pt, vrow, n, rows, dvp, o);
  else pv<DType::F16>(pt, vrow, n, rows, dvp, o);
}

// Are all n rows of V finite (over Dv)? An all-ones exponent marks NaN/Inf; an integer OR
// reduction, so it vectorizes.
inline bool finite_rows(const float* const* vrow, int n, int64_t dv) {
  uint32_t bad = 0;
  for (int j = 0; j < n; ++j)
    for (int64_t x = 0; x < dv; ++x)
      bad |= (std::bit_cast<uint32_t>(vrow[j][x]) & 0x7f800000u) == 0x7f800000u;
  return bad == 0;
}

// The slow P V for chunks whose V holds NaN/Inf: cells with weight 0 are skipped.
inline void pv_skipping_zeros(const float* pt, const float* const* vrow, int n, int m, int64_t dv,
                       int64_t dvp, float* o) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const float w = pt[j * kStride + i];
      if (w == 0.0f) continue;
      for (int64_t x = 0; x < dv; ++x) o[i * dvp + x] += w * vrow[j][x];
    }
}

// Rows of the user's element type <-> fp32 (tiles are converted once per chunk, on load).
inline void load_row(const void* base, DType t, int64_t off, int64_t n, float* dst) {
  switch (t) {
    case DType::F32: std::memcpy(dst, static_cast<const float*>(base) + off, size_t(n) * 4); break;
    case DType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + off;
      for (int64_t x = 0; x < n; ++x) dst[x] = bf16_to_f32(s[x]);
      break;
    }
    case DType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(base) + off;
      for (int64_t x = 0; x < n; ++x) dst[x] = fastmath::half_to_float(s[x]);
      break;
    }
  }
}

inline void store_row(void* base, DType t, int64_t off, int64_t n, const float* src) {
  switch (t) {
    case DType::F32: std::memcpy(static_cast<float*>(base) + off, src, size_t(n) * 4); break;
    case DType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(base) + off;
      for (int64_t x = 0; x < n; ++x) d[x] = f32_to_bf16(src[x]);
      break;
    }
    case DType::F16: {
      uint16_t* d = static_cast<uint16_t*>(base) + off;
      for (int64_t x = 0; x < n; ++x) d[x] = f32_to_f16(src[x]);
      break;
    }
  }
}

// Online softmax over one chunk of S^T [n][16*QV]: per query column, the chunk max updates the
// running max m; alpha = exp(m_old - m_new) rescales the running sum l (and, by the caller, O);
// the tile becomes P^T = exp(s - m_new). Vertical vector ops only (one query per lane). While a
// column has kept nothing its max is -inf: exponents are taken against 0 then, so every p is
// exactly 0 and the (zero) state is rescaled by exp(-inf) = 0, never by NaN.
template <int QV>
inline void softmax_chunk(float* st, int n, float* m, float* l, float* alpha) {
  constexpr float kLog2e = 1.44269504088896340736f;
  constexpr int NC = QV * kSub;
  const NVec neg_inf = NVec{} - std::numeric_limits<float>::infinity();
  NVec mx[NC], negm[NC], sum[NC];
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c) mx[c] = neg_inf, sum[c] = NVec{};
  for (int j = 0; j < n; ++j)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      const NVec s = load_a(st + j * kStride + c * kNativeLanes);
      mx[c] = s > mx[c] ? s : mx[c];  // NaN scores are skipped here and surface through exp
    }
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c) {
    const NVec mold = load_a(m + c * kNativeLanes);
    const NVec mnew = mx[c] > mold ? mx[c] : mold;
    const NVec msafe = mnew == neg_inf ? NVec{} : mnew;
    store_a(alpha + c * kNativeLanes, fastmath::exp2_nonpositive((mold - msafe) * kLog2e));
    store_a(m + c * kNativeLanes, mnew);
    negm[c] = -msafe * kLog2e;
  }
  for (int j = 0; j < n; ++j)
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      float* s = st + j * kStride + c * kNativeLanes;
      const NVec e = fastmath::exp2_nonpositive(load_a(s) * kLog2e + negm[c]);
      store_a(s, e);
      sum[c] += e;
    }
#pragma GCC unroll 16
  for (int c = 0; c < NC; ++c)
    store_a(l + c * kNativeLanes,
             load_a(l + c * kNativeLanes) * load_a(alpha + c * kNativeLanes) + sum[c]);
}

inline void softmax_chunk(int qv, float* st, int n, float* m, float* l, float* alpha) {
  switch (qv) {
    case 1: softmax_chunk<1>(st, n, m, l, alpha); break;
    case 2: softmax_chunk<2>(st, n, m, l, alpha); break;
    case 3: softmax_chunk<3>(st, n, m, l, alpha); break;
    default: softmax_chunk<4>(st, n, m, l, alpha); break;
  }
}

}  // namespace simd


}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS
