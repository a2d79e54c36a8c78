// The split-KV combine kernel (flash decoding's second step): each split of the key axis left a
// normalised partial output O_s and its log-sum-exp L_s per row; the row's result is
//   O = Σ_s w_s O_s / Σ_s w_s,  w_s = exp(L_s - max L),  L = max L + log Σ_s w_s,
// the same LSE-weighted merge as merge_states (include/attnfuse/merge_states.hpp). Splits that
// saw no kept key carry L_s = -inf and weigh nothing; a row with none at all gets O = 0,
// L = -inf, as the single-pass kernel writes. ReLU attention stores L_s = log(kept count), so the
// same weights merge it too.
//
// The decode variant merges in its own kernel instead (BlockMerge::parts, block_merge.cuh): the block that
// finishes its tile's split last merges every split's rows with the same SplitMerge::row.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

// One warp merges one output row (b, h, i) from the splits' partial rows: `row` indexes the
// [rows] axis of part_o / part_lse, `weight` is the warp's kMaxSplits floats of shared memory, dst
// the row of O, lse its LSE (or null). Used by the combine kernel and by the forward kernel's last
// split block (BlockMerge::parts, block_merge.cuh). The partial rows were written by other blocks of the
// same grid in the second case, so they are read through L2 (ld.global.cg), never a stale L1 line.
template <class Element, int kDv>
struct SplitMerge {
  static_assert(kDv % 4 == 0, "partial rows are read in 16-byte chunks");
  static constexpr int kChunks = kDv / 4;                // 16-byte chunks (4 dims) of a row
  static constexpr int kPerLane = (kChunks + 31) / 32;    // chunks per lane (1, or 2 at D = 256)
  static constexpr int kMaxSplits = 128;                 // passes::kMaxSplits
  static constexpr int kLsePerLane = kMaxSplits / 32;
  static constexpr int kUnroll = 8;  // splits whose rows load at once

  // The kUnroll partial rows of splits s0, s0 + 1, ... (past the last split: split s0 again), a
  // 16-byte load per chunk: lane c holds dims 4c .. 4c + 3 (and 4c + 128 .. at D = 256).
  static __device__ __forceinline__ void load_rows(const float* part_o, int num_splits, af_i64 rows, af_i64 row,
                                                   int lane, int s0, float4 (&v)[kUnroll][kPerLane]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = s0 + u < num_splits ? s0 + u : s0;
      const float4* src = reinterpret_cast<const float4*>(part_o + (s * rows + row) * kDv);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        v[u][k] = lane + 32 * k < kChunks ? __ldcg(src + lane + 32 * k) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }

  static __device__ void row(const float* part_o, const float* part_lse, int num_splits, af_i64 rows, af_i64 row,
                             float* weight, int lane, Element* dst, float* lse) {
    const af_i64 r[1] = {row};
    Element* const d[1] = {dst};
    float* const l[1] = {lse};
    rows_of_warp<1>(part_o, part_lse, num_splits, rows, r, weight, lane, d, l);
  }

