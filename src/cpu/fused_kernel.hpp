// The fused CPU attention kernel's interface (one resolved call, KernelParams; the table of
// compile-time specializations) and its building blocks: vectorizable fast math and the SIMD
// micro-kernels of the two matmuls.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <limits>
#include <type_traits>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"
#include "common/documents.hpp"
#include "common/dtype.hpp"
#include "cpu/rope_plan.hpp"

namespace attnfuse::cpu {

// 64-byte aligned fp32 scratch (the SIMD blocks load aligned rows), for the fused kernel's
// per-thread workspace and the unfused ablation's materialized S/P.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

inline AlignedFloats alloc_floats(int64_t n) {
  const size_t bytes = (size_t(std::max<int64_t>(n, 1)) * 4 + 63) / 64 * 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return AlignedFloats(p);
}

// ---- Tile limits ------------------------------------------------------------------------------

// The tile shape itself is the tile pass's choice (passes::tile_sizes, carried in
// KernelSpec::tile); block_sparse programs cut the BlockMask's blocks to at most that size. The
// kernel's layout bounds it: scores live transposed, S^T[key][query], one query row per SIMD lane,
// and the QK micro-kernel holds 4 keys x 64 queries in 16 accumulators, so a tile has at most 64
// query rows; the thread-local score tile holds at most 256 keys. Measured on the 2-core AVX-512
// Zen 4 build machine (causal fp32, B=1, H=8, N=2048, D=64, 2 threads): block_q 64 beats 32 by
// ~10% (each K/V chunk serves more rows); block_k 64, 128 and 256 are within noise of each other,
// 32 is ~10% slower (twice the online-softmax rescales and O reloads).
constexpr int kMaxBlockQ = 64;
constexpr int kMaxBlockK = 256;

// ---- One call, resolved ---------------------------------------------------------------------

// Everything the kernel reads, after validation: raw pointers, element strides of the (b, h, s)
// axes (the last axis is contiguous), and the program's scalars.
struct KernelParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  DType dtype = DType::F32;  // of q, k, v and out
  int block_q = kMaxBlockQ;  // query rows per tile, 1..kMaxBlockQ
  int block_k = 64;          // keys per chunk, 1..kMaxBlockK
  int64_t B = 0, Hq = 0, Hkv = 0, Nq = 0, Nk = 0, D = 0, Dv = 0;
  std::array<int64_t, 3> q_strides{}, k_strides{}, v_strides{}, out_strides{};
  float* lse = nullptr;  // optional
  std::array<int64_t, 3> lse_strides{};

  float scale = 1.0f;
  int64_t q_offset = 0;  // position of query 0
  MaskSet masks;
  int64_t window = 0;                   // sliding_window
  const BlockMask* block_mask = nullptr;  // block_sparse
  const float* alibi_slopes = nullptr;  // [Hq], alibi
  float softcap = 0.0f;                 // softcap
  const void* bias = nullptr;           // additive_bias; broadcast axes have stride 0
  DType bias_dtype = DType::F32;
  std::array<int64_t, 3> bias_strides{};
  // rope / rope_window: Q rotated once per query tile, K per chunk on load (so K is always
  // copied, fp32 too); null for scaled_dot_product.
  const RopePlan* rope = nullptr;
  // document: the documents of each batch entry (one entry shared by all when the offsets are,
  // else B); null without document masks. Query tiles never straddle a document, and a tile
  // visits only its document's keys, with that document's positions (common/documents.hpp).
  const Documents* documents = nullptr;
  int64_t document_rows = 0;
  // Paged KV cache (null page_table: contiguous K/V). k / v then point at the pages and
  // k_strides / v_strides are the strides of (page, head, row in page); key j of batch entry b
  // is row j % page_size of page page_table[page_start[b] + j / page_size]. Each entry has its own
  // key count kv_len[b] and query 0 position q_offsets[b]; Nk is the longest (RoPE's key table).
  // Rows are gathered into the same chunk buffers as contiguous ones (in place for fp32), so a
  // paged call computes exactly what the contiguous one does.
  const int32_t* page_table = nullptr;  // page_indices
  const int32_t* page_start = nullptr;  // page_indptr [B + 1]
  int64_t page_size = 0;
  const int64_t* kv_len = nullptr;     // [B]
  const int64_t* q_offsets = nullptr;  // [B]
};

// One compile-time specialization of the kernel. Never called with an unvalidated call.
using KernelFn = void (*)(const KernelParams&);

// The specialization for a norm, an ordered modifier chain and whether any mask that checks
// cells is present (causal, sliding_window, block_sparse: per-element checks exist at all; a
// document mask only bounds the tiles). Every chain of distinct modifiers has one.
KernelFn select_kernel(NormKind norm, const ModifierChain& modifiers, bool masked);

