// The split-KV combine kernel (flash decoding's second step): each split of the key axis left a
// normalised partial output O_s and its log-sum-exp L_s per row; the row's result is
//   O = Σ_s w_s O_s / Σ_s w_s,  w_s = exp(L_s - max L),  L = max L + log Σ_s w_s,
// the same LSE-weighted merge as merge_states (include/attnfuse/merge_states.hpp). Splits that
// saw no kept key carry L_s = -inf and weigh nothing; a row with none at all gets O = 0,
// L = -inf, as the single-pass kernel writes. ReLU attention stores L_s = log(kept count), so the
// same weights merge it too.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

template <class Element, int kDv>
struct CombineKernel {
  static constexpr int kPerLane = (kDv + 31) / 32;  // dims per lane (2, 3, 4 or 8)

  static __device__ void run(const CombineParams& p) {
    const int lane = threadIdx.x & 31;
    const af_i64 row = (af_i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= p.rows) return;
    const int i = (int)(row % p.len_q);
    const af_i64 bh = row / p.len_q;
    const int h = (int)(bh % p.heads_q);
    const af_i64 b = bh / p.heads_q;

    // Pass 1: the largest LSE (lanes stride over the splits, then a warp max).
    float m = __int_as_float(0xff800000u);
    for (int s = lane; s < p.num_splits; s += 32) m = fmaxf(m, p.part_lse[s * p.rows + row]);
#pragma unroll
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));

    float acc[kPerLane];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) acc[k] = 0.f;
    float sum = 0.f;
    if (m != __int_as_float(0xff800000u)) {
      for (int s = 0; s < p.num_splits; ++s) {
        const float l = p.part_lse[s * p.rows + row];
        if (l == __int_as_float(0xff800000u)) continue;
        const float w = __expf(l - m);
        sum += w;
        const float* src = p.part_o + (s * p.rows + row) * kDv;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k)
          if (lane + 32 * k < kDv) acc[k] += w * src[lane + 32 * k];
      }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    Element* dst = static_cast<Element*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1] + (af_i64)i * p.o_stride[2];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k < kDv) dst[lane + 32 * k].bits = (u16)(ElementTraits<Element>::pack(acc[k] * inv, 0.f) & 0xffffu);
    if (p.lse && lane == 0)
      p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i] = sum > 0.f ? m + logf(sum) : __int_as_float(0xff800000u);
  }
};

}  // namespace attnfuse_kernels
