// merge_states on the GPU: the log-sum-exp merge of partial attention results (O, LSE) computed
// over disjoint key sets, row by row, with the CPU's rules (include/attnfuse/merge_states.hpp):
//   O = Σ_k e^{LSE_k - m} O_k / s,  s = Σ_k e^{LSE_k - m},  LSE = m + log s,  m = max_k LSE_k.
// A state whose row has LSE = -inf holds no key: its O row does not count (NaN there included). A
// row empty in every state gets O = 0 and LSE = -inf; a NaN LSE makes the row's O and LSE NaN.
// Every state may have its own dtype and strides (fp32 split partials merged into a bf16 output is
// the usual case), and the output may be one of the states.
//
// Elementwise: each thread merges one chunk of one row (sixteen, eight or four elements, 16- or
// 8-byte loads, where every row allows it: MergeStatesParams::vec; else one element) and reads the
// row's LSEs itself (the row's threads read the same words: one transaction per warp). What a
// thread does once (its indices, the LSE loads, the weights) is paid per chunk, so the widest chunk
// does the least of it per byte; the index splits are multiply-highs (MergeDiv), not divisions.
// The states go in batches of kBatch whose loads are all issued before any is used, merged into a
// running maximum, sum and accumulator, so a row waits for one memory latency per batch (one for a
// cascade's two parts). A block holds whole rows, and writes their LSEs after a barrier: when out is
// one of the states, every thread of the row has read that LSE by then.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

template <int kThreads = 256>
struct MergeStatesKernel {
  static constexpr int kBatch = 2;      // states whose loads go out together
  static constexpr int kMinBlocks = 1;  // resident blocks asked of ptxas (__launch_bounds__)

  static __device__ __forceinline__ float half_to_float(int dtype, u16 h) {
    return dtype == kMergeBF16 ? ElementTraits<bf16_t>::to_float(h) : ElementTraits<f16_t>::to_float(h);
  }
  static __device__ __forceinline__ u32 pack2(int dtype, float lo, float hi) {
    return dtype == kMergeBF16 ? ElementTraits<bf16_t>::pack(lo, hi) : ElementTraits<f16_t>::pack(lo, hi);
  }
  // kW elements at `off` of state s as floats: one element, or aligned 8-byte (kW = 4) or 16-byte
  // loads.
  template <int kW>
  static __device__ __forceinline__ void load(const MergeState& s, af_i64 off, float (&v)[kW]) {
    if (s.dtype == kMergeF32) {
      const float* src = static_cast<const float*>(s.o) + off;
      if constexpr (kW == 1) {
        v[0] = *src;
      } else {
#pragma unroll
        for (int q = 0; q < kW / 4; ++q) {
          const float4 x = reinterpret_cast<const float4*>(src)[q];
          v[4 * q] = x.x, v[4 * q + 1] = x.y, v[4 * q + 2] = x.z, v[4 * q + 3] = x.w;
        }
      }
      return;
    }
    const u16* src = static_cast<const u16*>(s.o) + off;
    if constexpr (kW == 1) {
      v[0] = half_to_float(s.dtype, *src);
    } else {
      u32 w[kW / 2];
      if constexpr (kW == 4) {
        const uint2 x = *reinterpret_cast<const uint2*>(src);
        w[0] = x.x, w[1] = x.y;
      } else {
#pragma unroll
        for (int q = 0; q < kW / 8; ++q) {
          const uint4 x = reinterpret_cast<const uint4*>(src)[q];
          w[4 * q] = x.x, w[4 * q + 1] = x.y, w[4 * q + 2] = x.z, w[4 * q + 3] = x.w;
        }
      }
#pragma unroll
      for (int q = 0; q < kW / 2; ++q) {
        v[2 * q] = half_to_float(s.dtype, (u16)(w[q] & 0xffffu));
        v[2 * q + 1] = half_to_float(s.dtype, (u16)(w[q] >> 16));
      }
    }
  }
  // kW (8 or 16) 16-bit elements at `off` of state s as loaded, two to a word (16-byte loads).
  template <int kW>
  static __device__ __forceinline__ void load_words(const MergeState& s, af_i64 off, u32 (&w)[kW / 2]) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const u16*>(s.o) + off);