namespace simd {
// 16 fp32 lanes (one zmm with AVX-512, two ymm otherwise); see the micro-kernels below.
typedef float Vec __attribute__((vector_size(64)));
typedef uint32_t UVec __attribute__((vector_size(64)));
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

// 2^x in float, accurate to ~2 ulp for -126 <= x < 127.5 (softmax only uses x <= 0). Returns
// exactly 0 below 2^-126 (masked scores are -inf), +inf from x >= 127.5 on, NaN for NaN.
// Degree-7 Taylor polynomial of 2^f on |f| <= 1/2 (truncation 5e-9 relative), scaled by 2^n
// built in the exponent bits.
inline float exp2(float x) {
  // NaN fails both comparisons and flows through unchanged.
  const float xc = x < -126.0f ? -126.0f : (x > 128.0f ? 128.0f : x);
  const float n = std::nearbyint(xc);
  const float f = xc - n;
  float p = c7;
  p = p * f + c6;
  p = p * f + c5;
  p = p * f + c4;
  p = p * f + c3;
  p = p * f + c2;
  p = p * f + c1;
  p = p * f + 1.0f;
  const int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);  // NaN -> f is NaN anyway
  const float two_n = std::bit_cast<float>(static_cast<uint32_t>(ni + 127) << 23);
  const float r = p * two_n;
  return x < -126.0f ? 0.0f : r;
}

// 2^x for x <= 0 (softmax's exponents: s - max), the same polynomial with fewer operations, for
// float or a GCC vector of floats: the round-to-integer is the 1.5 * 2^23 trick (the low bits of
// the sum are n), and x < -126.5 gives 2^-127 built as the bit pattern 0, i.e. exactly 0 (so
// -inf -> 0). NaN in -> NaN out. Results for x > 0.5 are not defined.
template <class F>
inline F exp2_nonpositive(F x) {
  using U = std::conditional_t<std::is_same_v<F, float>, uint32_t, simd::UVec>;
  const F lo = F{} + -127.0f, round = F{} + 0x1.8p23f;
  const F xc = x < lo ? lo : x;
  const F t = xc + round;  // bits: 0x4b400000 + n
  const F f = xc - (t - round);
  F p = F{} + c7;
  p = p * f + c6;
  p = p * f + c5;
  p = p * f + c4;
  p = p * f + c3;
  p = p * f + c2;
  p = p * f + c1;
  p = p * f + 1.0f;
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

// fp16 bits -> float, exactly (same results as f16_to_f32 of common/dtype.hpp) but branch-free so
// tile conversion loops vectorize: the exponent is rebiased by one multiply by 2^112, which also
// turns fp16 subnormals (read as float subnormals) into the right normal floats.
inline float half_to_float(uint16_t h) {
  const uint32_t em = h & 0x7fffu;
  const float finite = std::bit_cast<float>(em << 13) * 0x1p112f;
  const uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13);  // inf / NaN
  const uint32_t bits = (em >= 0x7c00u ? special : std::bit_cast<uint32_t>(finite)) |
                        (static_cast<uint32_t>(h & 0x8000u) << 16);
  return std::bit_cast<float>(bits);
}

}  // namespace fastmath

// ---- SIMD building blocks of the kernel -------------------------------------------------------

