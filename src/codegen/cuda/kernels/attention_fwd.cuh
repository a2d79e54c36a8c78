// The fused forward attention kernel for sm_80 and newer (mma.sync m16n8k16, ldmatrix,
// cp.async double buffering, online softmax in the exp2 domain). It is a template over a Spec
// that codegen emits: the Spec carries the structure (element type, head dim, tile shape, which
// masks, which normalization) as constants and the score modifiers as one small hook body.
// RoPE (rope.cuh) enters at three points: Q and K tiles rotated in shared memory (fused
// placement), rope_window's per-tile pair plan masking the Q fragments of the QK product, and
// its boundary pairs added per cell before the softmax.
#pragma once

#include "params.cuh"
#include "primitives.cuh"
#include "rope.cuh"

namespace attnfuse_kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000u); }

// What a modifier hook may read about the cell it modifies.
// Positions are 32-bit here: the host refuses calls whose positions do not fit (see
// CudaKernel::launch), which keeps the per-cell arithmetic in single registers.
struct CellCtx {
  int b, h;               // batch, query head
  int i, j;               // query row, key index
  int delta;              // position of query i minus position of key j
  float slope;            // ALiBi slope of head h (0 when the program has no alibi)
  const float* bias_row;  // additive_bias: row i of this (b, h)'s bias, or null
};

// ALiBi slopes of the ALiBi paper: 2^(-8k/n) for the closest power of two n <= H, then for the
// remaining heads every other slope of the sequence for 2n.
__device__ __forceinline__ float standard_alibi_slope(int h, int num_heads) {
  int n = 1;
  while (n * 2 <= num_heads) n *= 2;
  if (h < n) return exp2f(-8.0f * (float)(h + 1) / (float)n);
  return exp2f(-8.0f * (float)(2 * (h - n) + 1) / (float)(2 * n));
}

template <class Spec>
struct FwdKernel {
  using Element = typename Spec::Element;
  using Traits = ElementTraits<Element>;
  static constexpr int kD = Spec::kHeadDim;
  static constexpr int kBM = Spec::kBlockM;
  static constexpr int kBN = Spec::kBlockN;
  static constexpr int kWarps = Spec::kWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kAtoms = kBM / (16 * kWarps);  // 16-row MMA atoms per warp
  static constexpr int kStride = kD + 8;  // smem row pitch (elements): +16 B spreads ldmatrix rows over banks
  static constexpr int kDT = kD / 8;      // 8-wide tiles along D
  static constexpr int kNT = kBN / 8;     // 8-wide tiles along the key block
  static_assert(kBM % (16 * kWarps) == 0, "block_m must be a multiple of 16 * warps");
  static_assert(kD % 16 == 0 && kBN % 16 == 0, "head dim and block_n must be multiples of 16");

  // Plain softmax programs keep raw q.k in the score tile and fold the scale into exp2's FFMA.
  static constexpr bool kRawScores = !Spec::kHasModifiers && !Spec::kRelu;

  // RoPE: kRotate rotates Q once per query tile and each K tile on arrival (fused mode; in
  // prerotate mode Q and K arrive rotated). kPairWindow is rope_window's per-pair pruning.
  static constexpr bool kRotate = Spec::kRotate;
  static constexpr bool kPairWindow = Spec::kPairWindow;
  static constexpr bool kNeox = Spec::kNeox;
  static constexpr bool kTables = kRotate || kPairWindow;  // per-pair RoPE tables staged in smem
  using Plan = PairPlan<kD>;
  // rope_window's compile-time pruning level for tiles far from the diagonal: the 32
  // highest-frequency pairs dead (PairPlan::level >= 2). Every level costs one more instance of
  // the step in the cold compile (about 0.8 s each at D = 128), and the others pay little:
  // level 1 holds for a band of a few dozen tiles per row (|Δ| between ~λ_15 and ~λ_31), level
  // 3 needs |Δ| beyond λ_47 (~10^5-10^6 positions for Llama-3 and Qwen2.5 RoPE). Tiles below
  // level 2 mask their dead pairs instead of skipping them.
  static constexpr int kPruneLevel = kPairWindow && kD / 32 >= 2 ? 2 : 0;