#pragma unroll
    for (int q = 0; q < kW / 8; ++q) {
      const uint4 x = src[q];
      w[4 * q] = x.x, w[4 * q + 1] = x.y, w[4 * q + 2] = x.z, w[4 * q + 3] = x.w;
    }
  }
  template <int kW>
  static __device__ __forceinline__ void store(const MergeState& s, af_i64 off, const float (&v)[kW]) {
    if (s.dtype == kMergeF32) {
      float* dst = static_cast<float*>(s.o) + off;
      if constexpr (kW == 1) {
        *dst = v[0];
      } else {
#pragma unroll
        for (int q = 0; q < kW / 4; ++q)
          reinterpret_cast<float4*>(dst)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
      }
      return;
    }
    u16* dst = static_cast<u16*>(s.o) + off;
    if constexpr (kW == 1) {
      *dst = (u16)(pack2(s.dtype, v[0], 0.f) & 0xffffu);
    } else if constexpr (kW == 4) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(pack2(s.dtype, v[0], v[1]), pack2(s.dtype, v[2], v[3]));
    } else {
#pragma unroll
      for (int q = 0; q < kW / 8; ++q) {
        const float* u = v + 8 * q;
        reinterpret_cast<uint4*>(dst)[q] = make_uint4(pack2(s.dtype, u[0], u[1]), pack2(s.dtype, u[2], u[3]),
                                                      pack2(s.dtype, u[4], u[5]), pack2(s.dtype, u[6], u[7]));
      }
    }
  }
  static __device__ __forceinline__ af_i64 o_offset(const MergeState& s, unsigned b, unsigned h, unsigned i) {
    return b * s.o_stride[0] + h * s.o_stride[1] + i * s.o_stride[2];
  }
  static __device__ __forceinline__ af_i64 lse_offset(const MergeState& s, unsigned b, unsigned h, unsigned i) {
    return b * s.lse_stride[0] + h * s.lse_stride[1] + i * s.lse_stride[2];
  }

  // The row's merged LSE terms, and its chunks of kW elements at d, d + stride, ... (one pass with
  // no chunk when the head dim is 0). m, sum and nan describe the row when it returns. kHalf: every
  // state is bf16 or fp16 (kW 8 or 16), so a state's chunk stays as its kW / 2 loaded words until
  // it is weighted, not kW floats: 62 registers instead of 76 at kW = 16 on sm_90, four blocks
  // per SM instead of three (an entry of its own, taken unless ATTNFUSE_CUDA_MERGE_HALF=0: the
  // H200's cascade prefill merge 66 -> 51 us, bench/results/2026-12-07-h200-session57/call1/).
  template <int kW, bool kHalf = false>
  static __device__ __forceinline__ void merge_row(const MergeStatesParams& p, unsigned b, unsigned h, unsigned i,
                                                   int d, int stride, float& m, float& sum, bool& nan) {
    const float ninf = __int_as_float(0xff800000u), qnan = __int_as_float(0x7fc00000);
    const int n = p.num_states;
    for (;; d += stride) {
      const bool has_o = d < p.dim;
      float acc[kW];
#pragma unroll
      for (int e = 0; e < kW; ++e) acc[e] = 0.f;
      m = ninf, sum = 0.f, nan = false;
      for (int k0 = 0; k0 < n; k0 += kBatch) {
        float l[kBatch], v[kHalf ? 1 : kBatch][kHalf ? 1 : kW];
        u32 raw[kHalf ? kBatch : 1][kHalf ? kW / 2 : 1];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          l[j] = ninf;
          if constexpr (kHalf) {
#pragma unroll
            for (int e = 0; e < kW / 2; ++e) raw[j][e] = 0u;
          } else {
#pragma unroll
            for (int e = 0; e < kW; ++e) v[j][e] = 0.f;
          }
          if (k0 + j < n) {
            const MergeState& s = p.states[k0 + j];
            l[j] = s.lse[lse_offset(s, b, h, i)];
            if (has_o) {
              if constexpr (kHalf) load_words<kW>(s, o_offset(s, b, h, i) + d, raw[j]);
              else load<kW>(s, o_offset(s, b, h, i) + d, v[j]);
            }
          }
        }
        // The batch joins the running maximum, rescaling what was summed so far; e^{LSE_k - m}
        // <= 1 keeps the sum in [1, n]. (m = +inf gives NaN weights, as one big softmax would.)
        float mb = m;
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          nan = nan || l[j] != l[j];
          if (l[j] == l[j]) mb = fmaxf(mb, l[j]);
        }
        if (mb != m) {
          const float scale = m == ninf ? 0.f : __expf(m - mb);
          sum *= scale;
#pragma unroll
          for (int e = 0; e < kW; ++e) acc[e] *= scale;
          m = mb;
        }
        // Empty states (-inf) are skipped rather than weighted by 0, so their O rows never count.
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          if (!(l[j] > ninf)) continue;  // -inf, NaN or past the last state
          const float w = __expf(l[j] - m);
          sum += w;
          if constexpr (kHalf) {
            const int dtype = p.states[k0 + j].dtype;
#pragma unroll
            for (int e = 0; e < kW; ++e)
              acc[e] += w * half_to_float(dtype, (u16)(e % 2 ? raw[j][e / 2] >> 16 : raw[j][e / 2] & 0xffffu));
          } else {
#pragma unroll
            for (int e = 0; e < kW; ++e) acc[e] += w * v[j][e];
          }
        }
      }
      if (!has_o) return;
      const bool empty = !nan && m == ninf;  // no state kept a key of this row
      const float inv = 1.f / sum;
