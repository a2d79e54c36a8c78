// RoPE on the GPU: exact-reduction angles, rotation of tiles in shared memory (fused mode), the
// pre-rotation kernel (prerotate mode) and the per-tile pair plan of rope_window (ATFlash).
//
// Both modes rotate with the same rope_rotate_pair(), so a program gives the same rotated
// values (rounded once to the element type) whether Q and K are rotated in the attention
// kernel or before it.
#pragma once

#include "params.cuh"
#include "primitives.cuh"
#include "wgmma.cuh"

namespace attnfuse_kernels {

// The per-pair RoPE arguments staged in shared memory. Kernel parameters live in the constant
// bank, which serves one address per cycle: a warp whose lanes read 32 different pairs' turns
// from it serializes 32 ways (measured: fused rope ran at a third of the plain kernel's speed).
// Shared memory serves the same reads in one pass.
struct RopeTables {
  const unsigned long long* turn;  // [half]
  const int* limit;                // [half] (rope_window)
  float factor;
  int half;
  const float* cos_table;  // the caller's tables (global memory), or null
  const float* sin_table;
  int table_positions;
};

// Bytes of shared memory the tables of up to kPairs pairs take.
template <int kPairs>
struct RopeTableBytes {
  static constexpr int value = kPairs * 12;
};

// Pair `pair`'s turn and rope_window limit under dynamic NTK scaling at RoPE length `len` (>
// lr.orig), as rope::rope_frequencies and rope_args compute them on the host: HF's base
// ((factor * len / original) - (factor - 1))^(dim / (dim - 2)) times rope_theta, θ_r =
// base^(-2r / dim) in float64 (the device's pow is within 2 ulp of the host's), its turn fraction
// through a two-term 1/2π so the product loses nothing beyond θ_r's own rounding, and the limit
// floor(k · 2π / θ_r) clamped to [-1, 2^31 - 1] (rope::window_limit).
__device__ __forceinline__ void dynamic_pair(const RopeLengthRule& lr, int half, int len, int pair,
                                             unsigned long long& turn, int& limit) {
  const double dim = 2.0 * half;
  const double scaled = lr.dyn_factor * (double)len / (double)lr.orig - (lr.dyn_factor - 1.0);
  const double base = lr.dyn_base * pow(scaled, dim / (dim - 2.0));
  const double inv = 1.0 / pow(base, (double)(2 * pair) / dim);
  const double kInvTwoPiHi = 0.15915494309189535, kInvTwoPiLo = -9.839338337591243e-18;
  double hi = inv * kInvTwoPiHi;
  const double lo = fma(inv, kInvTwoPiHi, -hi) + inv * kInvTwoPiLo;
  hi -= floor(hi);
  // hi in [0, 1): its 53 bits land at or above 2^11 of the fixed point, lo below them.
  const double kTwo64 = 18446744073709551616.0;
  turn = hi * kTwo64 >= kTwo64 ? 0ull
                               : (unsigned long long)(hi * kTwo64) + (unsigned long long)(long long)(lo * kTwo64);
  const double w = lr.window_k * (6.283185307179586 / inv);
  limit = !(w >= 0.0) ? -1 : (w >= 2147483647.0 ? 2147483647 : (int)floor(w));
}

// Copies r's tables into smem (block-wide; the caller syncs before reading them). With a length
// rule (a call over device lengths), `len` is the call's RoPE length (rope_length_on_device).
template <int kPairs>
__device__ __forceinline__ RopeTables stage_rope_tables(const RopeArgs& r, char* smem, const RopeLengthRule& lr = {},
                                                        int len = 0) {
  unsigned long long* turn = reinterpret_cast<unsigned long long*>(smem);
  int* limit = reinterpret_cast<int*>(smem + kPairs * 8);
  const int rule = lr.rule != kRopeLenFixed && len > lr.orig ? lr.rule : kRopeLenFixed;
  for (int i = threadIdx.x; i < r.half; i += blockDim.x) {
    if (rule == kRopeLenFixed) {
      turn[i] = r.turn[i];
      limit[i] = r.limit[i];
    } else if (rule == kRopeLenLongrope) {
      turn[i] = lr.long_set[i];
      limit[i] = reinterpret_cast<const int*>(lr.long_set + r.half)[i];
    } else {
      dynamic_pair(lr, r.half, len, i, turn[i], limit[i]);
    }
  }
  return RopeTables{turn, limit, r.factor, r.half, r.cos_table, r.sin_table, r.table_positions};
}

// cos and sin (times the attention factor) of pair r at position pos. The angle in turns is
// pos * turn[r] mod 1, done in 64-bit integers (wrap-around is the reduction), so it is exact to
// 2^-32 turns; the top 32 bits as a signed fraction give an angle in [-π, π), where the MUFU
// sine/cosine are accurate to about 4e-7. With the caller's tables, their entries as given: the
// host checks that they cover every position of the call, and a position it cannot see (a
// document's rows, with device offsets) that falls outside them gives NaN rather than a stray read.
// kSource: where they come from, tested per call (Either: a branch on r.cos_table at every pair)
// or fixed by a caller that tested it once for a whole tile.
enum class RopeSource { Either, Tables, Computed };
// The computed form, from the pair's turn (RopeTables::turn).
__device__ __forceinline__ void turn_cos_sin(unsigned long long turn, int pos, float factor, float& c, float& s) {
  const unsigned long long turns = (unsigned long long)(long long)pos * turn;
  const float angle = (float)(int)(turns >> 32) * 1.4629180792671596e-9f;  // 2π / 2^32
  __sincosf(angle, &s, &c);
  c *= factor;
  s *= factor;
}
template <RopeSource kSource>
struct RopeSourceTag {
  static constexpr RopeSource value = kSource;
};
template <RopeSource kSource = RopeSource::Either>
__device__ __forceinline__ void rope_cos_sin(const RopeTables& r, int pos, int pair, float& c, float& s) {
  if (kSource == RopeSource::Tables || (kSource == RopeSource::Either && r.cos_table)) {
    if (pos < 0 || pos >= r.table_positions) {
      c = s = __int_as_float(0x7fffffff);
      return;
    }
    const af_i64 i = (af_i64)pos * r.half + pair;
    c = __ldg(r.cos_table + i);
    s = __ldg(r.sin_table + i);
    return;
  }
  turn_cos_sin(r.turn[pair], pos, r.factor, c, s);
}

// (a, b) -> (a cos - b sin, b cos + a sin): the rotation of DESIGN §2 (HF rotate_half / GPT-J).
__device__ __forceinline__ void rope_rotate_pair(float& a, float& b, float c, float s) {
  const float a2 = a * c - b * s;
  b = b * c + a * s;
  a = a2;
}

template <class Element>
__device__ __forceinline__ void unpack2(u32 w, float& lo, float& hi) {
  lo = ElementTraits<Element>::to_float((u16)(w & 0xffffu));
  hi = ElementTraits<Element>::to_float((u16)(w >> 16));
}

// The two 32-bit units holding pairs (2u, 2u+1): neox pairs dims (r, r + half), so the "a" dims
// of both pairs are one unit and the "b" dims another; gptj pairs (2r, 2r + 1), so both pairs
// sit in one 64-bit run (a0 b0 a1 b1) and the units are its halves. Offsets in elements.
template <bool kNeox>
__device__ __forceinline__ void pair_units(int u, int half, int& off_a, int& off_b) {
  if (kNeox) {
    off_a = 2 * u;
    off_b = 2 * u + half;
  } else {
    off_a = 4 * u;
    off_b = 4 * u + 2;
  }
}

// rotate_units (below) with the two pairs' cos and sin given: (c0, s0) for pair 2u, (c1, s1) for 2u+1.
template <class Element, bool kNeox>
__device__ __forceinline__ void rotate_units_by(float c0, float s0, float c1, float s1, u32& wa, u32& wb,
                                                float (&x)[2], float (&y)[2]) {
  float a0, a1, b0, b1;
  if (kNeox) {  // wa = (a of pair 2u, a of pair 2u+1), wb = the b dims
    unpack2<Element>(wa, a0, a1);
    unpack2<Element>(wb, b0, b1);
  } else {  // wa = (a, b) of pair 2u, wb = (a, b) of pair 2u+1
    unpack2<Element>(wa, a0, b0);
    unpack2<Element>(wb, a1, b1);
  }
  rope_rotate_pair(a0, b0, c0, s0);
  rope_rotate_pair(a1, b1, c1, s1);
  x[0] = a0, x[1] = a1, y[0] = b0, y[1] = b1;
  using T = ElementTraits<Element>;
  if (kNeox) {
    wa = T::pack(a0, a1);
    wb = T::pack(b0, b1);
  } else {
    wa = T::pack(a0, b0);
    wb = T::pack(a1, b1);
  }
}

// Rotates pairs (2u, 2u+1) held in units wa (at off_a) and wb (at off_b) to position pos.
// Returns the rotated units; x[e] / y[e] (e = 0, 1) receive the rotated fp32 (a, b) of each pair.
template <class Element, bool kNeox, RopeSource kSource = RopeSource::Either>
__device__ __forceinline__ void rotate_units(const RopeTables& r, int pos, int u, u32& wa, u32& wb,
                                             float (&x)[2], float (&y)[2]) {
  float c0, s0, c1, s1;
  rope_cos_sin<kSource>(r, pos, 2 * u, c0, s0);
  rope_cos_sin<kSource>(r, pos, 2 * u + 1, c1, s1);
  rotate_units_by<Element, kNeox>(c0, s0, c1, s1, wa, wb, x, y);
}

// The tile layouts the rotation reads: rows kStride elements apart (padded), or, with kStride ==
// kSwizzled128, the 128-byte swizzled layout the copy engine lands (wgmma.cuh sw128_offset),
// where a 32-bit unit's two elements stay in one 16-byte chunk and a warp's consecutive units
// still fall on distinct banks (the chunk index is XORed with row % 8).
constexpr int kSwizzled128 = 0;
template <int kRows, int kStride>
__device__ __forceinline__ int tile_offset(int row, int off) {
  if constexpr (kStride == kSwizzled128) return sw128_offset<kRows>(row, off >> 3) + (off & 7);
  else return row * kStride + off;
}

// Visits the items (row, two pairs) of a kRows-row shared-memory tile (tile_offset's layouts):
// body(row, u, wa, wb) may change the two 32-bit units in place. Each thread takes
// kBatch items at a time, all loads first, then the math, then the stores: with one block of
// 8 warps per SM there are too few warps to hide one item's load -> angle -> rotate -> store
// chain, so the thread itself must keep several chains in flight. Consecutive threads take
// consecutive units of one row, so a warp's accesses fall on distinct banks.
template <class Element, bool kNeox, int kRows, int kStride, int kThreads, int kBatch, class Body>
__device__ __forceinline__ void for_each_unit_pair(Element* tile, int half, Body&& body) {
  const int units = half / 2, total = kRows * units;
  for (int it0 = threadIdx.x; it0 < total; it0 += kThreads * kBatch) {
    u32 wa[kBatch], wb[kBatch];
    u32* pa[kBatch];
    u32* pb[kBatch];
    int row[kBatch], u[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int it = it0 + k * kThreads;
      row[k] = it / units;
      u[k] = it - row[k] * units;
      int oa, ob;
      pair_units<kNeox>(u[k], half, oa, ob);
      pa[k] = reinterpret_cast<u32*>(tile + tile_offset<kRows, kStride>(row[k], oa));
      pb[k] = reinterpret_cast<u32*>(tile + tile_offset<kRows, kStride>(row[k], ob));
      if (it < total) {
        wa[k] = *pa[k];
        wb[k] = *pb[k];
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (it0 + k * kThreads < total) body(row[k], u[k], wa[k], wb[k]);
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (it0 + k * kThreads < total) {
        *pa[k] = wa[k];
        *pb[k] = wb[k];
      }
  }
}

// rotate_tile_at's form for a pair count kHalf known at compile time: the block's first
// (kThreads / units) * units threads cover whole rows of the kHalf / 2 units of a row (all of
// them where units divide kThreads; 120 of 128 at D = 96, whose 24 units do not), and thread t
// always takes unit t % units, of rows t / units + j * (kThreads / units). Its two turns are
// read once per tile, its shared-memory offsets are constants, and no item needs an index
// division or a bounds test where the passes fill the tile. The generic loop (for_each_unit_pair) divides each item's
// index by the runtime pair count and tests it against the tile: Nsight put half of a fused
// decode call's warp samples in that loop, a quarter of them at integer multiply-adds
// (Llama-3-8B B8 / 32k on an H100, bench/results/2026-12-05-h100-session39/call3/).
template <class Element, bool kNeox, int kRows, int kStride, int kThreads, int kHalf, RopeSource kSource, class PosOf>
__device__ __forceinline__ void rotate_rows_fixed_unit(Element* tile, PosOf&& pos_of, const RopeTables& r) {
  constexpr int kUnits = kHalf / 2, kRowStep = kThreads / kUnits;
  constexpr int kPasses = (kRows + kRowStep - 1) / kRowStep, kBatch = 4;
  if (kThreads % kUnits != 0 && threadIdx.x >= kRowStep * kUnits) return;  // no barrier inside
  const int u = threadIdx.x % kUnits, row0 = threadIdx.x / kUnits;
  int oa, ob;
  pair_units<kNeox>(u, kHalf, oa, ob);
  // Unit `off` of pass j0 + k: padded rows from one base pointer at constant offsets, swizzled
  // ones each at its own (tile_offset).
  Element* base = tile + (kStride == kSwizzled128 ? 0 : row0 * kStride);
  const auto unit = [&](Element* rows, int j0, int k, int off) -> u32* {
    if constexpr (kStride == kSwizzled128)
      return reinterpret_cast<u32*>(tile + tile_offset<kRows, kStride>(row0 + (j0 + k) * kRowStep, off));
    else return reinterpret_cast<u32*>(rows + k * kRowStep * kStride + off);
  };
  unsigned long long turn0 = 0, turn1 = 0;
  if constexpr (kSource == RopeSource::Computed) turn0 = r.turn[2 * u], turn1 = r.turn[2 * u + 1];
  // Does pass j hold a row of the tile for this thread? (Always, where the passes fill it.)
  constexpr bool kWhole = kPasses % kBatch == 0 && kRows % kRowStep == 0;
  const auto live = [&](int j) { return kWhole || (j < kPasses && (kRows % kRowStep == 0 || row0 + j * kRowStep < kRows)); };
  // A loop of batches, not unrolled: unrolled, the compiler hoisted later batches' loads and the
  // decode tile went from 145 to 220 registers, past the three blocks per SM it is sized for.
#pragma unroll 1
  for (int j0 = 0; j0 < kPasses; j0 += kBatch) {
    Element* rows = base + j0 * kRowStep * kStride;
    u32 wa[kBatch], wb[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (live(j0 + k)) {
        wa[k] = *unit(rows, j0, k, oa);
        wb[k] = *unit(rows, j0, k, ob);
      }
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (live(j0 + k)) {
        const int pos = pos_of(row0 + (j0 + k) * kRowStep);
        float c0, s0, c1, s1, x[2], y[2];
        if constexpr (kSource == RopeSource::Computed) {
          turn_cos_sin(turn0, pos, r.factor, c0, s0);
          turn_cos_sin(turn1, pos, r.factor, c1, s1);
        } else {
          rope_cos_sin<kSource>(r, pos, 2 * u, c0, s0);
          rope_cos_sin<kSource>(r, pos, 2 * u + 1, c1, s1);
        }
        rotate_units_by<Element, kNeox>(c0, s0, c1, s1, wa[k], wb[k], x, y);
      }
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (live(j0 + k)) {
        *unit(rows, j0, k, oa) = wa[k];
        *unit(rows, j0, k, ob) = wb[k];
      }
  }
}

// Whether rotate_rows_fixed_unit serves a block of `threads` over `half` compile-time pairs: a
// row's units must not outnumber the threads.
constexpr bool fixed_unit_fits(int threads, int half) { return half > 0 && half / 2 <= threads; }

// Rotates rows [0, kRows) of a shared-memory tile in place, row i at position pos_of(i); kHalf:
// the rotated pairs where the kernel knows them at compile time (0: r.half). The source of cos
// and sin is tested once per tile, so that the batched loop body holds no branch: tested at
// every pair (2026-12-01, caller tables), the fused kernel's rotation lost the overlap of its
// four items per thread, and the kernel 21% of its speed (Llama-3-8B 16k 13.46 -> 16.3 ms on an
// H100, bench/results/2026-12-05-h100-session38/call2/).
template <class Element, bool kNeox, int kRows, int kStride, int kThreads, int kHalf = 0, class PosOf>
__device__ __forceinline__ void rotate_tile_at(Element* tile, PosOf&& pos_of, const RopeTables& r) {
  const auto rotate = [&](auto source) {
    constexpr RopeSource kSource = decltype(source)::value;
    if constexpr (fixed_unit_fits(kThreads, kHalf)) {
      rotate_rows_fixed_unit<Element, kNeox, kRows, kStride, kThreads, kHalf, kSource>(tile, pos_of, r);
    } else {
      for_each_unit_pair<Element, kNeox, kRows, kStride, kThreads, 4>(tile, r.half, [&](int row, int u, u32& wa, u32& wb) {
        float x[2], y[2];
        rotate_units<Element, kNeox, kSource>(r, pos_of(row), u, wa, wb, x, y);
      });
    }
  };
  if (r.cos_table) rotate(RopeSourceTag<RopeSource::Tables>{});
  else rotate(RopeSourceTag<RopeSource::Computed>{});
}

// Rotates rows [0, kRows) of a shared-memory tile in place, row i at position pos0 + i.
template <class Element, bool kNeox, int kRows, int kStride, int kThreads, int kHalf = 0>
__device__ __forceinline__ void rotate_tile(Element* tile, int pos0, const RopeTables& r) {
  rotate_tile_at<Element, kNeox, kRows, kStride, kThreads, kHalf>(tile, [pos0](int row) { return pos0 + row; }, r);
}

// ---- rope_window: which pairs one (query tile, key tile) keeps ---------------------------

// Per tile, every rotated pair is live (in window for every cell: it stays in the MMA), dead
// (out of window for every cell: its K dims are neither loaded nor multiplied) or boundary
// (in window for some cells: left out of the MMA and added back per cell from the Q and K
// tiles in shared memory).
// Uniform over the block: every warp computes the same plan with ballots.
template <int kD>
struct PairPlan {
  u32 live[4];      // bit r % 32 of word r / 32
  u32 boundary[4];
  u32 live_dims[kD / 32];  // per dim: unrotated or its pair live (the dims the MMA multiplies)
  u32 need8;        // 8-dim chunks holding a live or boundary (or unrotated) dim: loaded
  // Leading groups of 16 pairs dead in the whole tile (0 unless rotary_dim == D): their
  // 16-dim chunks are skipped at compile time (FwdKernel::chunk_pruned), so the MMA loop stays
  // straight-line code. Dead pairs past them are masked, not skipped.
  int level;
};

// Compile-time tag for dispatching on a pruning level.
template <int N>
struct Level {
  static constexpr int value = N;
};

// Pair of dim d, or -1 for an unrotated dim.
template <bool kNeox>
__device__ __forceinline__ int pair_of_dim(int d, int half) {
  if (kNeox) return d < half ? d : (d < 2 * half ? d - half : -1);
  return d < 2 * half ? d / 2 : -1;
}

// |Δ| over query positions [q_lo, q_hi] x key positions [k_lo, k_hi]: its least and largest value,
// computed in T (int where the host's position checks keep q - k within 32 bits).
template <class T>
__device__ __forceinline__ void abs_delta_range(int q_lo, int q_hi, int k_lo, int k_hi, T& lo, T& hi) {
  const T d_lo = (T)q_lo - k_hi, d_hi = (T)q_hi - k_lo;
  lo = d_lo > 0 ? d_lo : (d_hi < 0 ? -d_hi : 0);
  hi = (-d_lo > d_hi) ? -d_lo : d_hi;
}

// The plan of query positions [q_lo, q_hi] x key positions [k_lo, k_hi] (inclusive, non-empty).
template <int kD, bool kNeox>
__device__ __forceinline__ PairPlan<kD> pair_plan(const RopeTables& r, int q_lo, int q_hi, int k_lo, int k_hi) {
  long long min_abs, max_abs;  // Δ takes every value in [q_lo - k_hi, q_hi - k_lo]
  abs_delta_range(q_lo, q_hi, k_lo, k_hi, min_abs, max_abs);
  const int lane = threadIdx.x & 31;
  PairPlan<kD> plan;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const int pair = 32 * w + lane;
    bool live = false, bnd = false;
    if (w * 32 < kD / 2 && pair < r.half) {
      const long long lim = r.limit[pair];
      live = lim >= max_abs;
      bnd = !live && lim >= min_abs;
    }
    plan.live[w] = __ballot_sync(0xffffffffu, live);
    plan.boundary[w] = __ballot_sync(0xffffffffu, bnd);
  }
  // Lane c looks at the 8 dims of chunk c.
  bool any_need = false;
  if (lane < kD / 8) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int pr = pair_of_dim<kNeox>(8 * lane + e, r.half);
      const bool l = pr < 0 || ((plan.live[pr >> 5] >> (pr & 31)) & 1u);
      const bool b = pr >= 0 && ((plan.boundary[pr >> 5] >> (pr & 31)) & 1u);
      any_need |= l || b;
    }
  }
  plan.need8 = __ballot_sync(0xffffffffu, any_need);
#pragma unroll
  for (int w = 0; w < kD / 32; ++w) {
    const int pr = pair_of_dim<kNeox>(32 * w + lane, r.half);
    plan.live_dims[w] = __ballot_sync(0xffffffffu, pr < 0 || ((plan.live[pr >> 5] >> (pr & 31)) & 1u));
  }
  // Leading dead pairs: 0 .. first pair that is live or boundary.
  int dead = r.half;
#pragma unroll
  for (int w = 3; w >= 0; --w) {
    const u32 kept = plan.live[w] | plan.boundary[w];
    if (kept) dead = 32 * w + __ffs(kept) - 1;
  }
  plan.level = r.half == kD / 2 ? dead / 16 : 0;
  return plan;
}

// ---- rope_window in the wgmma form: which k steps one warpgroup's tile multiplies --------

// The wgmma form reads Q and K prerotated with each pair's two dims side by side (pair r at dims
// 2r, 2r + 1 whatever the style: RotateKernel<..., kInterleave>), the rotated pairs first, so the
// 16-dim k step s of S = Q K^T holds pairs 8s .. 8s + 7. Pairs are ordered by frequency, and a
// pair whose wavelength is short drops out of the window first, so far from the diagonal the
// dead pairs fill the leading k steps: those are not issued at all. The first k step issued
// ("lead") multiplies Q registers with its dead pairs zeroed; every later step reads Q and K from
// shared memory whole. Pairs that the product then counts in cells outside their window (the
// boundary pairs, and dead pairs past the lead step where wavelengths are not monotone, as
// longrope's may not be) are taken back per cell.
template <int kD>
struct WindowCut {
  static constexpr int kWords = (kD / 2 + 31) / 32;
  // Leading k steps not issued. At most kD / 16 - 1: a tile where no cell keeps any dim issues
  // the last step with every pair masked, which gives S = 0 through the same code.
  int lead;
  u32 kept[kWords];   // pairs in the window of at least one cell of the warpgroup's tile
  u32 corr[kWords];   // pairs multiplied but out of the window of some unmasked cell of this warp's rows
};

// Bits of pairs >= p in word w (pairs 32 w .. 32 w + 31).
__device__ __forceinline__ u32 pairs_from(int p, int w) {
  const int lo = 32 * w;
  return p <= lo ? 0xffffffffu : (p < lo + 32 ? ~((1u << (p - lo)) - 1u) : 0u);
}

// The cut of the warpgroup's query positions [g_lo, g_hi] x key positions [k_lo, gk_hi]
// (inclusive, non-empty), with the corrections of this warp's rows [w_lo, w_hi] x [k_lo, wk_hi]
// (16 of the warpgroup's 64 rows: they span fewer Δ, so fewer pairs need them). The ranges hold
// every unmasked cell; wk_hi <= gk_hi, so the warp's cells are some of the warpgroup's. Every
// lane gets the same cut.
template <int kD>
__device__ __forceinline__ WindowCut<kD> window_cut(const RopeTables& r, int g_lo, int g_hi, int w_lo, int w_hi,
                                                    int k_lo, int gk_hi, int wk_hi) {
  using Cut = WindowCut<kD>;
  // In 32 bits: the host keeps every query position within [-INT32_MAX + Nk, INT32_MAX]
  // (cuda_backend.cpp), so q - k and k - q fit. (This runs once per key tile in the loop.)
  int g_min, g_max, w_min, w_max;
  abs_delta_range(g_lo, g_hi, k_lo, gk_hi, g_min, g_max);
  abs_delta_range(w_lo, w_hi, k_lo, wk_hi, w_min, w_max);
  const int lane = threadIdx.x & 31, half = r.half;
  Cut cut;
  u32 short_w[Cut::kWords];  // pairs out of the window of some cell of the warp's range
  // The first dim any cell needs: a kept pair's, else the first unrotated dim.
  int first_dim = 2 * half < kD ? 2 * half : kD;
#pragma unroll
  for (int w = 0; w < Cut::kWords; ++w) {
    const int pair = 32 * w + lane;
    const int lim = pair < half ? r.limit[pair] : -1;
    cut.kept[w] = __ballot_sync(0xffffffffu, lim >= g_min);
    short_w[w] = __ballot_sync(0xffffffffu, pair < half && lim < w_max);
    const int first_kept = 2 * (32 * w + __ffs(cut.kept[w]) - 1);  // meaningful where any is kept
    if (cut.kept[w] && first_kept < first_dim) first_dim = first_kept;
  }
  cut.lead = first_dim / 16 < kD / 16 ? first_dim / 16 : kD / 16 - 1;
  // Multiplied: the pairs from the lead step on, less the lead step's dead ones (masked).
  const int from = 8 * cut.lead, after = from + 8;
#pragma unroll
  for (int w = 0; w < Cut::kWords; ++w) {
    const u32 lead_step = pairs_from(from, w) & ~pairs_from(after, w);
    const u32 multiplied = pairs_from(from, w) & ~(lead_step & ~cut.kept[w]);
    cut.corr[w] = multiplied & short_w[w];
  }
  return cut;
}

// Word i of a cut's bit set, selected in registers: an indexed read (or a chain of selects, which
// the compiler folds back into one) puts the whole WindowCut in local memory once the index is a
// run-time value (the lead step's, in the loop over key tiles).
template <int kW>
__device__ __forceinline__ u32 cut_word(const u32 (&words)[kW], int i) {
  u32 r = words[0];
#pragma unroll
  for (int w = 1; w < kW; ++w) {
#ifdef ATTNFUSE_KERNELS_ON_HOST
    r = i == w ? words[w] : r;
#else
    asm("{\n .reg .pred p;\n setp.eq.s32 p, %2, %3;\n selp.b32 %0, %1, %0, p;\n}\n"
        : "+r"(r) : "r"(words[w]), "r"(i), "r"(w));
#endif
  }
  return r;
}

// Is pair `pair` multiplied in the lead step (kept, or an unrotated dim)?
template <int kD>
__device__ __forceinline__ bool lead_pair_kept(const WindowCut<kD>& cut, int pair, int half) {
  return pair >= half || ((cut_word(cut.kept, pair >> 5) >> (pair & 31)) & 1u);
}

// ---- the pre-rotation kernel (rope_mode = prerotate) -------------------------------------

// Rotates Q (positions q_offset + i) and K (positions j) into contiguous [B, H, N, D] copies.
// Both paths round exactly as rotate_units does (fp32 rotation, one rounding to Element).
// kInterleave (neox only): the copies hold each pair's two dims side by side (pair r at dims
// 2r, 2r + 1, the GPT-J layout), as rope_window's wgmma form reads them (WindowCut). Q K^T is
// the same sum in either order, so only the pruning sees the difference.
template <class Element, int kD, bool kNeox, bool kInterleave = false>
struct RotateKernel {
  static_assert(kNeox || !kInterleave, "gptj pairs are interleaved already");
  static constexpr int kUnits = kD / 2;  // 32-bit units per row

