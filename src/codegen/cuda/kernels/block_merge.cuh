// The forward kernel's merges inside one launch (FwdKernel<Spec>::Merge): the narrow decode
// tile's key warps, which each saw a slice of every key tile, merged through shared memory; and
// the parts of a tile that other blocks computed (split-KV in the decode variant, cut block-sparse
// rows), merged into O by the block that finishes last, with the combine kernel's rule
// (combine.cuh, SplitMerge).
#pragma once

#include "combine.cuh"
#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

template <class Kernel>
struct BlockMerge {
  using Spec = typename Kernel::SpecType;
  using Element = typename Kernel::Element;
  using W = typename Kernel::W;
  static constexpr int kD = Kernel::kD, kBM = Kernel::kBM, kDT = Kernel::kDT, kAtoms = Kernel::kAtoms;
  static constexpr int kWarps = Kernel::kWarps, kRowWarps = Kernel::kRowWarps, kKeyWarps = Kernel::kKeyWarps;
  static constexpr int kStages = Kernel::kStages, kKVTile = Kernel::kKVTile;

  // Narrow decode tile: merge the kKeyWarps warps' softmax states of the same rows (each saw
  // its own slice of every key tile) through shared memory `scratch` (the K/V stages, free once
  // the loop is done). Every warp then holds the merged m and l of its rows and the merged
  // accumulator of one slice of D (dims tiles kDSlice * kw ..., kw its key slice), which it writes
  // itself (write_rows): the merge is spread over the warps instead of left to one, and rows past
  // the tile's real ones (a decode tile holds a GQA group x Nq of its 16) are neither staged nor
  // merged. row_l arrives summed over the quad.
  static constexpr int kMergeBytes = kKeyWarps * kBM * (2 + kD) * 4;
  static __device__ __forceinline__ void key_warps(char* scratch, const W& w, int warp_id, int g, int t,
                                                   float (&acc_o)[kAtoms][kDT][4], float (&row_m)[kAtoms][2],
                                                   float (&row_l)[kAtoms][2]) {
    const int rw = warp_id % kRowWarps, kw = warp_id / kRowWarps;  // the warp's rows and key slice
    float* sm = reinterpret_cast<float*>(scratch);
    float* sl = sm + kKeyWarps * kBM;
    float* so = sl + kKeyWarps * kBM;
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = Kernel::acc_row(w, rw, a, g, hf);
        if (r >= w.rows) continue;
        const int row = r - w.m0;  // of the tile
        if (t == 0) {
          sm[kw * kBM + row] = row_m[a][hf];
          sl[kw * kBM + row] = row_l[a][hf];
        }
        float2* orow = reinterpret_cast<float2*>(so + (kw * kBM + row) * kD);
#pragma unroll
        for (int d = 0; d < kDT; ++d) orow[d * 4 + t] = make_float2(acc_o[a][d][2 * hf], acc_o[a][d][2 * hf + 1]);
      }
    __syncthreads();
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = Kernel::acc_row(w, rw, a, g, hf);
        if (r >= w.rows) continue;
        const int row = r - w.m0;  // of the tile
        float m = neg_inf();
#pragma unroll
        for (int k = 0; k < kKeyWarps; ++k) m = fmaxf(m, sm[k * kBM + row]);
        const float m_use = m == neg_inf() ? 0.f : m;
        float l = 0.f, scale[kKeyWarps];
#pragma unroll
        for (int k = 0; k < kKeyWarps; ++k) {
          // ReLU keeps plain sums; softmax rescales each warp's state to the common maximum.
          scale[k] = Spec::kRelu ? 1.f : fast_exp2(sm[k * kBM + row] - m_use);
          l += scale[k] * sl[k * kBM + row];
        }
        row_m[a][hf] = m;
        row_l[a][hf] = l;
#pragma unroll
        for (int d = 0; d < kDT; ++d) {
          if (!Kernel::in_slice(d, kw)) continue;
          float x = 0.f, y = 0.f;
#pragma unroll
          for (int k = 0; k < kKeyWarps; ++k) {
            const float2 v = reinterpret_cast<const float2*>(so + (k * kBM + row) * kD)[d * 4 + t];
            x += scale[k] * v.x;
            y += scale[k] * v.y;
          }
          acc_o[a][d][2 * hf] = x;
          acc_o[a][d][2 * hf + 1] = y;
        }
      }
  }

  // Parts of a tile merged in the kernel: split-KV in the decode variant (FwdParams::merge_count)
  // and the cut rows of a block-sparse work list. Every block counts its finished part on its
  // tile's counter, and the block that counts last merges all S parts' partial rows of the tile
  // into O (SplitMerge::row, the combine kernel's rule), then resets the counter for the next
  // call on the stream. A decode call is then one launch: the combine kernel's launch, its
  // dependency gap and its tail of dependent loads are gone (Nsight put the combine kernel at
  // 12-16 us beside a 12-44 us decode kernel at B1 on the H200). Part s of virtual row r is row
  // s * stride + index(r, i, h) of part_o / part_lse. `scratch` is the K/V stages, free once the
  // loop is done.
  template <class RowIndex>
  static __device__ void parts(const FwdParams& p, const W& w, float* scratch, int* count, int S,
                               const float* part_o, const float* part_lse, af_i64 stride, RowIndex&& index) {
    using Rule = SplitMerge<Element, kD>;
    constexpr int kScratchBytes = 2 * kStages * kKVTile * (int)sizeof(Element);  // the K and V stages
    static_assert((1 + kWarps * Rule::kMaxSplits) * 4 <= kScratchBytes, "the merge scratch must fit the stages");
    int* last = reinterpret_cast<int*>(scratch);
    float* weight = scratch + 1;
    __syncthreads();  // every warp's partial rows are written, and the stages the scratch reuses are free
    if (threadIdx.x == 0) {
      // One acq_rel atomic orders the parts: the barrier above puts the whole block's partial
      // rows before its release, and the barrier below hands the last block's acquire (of every
      // earlier part's rows) to all its threads. It replaced a fence in every thread, a relaxed
      // count and a second fence: on the H200 8B B1 4k 0.0107 -> 0.0105 ms, B8 4k 1.010x, 70B B1
      // / 32k 1.004x, unsplit calls level (bench/results/2026-12-03-h200-session25/call3/).
      const int old = atomic_inc_acq_rel(count);
      const bool is_last = old == S - 1;
      if (is_last) *count = 0;  // every part has counted: nobody touches it again in this call
      *last = is_last;
    }
    __syncthreads();
    if (!*last) return;
    const int lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const int end = w.m0 + kBM < w.rows ? w.m0 + kBM : w.rows;
    // Row r of the tile: its partial rows' index, its O row and LSE (null past the tile's rows).
    const auto at = [&](int r, af_i64& idx, Element*& dst, float*& lse) {
      const bool real = r < end;
      int i, h;
      w.row_of(real ? r : w.m0, i, h);
      const af_i64 qi = w.q_row0 + i;
      idx = index(real ? r : w.m0, i, h);
      dst = real ? static_cast<Element*>(p.o) + w.b * p.o_stride[0] + h * p.o_stride[1] + qi * p.o_stride[2] : nullptr;
      lse = real && p.lse ? p.lse + w.b * p.lse_stride[0] + h * p.lse_stride[1] + qi : nullptr;
    };
    if (end - w.m0 > kWarps && end - w.m0 <= 2 * kWarps) {
      // Up to two rows per warp (Llama-3-70B's 8 heads per group on 4 warps): merged together,
      // waiting for one row's memory latencies instead of two rows' in turn. On the H200, 70B B1
      // / 32k 0.0408 -> 0.0405 ms, paged 0.0435 -> 0.0431 at pages of 64, the rest level
      // (bench/results/2026-12-03-h200-session19/call3/).
      static_assert((1 + kWarps * 2 * Rule::kMaxSplits) * 4 <= kScratchBytes, "the merge scratch must fit the stages");
      af_i64 idx[2];
      Element* dst[2];
      float* lse[2];
      at(w.m0 + wid, idx[0], dst[0], lse[0]);
      at(w.m0 + wid + kWarps, idx[1], dst[1], lse[1]);
      Rule::template rows_of_warp<2>(part_o, part_lse, S, stride, idx, weight + wid * 2 * Rule::kMaxSplits, lane,
                                      dst, lse);
      return;
    }
    for (int r = w.m0 + wid; r < end; r += kWarps) {
      af_i64 idx;
      Element* dst;
      float* lse;
      at(r, idx, dst, lse);
      Rule::row(part_o, part_lse, S, stride, idx, weight + wid * Rule::kMaxSplits, lane, dst, lse);
    }
  }
};

}  // namespace attnfuse_kernels