namespace simd {

constexpr int kLanes = 16;           // fp32 lanes of one Vec
constexpr int kStride = kMaxBlockQ;  // row stride (floats) of the Q^T and S^T tiles
static_assert(kStride % kLanes == 0 && kStride <= 4 * kLanes, "QK micro-kernel: <= 4 vectors");

// The two matmul micro-kernels use GCC vector extensions (16 fp32 lanes: one zmm with AVX-512,
// two ymm otherwise): written as plain loops, the auto-vectorizer kept the accumulators in memory.
// Full unrolling keeps them in registers, and an empty asm pins each loaded operand in a register
// (GCC otherwise re-reads it as a memory operand of every FMA: 4x the loads, measured ~12% slower
// on Zen 4). Elementwise work is plain loops the auto-vectorizer handles, except the softmax,
// whose column statistics are kept in registers here too.

inline Vec load_u(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline Vec load_a(const float* p) { return *reinterpret_cast<const Vec*>(p); }
inline void store_a(float* p, Vec v) { *reinterpret_cast<Vec*>(p) = v; }
// Keeps v in a register from here on (a no-op where a Vec is not one register).
inline void pin(Vec& v) {
#ifdef __AVX512F__
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

// S^T[j][0 .. 16*QV) = sum_d K[j][d] * Q^T[d][..] for R keys: an outer product over d, with K
// read in place (broadcast per key) and Q pre-transposed once per query tile.
// kAcc adds to S^T instead (rope_window runs the product over several ranges of kept dims).
template <int R, int QV, bool kAcc = false>
inline void qk_micro(const float* const* krow, const float* __restrict qt, int64_t D,
                     float* __restrict st) {
  Vec acc[R][QV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < QV; ++c) acc[r][c] = kAcc ? load_a(st + r * kStride + c * kLanes) : Vec{};
  const float* kr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) kr[r] = krow[r];
  for (int64_t d = 0; d < D; ++d) {
    const float* q = qt + d * kStride;
    Vec qv[QV];
#pragma GCC unroll 4
    for (int c = 0; c < QV; ++c) {
      qv[c] = load_a(q + c * kLanes);
      pin(qv[c]);  // 4 loads per d, not one memory operand per FMA
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float kd = kr[r][d];
#pragma GCC unroll 4
      for (int c = 0; c < QV; ++c) acc[r][c] += kd * qv[c];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < QV; ++c) store_a(st + r * kStride + c * kLanes, acc[r][c]);
}

constexpr int kQkRows = 4;  // keys per QK micro-kernel call (4 x 4 vectors = 16 accumulators)

template <int QV, bool kAcc = false>
void qk_tile(const float* const* krow, int n, const float* qt, int64_t D, float* st) {
  int j = 0;
  for (; j + kQkRows <= n; j += kQkRows) qk_micro<kQkRows, QV, kAcc>(krow + j, qt, D, st + j * kStride);
  switch (n - j) {
    case 3: qk_micro<3, QV, kAcc>(krow + j, qt, D, st + j * kStride); break;
    case 2: qk_micro<2, QV, kAcc>(krow + j, qt, D, st + j * kStride); break;
    case 1: qk_micro<1, QV, kAcc>(krow + j, qt, D, st + j * kStride); break;
    default: break;
  }
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
template <int RI, int NV>
inline void pv_micro(const float* __restrict pt, const float* const* vrow, int64_t c0, int n,
                     float* __restrict o, int64_t ldo) {
  Vec acc[RI][NV];
#pragma GCC unroll 8
  for (int r = 0; r < RI; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[r][c] = load_a(o + r * ldo + c * kLanes);
  for (int j = 0; j < n; ++j) {
    const float* vj = vrow[j] + c0;
    Vec vv[NV];
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      vv[c] = load_u(vj + c * kLanes);
      pin(vv[c]);  // one load, shared by the RI rows
    }
    const float* pj = pt + j * kStride;
#pragma GCC unroll 8
    for (int r = 0; r < RI; ++r) {
      const float w = pj[r];
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) acc[r][c] += w * vv[c];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < RI; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) store_a(o + r * ldo + c * kLanes, acc[r][c]);
}

constexpr int kPvRows = 4;  // query rows per PV micro-kernel call (4 x 4 vectors of Dv)

// O[0 .. rows) += P V over n keys; rows is a multiple of kPvRows, dvp of 16.
inline void pv(const float* pt, const float* const* vrow, int n, int rows, int64_t dvp, float* o) {
  for (int i = 0; i < rows; i += kPvRows)
    for (int64_t c0 = 0; c0 < dvp; c0 += 4 * kLanes) {
      float* oi = o + i * dvp + c0;
      switch (std::min<int64_t>(4, (dvp - c0) / kLanes)) {
        case 1: pv_micro<kPvRows, 1>(pt + i, vrow, c0, n, oi, dvp); break;
        case 2: pv_micro<kPvRows, 2>(pt + i, vrow, c0, n, oi, dvp); break;
        case 3: pv_micro<kPvRows, 3>(pt + i, vrow, c0, n, oi, dvp); break;
        default: pv_micro<kPvRows, 4>(pt + i, vrow, c0, n, oi, dvp); break;
      }
    }
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
  const Vec neg_inf = Vec{} - std::numeric_limits<float>::infinity();
  Vec mx[QV], negm[QV], sum[QV];
#pragma GCC unroll 4
  for (int c = 0; c < QV; ++c) mx[c] = neg_inf, sum[c] = Vec{};
  for (int j = 0; j < n; ++j)
#pragma GCC unroll 4
    for (int c = 0; c < QV; ++c) {
      const Vec s = load_a(st + j * kStride + c * kLanes);
      mx[c] = s > mx[c] ? s : mx[c];  // NaN scores are skipped here and surface through exp
    }
#pragma GCC unroll 4
  for (int c = 0; c < QV; ++c) {
    const Vec mold = load_a(m + c * kLanes);
    const Vec mnew = mx[c] > mold ? mx[c] : mold;
    const Vec msafe = mnew == neg_inf ? Vec{} : mnew;
    store_a(alpha + c * kLanes, fastmath::exp2_nonpositive((mold - msafe) * kLog2e));
    store_a(m + c * kLanes, mnew);
    negm[c] = -msafe * kLog2e;
  }
  for (int j = 0; j < n; ++j)
#pragma GCC unroll 4
    for (int c = 0; c < QV; ++c) {
      float* s = st + j * kStride + c * kLanes;
      const Vec e = fastmath::exp2_nonpositive(load_a(s) * kLog2e + negm[c]);
      store_a(s, e);
      sum[c] += e;
    }
#pragma GCC unroll 4
  for (int c = 0; c < QV; ++c)
    store_a(l + c * kLanes, load_a(l + c * kLanes) * load_a(alpha + c * kLanes) + sum[c]);
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

}  // namespace attnfuse::cpu