  static __device__ void run(const RotateParams& p) {
    __shared__ __align__(16) char tables[RopeTableBytes<kD / 2>::value];
    grid_dependency_wait();
    allow_dependent_launch();
    const RopeTables rope = stage_rope_tables<kD / 2>(p.rope, tables);
    __syncthreads();
    if (p.vec) run_vec(p, rope);
    else run_units(p, rope);
  }

  // The vector path: one thread per (batch, position, 8-element chunk), over every head of the
  // tensor, so a chunk's angles are computed once per position instead of once per head, and
  // every load and store is a whole 16-byte vector. A chunk holds the "a" dims of 8 pairs (neox,
  // whose "b" dims sit half a rotary span later), 4 whole pairs (gptj) or unrotated dims.
  static __device__ void run_vec(const RotateParams& p, const RopeTables& rope) {
    constexpr int kPairs = kNeox ? 8 : 4;
    using T = ElementTraits<Element>;
    const int half = rope.half;
    const int rot = half / kPairs;                  // chunks that rotate
    const int per_pos = rot + (kD - 2 * half) / 8;  // plus the unrotated ones
    const af_i64 pos_q = p.rows[0] / p.heads[0] * per_pos;
    const af_i64 total = pos_q + p.rows[1] / p.heads[1] * per_pos;
    for (af_i64 it = (af_i64)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (af_i64)gridDim.x * blockDim.x) {
      const int t = it < pos_q ? 0 : 1;
      const af_i64 rel = t == 0 ? it : it - pos_q;
      const af_i64 bn = rel / per_pos;
      const int k = (int)(rel - bn * per_pos);
      const int n = (int)(bn % p.len[t]);
      const af_i64 b = bn / p.len[t];
      const Element* src = static_cast<const Element*>(p.src[t]) + b * p.src_stride[t][0] + n * p.src_stride[t][2];
      Element* dst = static_cast<Element*>(p.dst[t]) + (b * p.heads[t] * p.len[t] + n) * kD;
      const af_i64 src_head = p.src_stride[t][1], dst_head = (af_i64)p.len[t] * kD;
      const int heads = p.heads[t];
      if (k >= rot) {  // unrotated dims
        const int off = 2 * half + 8 * (k - rot);
        for (int h = 0; h < heads; ++h)
          *reinterpret_cast<uint4*>(dst + h * dst_head + off) = *reinterpret_cast<const uint4*>(src + h * src_head + off);
        continue;
      }
      float c[kPairs], s[kPairs];
#pragma unroll
      for (int e = 0; e < kPairs; ++e) rope_cos_sin(rope, (int)(p.pos0[t] + n), kPairs * k + e, c[e], s[e]);
      const int off_a = 8 * k, off_b = half + 8 * k;  // off_b: neox only
#pragma unroll 2
      for (int h = 0; h < heads; ++h) {
        uint4 va = *reinterpret_cast<const uint4*>(src + h * src_head + off_a);
        uint4 vb = kNeox ? *reinterpret_cast<const uint4*>(src + h * src_head + off_b) : va;
        u32* wa = reinterpret_cast<u32*>(&va);
        u32* wb = reinterpret_cast<u32*>(&vb);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float a0, a1, b0, b1;
          if (kNeox) {  // unit e of each vector: pairs 2e and 2e + 1 of the chunk
            unpack2<Element>(wa[e], a0, a1);
            unpack2<Element>(wb[e], b0, b1);
            rope_rotate_pair(a0, b0, c[2 * e], s[2 * e]);
            rope_rotate_pair(a1, b1, c[2 * e + 1], s[2 * e + 1]);
            wa[e] = T::pack(a0, a1);
            wb[e] = T::pack(b0, b1);
          } else {  // unit e: (a, b) of pair e of the chunk
            unpack2<Element>(wa[e], a0, b0);
            rope_rotate_pair(a0, b0, c[e], s[e]);
            wa[e] = T::pack(a0, b0);
          }
        }
        if (kInterleave) {  // pairs 8k .. 8k + 7 as (a, b) runs: dims 16k .. 16k + 15
          uint4 lo, hi;
          u32* wl = reinterpret_cast<u32*>(&lo);
          u32* wh = reinterpret_cast<u32*>(&hi);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            u32* out = e < 2 ? wl + 2 * e : wh + 2 * (e - 2);
            out[0] = __byte_perm(wa[e], wb[e], 0x5410);  // (a, b) of pair 2e
            out[1] = __byte_perm(wa[e], wb[e], 0x7632);  // (a, b) of pair 2e + 1
          }
          *reinterpret_cast<uint4*>(dst + h * dst_head + 2 * off_a) = lo;
          *reinterpret_cast<uint4*>(dst + h * dst_head + 2 * off_a + 8) = hi;
          continue;
        }
        *reinterpret_cast<uint4*>(dst + h * dst_head + off_a) = va;
        if (kNeox) *reinterpret_cast<uint4*>(dst + h * dst_head + off_b) = vb;
      }
    }
  }

  // The 32-bit path (any alignment, any even rotary span): one thread per 32-bit unit; rotated
  // units are handled by the thread of their "a" unit, which writes both; unrotated units are
  // copied.
  static __device__ void run_units(const RotateParams& p, const RopeTables& rope) {
    const af_i64 total = (p.rows[0] + p.rows[1]) * kUnits;
    for (af_i64 it = (af_i64)blockIdx.x * blockDim.x + threadIdx.x; it < total;
         it += (af_i64)gridDim.x * blockDim.x) {
      const int t = it < p.rows[0] * kUnits ? 0 : 1;
      const af_i64 rel = t == 0 ? it : it - p.rows[0] * kUnits;
      const af_i64 row = rel / kUnits;
      const int unit = (int)(rel - row * kUnits);
      const int n = (int)(row % p.len[t]);
      const af_i64 bh = row / p.len[t];
      const int h = (int)(bh % p.heads[t]);
      const af_i64 b = bh / p.heads[t];
      const u32* src = reinterpret_cast<const u32*>(static_cast<const Element*>(p.src[t]) + b * p.src_stride[t][0] +
                                                    h * p.src_stride[t][1] + n * p.src_stride[t][2]);
      u32* dst = reinterpret_cast<u32*>(static_cast<Element*>(p.dst[t]) + row * kD);
      const int half = rope.half;
      // Which unit plays "a" for pairs (2u, 2u+1)?
      int u = -1;
      if (kNeox) {
        if (unit < half / 2) u = unit;
        else if (unit < half) continue;  // a "b" unit: written by its "a" thread
      } else if (unit < half) {
        if (unit & 1) continue;  // second half of a gptj pair run
        u = unit / 2;
      }
      if (u < 0) {  // unrotated dims
        dst[unit] = src[unit];
        continue;
      }
      int oa, ob;
      pair_units<kNeox>(u, half, oa, ob);
      u32 wa = src[oa / 2], wb = src[ob / 2];
      float x[2], y[2];
      rotate_units<Element, kNeox>(rope, (int)(p.pos0[t] + n), u, wa, wb, x, y);
      if (kInterleave) {  // pairs 2u, 2u + 1 as (a, b) runs: units 2u, 2u + 1
        dst[2 * u] = __byte_perm(wa, wb, 0x5410);
        dst[2 * u + 1] = __byte_perm(wa, wb, 0x7632);
        continue;
      }
      dst[oa / 2] = wa;
      dst[ob / 2] = wb;
    }
  }
};

}  // namespace attnfuse_kernels