  // Is 16-dim chunk kk made only of pairs below 16 * level (full rotation)? neox: pair group j
  // is chunks j (a dims) and j + D/32 (b dims); gptj: chunks 2j and 2j + 1.
  static constexpr bool chunk_pruned(int kk, int level) {
    if (kNeox) return (kk < kD / 32 ? kk : kk - kD / 32) < level;
    return kk / 2 < level;
  }

  static constexpr int kTableBytes = kTables ? RopeTableBytes<kD / 2>::value : 0;

  static constexpr int smem_bytes() { return (kBM + 4 * kBN) * kStride * 2 + kTableBytes; }

  // Copy rows [row0, row0 + rows) of a [len, D] slice into smem (zeros past `len`). Chunk c of
  // 8 dims is read only where bit c of `need8` is set (rope_window's dead pairs), else zeroed.
  template <int kRows>
  static __device__ __forceinline__ void load_tile(Element* smem, const Element* gmem, af_i64 row_stride,
                                                   int row0, int len, u32 need8 = 0xffffffffu) {
    constexpr int kChunks = kD / 8;  // 16-byte chunks per row
    for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const int row = row0 + r;
      const bool ok = row < len && ((need8 >> ch) & 1u);
      const Element* src = gmem + (ok ? (af_i64)row * row_stride : 0) + ch * 8;
      cp_async_16(smem_addr(smem + r * kStride + ch * 8), src, ok ? 16 : 0);
    }
  }

  // Is cell (query row i, key j) kept by the program's masks?
  // qpos = position of query i.
  static __device__ __forceinline__ bool keep(const FwdParams& p, int qpos, int j) {
    if (j >= p.len_k) return false;
    const int delta = qpos - j;
    if (Spec::kCausal && delta < 0) return false;
    if (Spec::kSlidingWindow && (delta >= p.window || -delta >= p.window)) return false;
    return true;
  }

  // Key range [lo, hi) that can hold kept cells for query rows [m0, m0 + kBM).
  static __device__ __forceinline__ void key_range(const FwdParams& p, int m0, int& lo, int& hi) {
    af_i64 l = 0, h = p.len_k;
    const af_i64 first = (af_i64)m0 + p.q_offset;
    const af_i64 last = first + kBM - 1;
    if (Spec::kCausal) h = h < last + 1 ? h : last + 1;
    if (Spec::kSlidingWindow) {
      const af_i64 wl = first - p.window + 1, wh = last + p.window;
      l = l > wl ? l : wl;
      h = h < wh ? h : wh;
    }
    lo = (int)(l < 0 ? 0 : l);
    hi = (int)(h < lo ? lo : h);
  }

  // Every cell of key tile [n0, n0 + kBN) x query rows [m0, m0 + kBM) kept by the masks?
  static __device__ __forceinline__ bool tile_inside(const FwdParams& p, int m0, int n0) {
    if (n0 + kBN > p.len_k) return false;
    const af_i64 first = (af_i64)m0 + p.q_offset, last = first + kBM - 1;
    if (Spec::kCausal && first - (n0 + kBN - 1) < 0) return false;
    if (Spec::kSlidingWindow) {
      if (last - n0 >= p.window) return false;
      if ((af_i64)(n0 + kBN - 1) - first >= p.window) return false;
    }
    return true;
  }

  // rope_window's pair plan of (query rows [m0, m0 + kBM), key tile nb).
  static __device__ __forceinline__ Plan plan_of(const FwdParams& p, const RopeTables& rt, int m0, int nb) {
    const int q_last = (m0 + kBM < p.len_q ? m0 + kBM : p.len_q) - 1;
    const int n0 = nb * kBN, k_last = (n0 + kBN < p.len_k ? n0 + kBN : p.len_k) - 1;
    return pair_plan<kD, kNeox>(rt, m0 + (int)p.q_offset, q_last + (int)p.q_offset, n0, k_last);
  }

  // Fused placement: rotate a K tile that has landed in smem to key positions n0, n0 + 1, ...
  static __device__ __forceinline__ void rotate_k_tile(const RopeTables& rt, Element* k_tile, int n0) {
    rotate_tile<Element, kNeox, kBN, kStride, kThreads>(k_tile, n0, rt);
  }

  // rope_window: the Q fragment registers of 16-dim chunk kk with every dim that is not live in
  // this tile zeroed, so the MMA adds live pairs and unrotated dims only (dead pairs' K dims may
  // not even be loaded; boundary pairs are added per cell afterwards). Thread t holds dims
  // 2t, 2t+1 (registers 0, 1) and 2t+8, 2t+9 (registers 2, 3) of the chunk.
  static __device__ __forceinline__ void mask_q_fragment(u32 (&qa)[4], const Plan& plan, int kk, int t) {
    const u32 word = plan.live_dims[kk >> 1] >> ((kk & 1) * 16);
    const u32 lo = (word >> (2 * t)) & 3u, hi = (word >> (2 * t + 8)) & 3u;
    const u32 mlo = ((lo & 1u) ? 0x0000ffffu : 0u) | ((lo & 2u) ? 0xffff0000u : 0u);
    const u32 mhi = ((hi & 1u) ? 0x0000ffffu : 0u) | ((hi & 2u) ? 0xffff0000u : 0u);
    qa[0] &= mlo;
    qa[1] &= mlo;
    qa[2] &= mhi;
    qa[3] &= mhi;
  }

  // rope_window: add each boundary pair's term q_a k_a + q_b k_b to the raw scores of the cells
  // within its window (|Δ| <= limit), reading the pair's rotated dims straight from the Q and K
  // tiles. Boundary pairs are few per tile (their limits must fall inside the tile's range of
  // |Δ|), so this per-cell work stays small next to the MMA.
  static __device__ __forceinline__ void add_boundary_terms(const FwdParams& p, const RopeTables& rt,
                                                            float (&acc_s)[kAtoms][kNT][4],
                                                            const Plan& plan, const Element* sQ,
                                                            const Element* k_tile, int m0, int n0, int warp,
                                                            int g, int t) {
#pragma unroll
    for (int w = 0; w < (kD / 2 + 31) / 32; ++w) {
      for (u32 m = plan.boundary[w]; m; m &= m - 1u) {
        const int pair = 32 * w + __ffs(m) - 1;
        const int lim = rt.limit[pair];
        const int da = kNeox ? pair : 2 * pair;
        const int db = kNeox ? pair + rt.half : 2 * pair + 1;
        float qa[kAtoms][2], qb[kAtoms][2];
#pragma unroll
        for (int a = 0; a < kAtoms; ++a)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int rl = warp * 16 * kAtoms + a * 16 + g + hf * 8;
            qa[a][hf] = Traits::to_float(sQ[rl * kStride + da].bits);
            qb[a][hf] = Traits::to_float(sQ[rl * kStride + db].bits);
          }
        // Δ of row rl, column n*8 + 2t + e is d0 + rl - 8n - e.
        const int d0 = m0 + warp * 16 * kAtoms + g + (int)p.q_offset - n0 - 2 * t;
#pragma unroll
        for (int n = 0; n < kNT; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const Element* krow = k_tile + (n * 8 + 2 * t + e) * kStride;
            const float ka = Traits::to_float(krow[da].bits), kb = Traits::to_float(krow[db].bits);
#pragma unroll
            for (int a = 0; a < kAtoms; ++a)
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const int d = d0 + a * 16 + hf * 8 - 8 * n - e;
                if (abs(d) <= lim) acc_s[a][n][2 * hf + e] += qa[a][hf] * ka + qb[a][hf] * kb;
              }
          }
      }
    }
  }

  // Scores -> probabilities for one key tile: online softmax (exp2 domain) or ReLU. kMask is
  // false for tiles wholly inside every mask, which then run without a per-cell check.
  template <bool kMask>
  static __device__ __forceinline__ void scores_to_probs(const FwdParams& p, float (&acc_s)[kAtoms][kNT][4],
                                                         float (&acc_o)[kAtoms][kDT][4], float (&row_m)[kAtoms][2],
                                                         float (&row_l)[kAtoms][2], int m0, int n0, int warp,
                                                         int g, int t, int b, int h, float slope) {
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = m0 + warp * 16 * kAtoms + a * 16 + g + hf * 8;
        const int qpos = i + (int)p.q_offset;
        const float* bias_row = nullptr;
        if constexpr (Spec::kBias)
          bias_row = i < p.len_q ? p.bias + b * p.bias_stride[0] + h * p.bias_stride[1] + (af_i64)i * p.bias_stride[2]
                                 : nullptr;
        float tile_max = neg_inf();
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = n0 + n * 8 + 2 * t + e;
            float s = acc_s[a][n][2 * hf + e];
            if constexpr (Spec::kHasModifiers || Spec::kRelu) {
              CellCtx c{b, h, i, j, qpos - j, slope, bias_row};
              s = Spec::modify(s * p.scale, p, c);
              if constexpr (!Spec::kRelu) s *= kLog2e;
            }  // else: raw q.k; the scale is folded into the exp2 argument below (one FFMA)
            if (kMask && !keep(p, qpos, j)) s = neg_inf();
            acc_s[a][n][2 * hf + e] = s;
            tile_max = fmaxf(tile_max, s);
          }
        }
        if constexpr (Spec::kRelu) {
          // p = max(s, 0); the row's normaliser is its number of kept keys (counted in row_l).
          float kept = 0.f;
#pragma unroll
          for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float s = acc_s[a][n][2 * hf + e];
              kept += (s != neg_inf()) ? 1.f : 0.f;
              acc_s[a][n][2 * hf + e] = fmaxf(s, 0.f);
            }
          row_l[a][hf] += kept;
        } else {
          tile_max = quad_max(tile_max);
          if constexpr (kRawScores) tile_max *= p.scale_log2;  // scale > 0 keeps the argmax
          const float m_new = fmaxf(row_m[a][hf], tile_max);
          // A row that has seen no kept key yet keeps m = -inf; use 0 so exp2 never sees inf - inf.
          const float m_use = m_new == neg_inf() ? 0.f : m_new;
          const float alpha = fast_exp2(row_m[a][hf] - m_use);
          row_m[a][hf] = m_new;
          float sum = 0.f;
#pragma unroll
          for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float x = acc_s[a][n][2 * hf + e];
              const float pr = fast_exp2(kRawScores ? fmaf(x, p.scale_log2, -m_use) : x - m_use);
              acc_s[a][n][2 * hf + e] = pr;
              sum += pr;
            }
          row_l[a][hf] = row_l[a][hf] * alpha + sum;