#pragma unroll
      for (int e = 0; e < kW; ++e) acc[e] = nan ? qnan : empty ? 0.f : acc[e] * inv;
      store<kW>(p.out, o_offset(p.out, b, h, i) + d, acc);
      if (d + stride >= p.dim) return;
    }
  }

  static __device__ __forceinline__ unsigned divide(unsigned n, MergeDiv d) {
    return (__umulhi(n, d.mul) + n) >> d.shift;
  }

  // One entry per chunk width kW = the elements of p.vec's chunk (16, 8, 4 or 1), and one for
  // chunks of 16 over 16-bit states only (kHalf).
  template <int kW, bool kHalf = false>
  static __device__ void run(const MergeStatesParams& p) {
    static_assert(!kHalf || kW == 8 || kW == 16, "16-bit words are loaded 16 bytes at a time");
    grid_dependency_wait();  // a programmatic dependent: nothing is read before this
    allow_dependent_launch();
    const float ninf = __int_as_float(0xff800000u), qnan = __int_as_float(0x7fc00000);
    const unsigned t = threadIdx.x, r = divide(t, p.chunks_div), c = t - r * (unsigned)p.chunks;
    const unsigned row = blockIdx.x * (unsigned)p.rows_per_block + r;
    const bool active = r < (unsigned)p.rows_per_block && row < (unsigned)p.rows;
    const unsigned bh = active ? divide(row, p.len_div) : 0u, i = active ? row - bh * (unsigned)p.len : 0u;
    const unsigned b = divide(bh, p.heads_div), h = bh - b * (unsigned)p.heads;
    float m = ninf, sum = 0.f;
    bool nan = false;
    if (active) merge_row<kW, kHalf>(p, b, h, i, (int)c * kW, p.chunks * kW, m, sum, nan);
    // Every thread of the block's rows has read their LSEs (out may be one of the states).
    __syncthreads();
    if (active && c == 0)
      p.out.lse[lse_offset(p.out, b, h, i)] = nan ? qnan : m == ninf ? ninf : m + logf(sum);
  }
};

}  // namespace attnfuse_kernels