  // kR rows at once (`weight`: kR x kMaxSplits floats): their loads go out together, so a warp
  // that merges two rows (Llama-3-70B's 8 heads per group on 4 warps) waits for the latencies of
  // one. A row with a null dst is not written (pass a valid row index for it all the same). The
  // arithmetic of each row is row()'s, in the same order, so both give the same bits.
  template <int kR>
  static __device__ void rows_of_warp(const float* part_o, const float* part_lse, int num_splits, af_i64 rows,
                                      const af_i64 (&row)[kR], float* weight, int lane, Element* const (&dst)[kR],
                                      float* const (&lse)[kR]) {
    const float ninf = __int_as_float(0xff800000u);
    __syncwarp();  // the warp's previous rows are done with `weight`
    // Every load is independent of the weights, so the LSEs (lanes over the splits, once each)
    // and the first kUnroll rows go out together: the merge waits for two or three memory
    // latencies, not one per pass (it is the tail of a split decode call).
    float4 v[kR][kUnroll][kPerLane];
    float l[kR][kLsePerLane];
#pragma unroll
    for (int j = 0; j < kR; ++j) {
      load_rows(part_o, num_splits, rows, row[j], lane, 0, v[j]);
#pragma unroll
      for (int q = 0; q < kLsePerLane; ++q) {
        const int s = lane + 32 * q;
        l[j][q] = s < num_splits ? __ldcg(part_lse + s * rows + row[j]) : ninf;
      }
    }
    // The weights: the largest LSE, then exp(L_s - max) normalised by their sum (one warp
    // reduction each), parked in shared memory for the row pass.
    float m[kR], sum[kR];
#pragma unroll
    for (int j = 0; j < kR; ++j) {
      m[j] = ninf;
#pragma unroll
      for (int q = 0; q < kLsePerLane; ++q) m[j] = fmaxf(m[j], l[j][q]);
#pragma unroll
      for (int o = 16; o; o >>= 1) m[j] = fmaxf(m[j], __shfl_xor_sync(0xffffffffu, m[j], o));
      sum[j] = 0.f;
#pragma unroll
      for (int q = 0; q < kLsePerLane; ++q) {
        const int s = lane + 32 * q;
        const float w = (m[j] == ninf || l[j][q] == ninf) ? 0.f : __expf(l[j][q] - m[j]);
        if (s < num_splits) weight[j * kMaxSplits + s] = w;
        sum[j] += w;
      }
#pragma unroll
      for (int o = 16; o; o >>= 1) sum[j] += __shfl_xor_sync(0xffffffffu, sum[j], o);
    }
    __syncwarp();

    // The row pass, kUnroll splits at a time, in split order.
    float4 acc[kR][kPerLane];
#pragma unroll
    for (int j = 0; j < kR; ++j)
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) acc[j][k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < num_splits; s0 += kUnroll) {
      if (s0 > 0)
#pragma unroll
        for (int j = 0; j < kR; ++j)
          if (sum[j] > 0.f) load_rows(part_o, num_splits, rows, row[j], lane, s0, v[j]);
#pragma unroll
      for (int j = 0; j < kR; ++j) {
        if (!(sum[j] > 0.f)) continue;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const float w = s0 + u < num_splits ? weight[j * kMaxSplits + s0 + u] : 0.f;
          if (w == 0.f) continue;  // an empty split's row holds zeros, but skip it anyway
#pragma unroll
          for (int k = 0; k < kPerLane; ++k) {
            acc[j][k].x += w * v[j][u][k].x;
            acc[j][k].y += w * v[j][u][k].y;
            acc[j][k].z += w * v[j][u][k].z;
            acc[j][k].w += w * v[j][u][k].w;
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kR; ++j) {
      if (!dst[j]) continue;
      const float inv = sum[j] > 0.f ? 1.f / sum[j] : 0.f;
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        if (lane + 32 * k < kChunks) {  // O rows are 4-byte aligned: two 32-bit stores of two dims
          u32* out = reinterpret_cast<u32*>(dst[j] + 4 * (lane + 32 * k));
          out[0] = ElementTraits<Element>::pack(acc[j][k].x * inv, acc[j][k].y * inv);
          out[1] = ElementTraits<Element>::pack(acc[j][k].z * inv, acc[j][k].w * inv);
        }
      if (lse[j] && lane == 0) *lse[j] = sum[j] > 0.f ? m[j] + logf(sum[j]) : ninf;
    }
  }
};

// The combine kernel: one warp per output row, kWarps rows per block.
template <class Element, int kDv>
struct CombineKernel {
  static constexpr int kWarps = 4;  // rows per block (kCombineThreads / 32)

  static __device__ void run(const CombineParams& p) {
    using Merge = SplitMerge<Element, kDv>;
    __shared__ float weight[kWarps][Merge::kMaxSplits];
    grid_dependency_wait();  // the forward kernel's partials
    allow_dependent_launch();
    const int lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const af_i64 row = (af_i64)blockIdx.x * kWarps + wid;
    if (row >= p.rows) return;
    const int i = (int)(row % p.len_q);
    const af_i64 bh = row / p.len_q;
    const int h = (int)(bh % p.heads_q);
    const af_i64 b = bh / p.heads_q;
    Element* dst = static_cast<Element*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1] + (af_i64)i * p.o_stride[2];
    float* lse = p.lse ? p.lse + b * p.lse_stride[0] + h * p.lse_stride[1] + i : nullptr;
    Merge::row(p.part_o, p.part_lse, p.num_splits, p.rows, row, weight[wid], lane, dst, lse);
  }
};

}  // namespace attnfuse_kernels