#pragma unroll
          for (int d = 0; d < kDT; ++d) {
            acc_o[a][d][2 * hf] *= alpha;
            acc_o[a][d][2 * hf + 1] *= alpha;
          }
        }
      }
    }

  }

  // One key tile: wait for it, prefetch the next one into the other stage, S = Q K^T, scores ->
  // probabilities, O += P V. A template on kMask so that the steps over tiles wholly inside the
  // masks are straight-line code with no per-cell check (the scheduler can then hoist the V
  // fragment loads over the softmax).
  template <bool kMask, int kLevel>
  static __device__ __forceinline__ void step(const FwdParams& p, const RopeTables& rt, int nb, int n_first, int n_end,
                                              const Element* sQ, Element* sK, Element* sV,
                                              const Element* gK, const Element* gV, int m0, int warp,
                                              int lane, int g, int t, int b, int h, float slope,
                                              Plan& plan, float (&acc_o)[kAtoms][kDT][4],
                                              float (&row_m)[kAtoms][2], float (&row_l)[kAtoms][2]) {
    const int stage = (nb - n_first) & 1;
    cp_async_wait<0>();
    __syncthreads();  // tile nb is in smem, and every warp is done with the other stage
    Plan next = plan;
    if (nb + 1 < n_end) {
      if constexpr (kPairWindow) next = plan_of(p, rt, m0, nb + 1);
      load_tile<kBN>(sK + (stage ^ 1) * kBN * kStride, gK, p.k_stride[2], (nb + 1) * kBN, p.len_k,
                     kPairWindow ? next.need8 : 0xffffffffu);
      load_tile<kBN>(sV + (stage ^ 1) * kBN * kStride, gV, p.v_stride[2], (nb + 1) * kBN, p.len_k);
    }
    cp_async_commit();
    Element* k_tile = sK + stage * kBN * kStride;
    const Element* v_tile = sV + stage * kBN * kStride;
    const int n0 = nb * kBN;
    if constexpr (kRotate) {
      rotate_k_tile(rt, k_tile, n0);
      __syncthreads();  // the rotated K tile is visible to every warp
    }

    // S = Q K^T for this warp's rows.
    float acc_s[kAtoms][kNT][4];
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
#pragma unroll
      for (int n = 0; n < kNT; ++n) acc_s[a][n][0] = acc_s[a][n][1] = acc_s[a][n][2] = acc_s[a][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      if (kLevel > 0 && chunk_pruned(kk, kLevel)) continue;  // folded after unrolling: no branch
      u32 qa[kAtoms][4];
#pragma unroll
      for (int a = 0; a < kAtoms; ++a) {
        const int row = warp * 16 * kAtoms + a * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(qa[a], smem_addr(sQ + row * kStride + kk * 16 + (lane >> 4) * 8));
        if constexpr (kPairWindow) mask_q_fragment(qa[a], plan, kk, t);
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        u32 kb[4];
        const int row = np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(kb, smem_addr(k_tile + row * kStride + kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int a = 0; a < kAtoms; ++a) {
          mma_16816<Element>(acc_s[a][2 * np], qa[a], kb[0], kb[1]);
          mma_16816<Element>(acc_s[a][2 * np + 1], qa[a], kb[2], kb[3]);
        }
      }
    }

    if constexpr (kPairWindow) {
      if (plan.boundary[0] | plan.boundary[1] | plan.boundary[2] | plan.boundary[3])
        add_boundary_terms(p, rt, acc_s, plan, sQ, k_tile, m0, n0, warp, g, t);
      plan = next;
    }

    // Scores -> probabilities (per-cell mask checks only in kMask steps).
    scores_to_probs<kMask>(p, acc_s, acc_o, row_m, row_l, m0, n0, warp, g, t, b, h, slope);

    // O += P V: the S accumulators are already laid out as the A operand of the next MMA.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      u32 pa[kAtoms][4];
#pragma unroll
      for (int a = 0; a < kAtoms; ++a) {
        pa[a][0] = Traits::pack(acc_s[a][2 * kk][0], acc_s[a][2 * kk][1]);
        pa[a][1] = Traits::pack(acc_s[a][2 * kk][2], acc_s[a][2 * kk][3]);
        pa[a][2] = Traits::pack(acc_s[a][2 * kk + 1][0], acc_s[a][2 * kk + 1][1]);
        pa[a][3] = Traits::pack(acc_s[a][2 * kk + 1][2], acc_s[a][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        u32 vb[4];
        const int row = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(vb, smem_addr(v_tile + row * kStride + dp * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int a = 0; a < kAtoms; ++a) {
          mma_16816<Element>(acc_o[a][2 * dp], pa[a], vb[0], vb[1]);
          mma_16816<Element>(acc_o[a][2 * dp + 1], pa[a], vb[2], vb[3]);
        }
      }
    }
  }

  static __device__ void run(const FwdParams& p, char* smem_raw) {
    Element* sQ = reinterpret_cast<Element*>(smem_raw);
    Element* sK = sQ + kBM * kStride;  // 2 stages
    Element* sV = sK + 2 * kBN * kStride;
    RopeTables rt{};
    if constexpr (kTables) {
      rt = stage_rope_tables<kD / 2>(p.rope, reinterpret_cast<char*>(sV + 2 * kBN * kStride));
      __syncthreads();  // the pair plan below reads the staged limits
    }

    // Causal rows near the end see the most keys: schedule those blocks first so the short ones
    // fill the tail of the grid instead of leaving SMs idle behind one long block.
    const int m_block = Spec::kCausal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int hk = h / p.head_ratio;
    const int m0 = m_block * kBM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;

    const Element* gQ = static_cast<const Element*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
    const Element* gK = static_cast<const Element*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
    const Element* gV = static_cast<const Element*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];

    int lo, hi;
    key_range(p, m0, lo, hi);
    const int n_first = lo / kBN;
    const int n_end = (hi + kBN - 1) / kBN;  // exclusive

    const float slope = Spec::kAlibi
                            ? (p.alibi_slopes ? p.alibi_slopes[h] : standard_alibi_slope(h, p.heads_q))
                            : 0.f;

    float acc_o[kAtoms][kDT][4];
    float row_m[kAtoms][2], row_l[kAtoms][2];
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int d = 0; d < kDT; ++d) acc_o[a][d][0] = acc_o[a][d][1] = acc_o[a][d][2] = acc_o[a][d][3] = 0.f;
      row_m[a][0] = row_m[a][1] = neg_inf();
      row_l[a][0] = row_l[a][1] = 0.f;
    }

    Plan plan{};
    if (kPairWindow && n_first < n_end) plan = plan_of(p, rt, m0, n_first);
    load_tile<kBM>(sQ, gQ, p.q_stride[2], m0, p.len_q);
    if (n_first < n_end) {
      load_tile<kBN>(sK, gK, p.k_stride[2], n_first * kBN, p.len_k, kPairWindow ? plan.need8 : 0xffffffffu);
      load_tile<kBN>(sV, gV, p.v_stride[2], n_first * kBN, p.len_k);
    }
    cp_async_commit();
    if constexpr (kRotate) {
      // Q is rotated once per query tile, to positions m0 + q_offset ... (the first step's
      // barrier publishes it).
      cp_async_wait<0>();
      __syncthreads();
      rotate_tile<Element, kNeox, kBM, kStride, kThreads>(sQ, m0 + (int)p.q_offset, rt);
    }

    // Tiles wholly inside every mask form one contiguous run [full_lo, full_hi); the boundary
    // tiles before and after it take the per-cell mask checks.
    int full_lo = n_first;
    while (full_lo < n_end && !tile_inside(p, m0, full_lo * kBN)) ++full_lo;
    int full_hi = full_lo;
    while (full_hi < n_end && tile_inside(p, m0, full_hi * kBN)) ++full_hi;
    for (int nb = n_first; nb < n_end;) {
      if (nb == full_lo) {
        for (; nb < full_hi; ++nb) {
          // rope_window: tiles far from the diagonal drop whole groups of high-frequency pairs;
          // each level is its own straight-line instantiation of the step.
          auto interior = [&](auto level) {
            step<false, decltype(level)::value>(p, rt, nb, n_first, n_end, sQ, sK, sV, gK, gV, m0, warp, lane, g, t, b,
                                                h, slope, plan, acc_o, row_m, row_l);
          };
          if (kPruneLevel > 0 && plan.level >= kPruneLevel) interior(Level<kPruneLevel>{});
          else interior(Level<0>{});
        }
        if (nb >= n_end) break;
      }
      step<true, 0>(p, rt, nb, n_first, n_end, sQ, sK, sV, gK, gV, m0, warp, lane, g, t, b, h, slope, plan, acc_o,
                    row_m, row_l);
      ++nb;
    }
    cp_async_wait<0>();

    // Epilogue: normalise, write O (and LSE); rows with no kept key give O = 0, LSE = -inf.
    Element* gO = static_cast<Element*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1];
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = m0 + warp * 16 * kAtoms + a * 16 + g + hf * 8;
        const float l = quad_sum(row_l[a][hf]);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        if (i < p.len_q) {
          u32* orow = reinterpret_cast<u32*>(gO + (af_i64)i * p.o_stride[2]);
#pragma unroll
          for (int d = 0; d < kDT; ++d)
            orow[d * 4 + t] = Traits::pack(acc_o[a][d][2 * hf] * inv, acc_o[a][d][2 * hf + 1] * inv);
          if (p.lse && t == 0) {
            float lse;
            if constexpr (Spec::kRelu) lse = l > 0.f ? logf(l) : neg_inf();
            else lse = l > 0.f ? row_m[a][hf] * kLn2 + logf(l) : neg_inf();
            p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i] = lse;
          }
        }
      }
    }
  }
};

}  // namespace attnfuse_kernels
