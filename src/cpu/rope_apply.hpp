// The per-key RoPE work of the CPU kernel, on a call's RopePlan (cpu/rope_plan.hpp): rotating K
// rows as chunks load, and rope_window's QK product over a tile's kept dims with its boundary
// pairs added per cell. Part of the per-ISA kernel sources (cpu/simd.hpp says why).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/rope_plan.hpp"
#include "cpu/simd.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS {

// Rotates the contiguous row x (its first rotary_dim dims) to position p of table t: the angles
// composed and applied in one pass (the per-key work of every chunk, so it vectorizes). Pairs
// below first_pair (rounded down to a multiple of 16, whole vectors) are left alone: rope_window
// skips pairs no cell of a chunk reads.
inline void rotate_row(const RopePlan& plan, const PositionTable& t, int64_t p, float* x, int first_pair = 0) {
  const int h = plan.half;  // a local, so the stores below cannot be thought to change it
  // Started at a multiple of 16 pairs so the loop runs whole vectors (rotating a few pairs
  // nobody reads costs less than a scalar remainder loop).
  const int r0 = first_pair & ~15;
  if (plan.user_cos) {  // the caller's tables: one row per position (pairs below r0 are unread anyway)
    plan.rotate(plan.user_cos + p * h, plan.user_sin + p * h, x, 1);
    return;
  }
  const int64_t rel = p - t.p0;
  const float* __restrict cc = t.cos.data() + (rel / kRopeFine) * h;
  const float* __restrict cs = t.sin.data() + (rel / kRopeFine) * h;
  const float* __restrict fc = plan.fine_cos.data() + (rel % kRopeFine) * h;
  const float* __restrict fs = plan.fine_sin.data() + (rel % kRopeFine) * h;
  if (plan.style == RopeStyle::Neox) {
    float* __restrict xa = x;
    float* __restrict xb = x + h;
    for (int r = r0; r < h; ++r) {
      const float c = cc[r] * fc[r] - cs[r] * fs[r], s = cs[r] * fc[r] + cc[r] * fs[r];
      const float a = xa[r], b = xb[r];
      xa[r] = a * c - b * s;
      xb[r] = b * c + a * s;
    }
  } else {
    for (int r = r0; r < h; ++r) {
      const float c = cc[r] * fc[r] - cs[r] * fs[r], s = cs[r] * fc[r] + cc[r] * fs[r];
      const float a = x[2 * r], b = x[2 * r + 1];
      x[2 * r] = a * c - b * s;
      x[2 * r + 1] = b * c + a * s;
    }
  }
}

// st[j * ldst + i] += qt[a][i] * k_j[a] + qt[b][i] * k_j[b] of each boundary pair where
// |Δ| <= limit. The columns come in segments of `seg` (one per query head of a packed GQA tile,
// else one of mpad): column c0 + i of a segment has Δ = delta0 + i - j.
inline void add_boundary_pairs(const RopePlan& plan, const WindowSplit& split, const float* qt, int64_t ldq,
                               const float* krot, int64_t D, int n, int64_t delta0, int mpad, int seg,
                               float* st, int64_t ldst) {
  using i128 = __int128;
  for (int r : split.boundary) {
    const rope::PairDims pd = rope::pair_dims(plan.style, plan.rotary_dim, r);
    const float* qa = qt + pd.a * ldq;
    const float* qb = qt + pd.b * ldq;
    const i128 w = plan.limits[static_cast<size_t>(r)];
    for (int j = 0; j < n; ++j) {
      // |delta0 + i - j| <= w  <=>  j - delta0 - w <= i <= j - delta0 + w
      const i128 lo = i128(j) - delta0 - w, hi = i128(j) - delta0 + w + 1;
      const float ka = krot[j * D + pd.a], kb = krot[j * D + pd.b];
      float* s = st + j * ldst;
      for (int c0 = 0; c0 < mpad; c0 += seg) {
        const int len = std::min(seg, mpad - c0);
        const int ilo = c0 + static_cast<int>(std::clamp<i128>(lo, 0, len));
        const int ihi = c0 + static_cast<int>(std::clamp<i128>(hi, ilo - c0, len));
        for (int i = ilo; i < ihi; ++i) s[i] += qa[i] * ka + qb[i] * kb;
      }
    }
  }
}

// rope_window's scores of one chunk, S^T[j][i] for n keys and 16 * qv query columns (mpad): the QK
// product over the split's kept ranges of dims (pairs out of window for the whole chunk are never
// multiplied), then each boundary pair's term added to the cells where |Δ| is within its limit,
// Δ = delta0 + i - j for column i of each segment of `seg` columns (add_boundary_pairs). qt is the
// rotated, scaled Q^T (row stride simd::kStride), krot the rotated K rows (row stride D); krow is
// scratch for n row pointers. Requires !split.all.
inline void windowed_scores(const RopePlan& plan, const WindowSplit& split, const float* qt, const float* krot,
                            int64_t D, int n, int64_t delta0, int qv, int mpad, int seg, const float** krow,
                            float* st) {
  constexpr int64_t ld = simd::kStride;
  if (split.ranges.empty())
    for (int j = 0; j < n; ++j) std::fill(st + j * ld, st + j * ld + mpad, 0.0f);
  bool first = true;
  for (const auto& [d0, d1] : split.ranges) {
    for (int j = 0; j < n; ++j) krow[j] = krot + j * D + d0;
    const float* q = qt + int64_t{d0} * ld;
    if (first)
      simd::qk(qv, krow, n, q, d1 - d0, st);
    else
      simd::qk<true>(qv, krow, n, q, d1 - d0, st);
    first = false;
  }
  add_boundary_pairs(plan, split, qt, ld, krot, D, n, delta0, mpad, seg, st, ld);
}

}  // namespace attnfuse::cpu::ATTNFUSE_CPU_ISA_NS
