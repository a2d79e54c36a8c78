// merge_states on the GPU: the log-sum-exp merge of partial attention results (O, LSE) computed
// over disjoint key sets, row by row, with the CPU's rules (include/attnfuse/merge_states.hpp):
//   O = Σ_k e^{LSE_k - m} O_k / s,  s = Σ_k e^{LSE_k - m},  LSE = m + log s,  m = max_k LSE_k.
// A state whose row has LSE = -inf holds no key: its O row does not count (NaN there included). A
// row empty in every state gets O = 0 and LSE = -inf; a NaN LSE makes the row's O and LSE NaN.
// Every state may have its own dtype and strides (fp32 split partials merged into a bf16 output is
// the usual case), and the output may be one of the states.
//
// Elementwise: each thread merges one chunk of one row (four elements, one 16- or 8-byte load per
// state, where every row allows it: MergeStatesParams::vec; else one element) and reads the row's
// LSEs itself (the row's threads read the same words: one transaction per warp). The states go in
// batches of kBatch whose loads are all issued before any is used, merged into a running maximum,
// sum and accumulator, so a row waits for one memory latency per batch (one for a cascade's two
// parts). A block holds whole rows, and writes their LSEs after a barrier: when out is one of the
// states, every thread of the row has read that LSE by then.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

template <int kThreads = 256>
struct MergeStatesKernel {
  static constexpr int kBatch = 4;      // states whose loads go out together
  static constexpr int kMinBlocks = 1;  // resident blocks asked of ptxas (__launch_bounds__)

  static __device__ __forceinline__ float load1(const MergeState& s, af_i64 off) {
    if (s.dtype == kMergeF32) return static_cast<const float*>(s.o)[off];
    const u16 h = static_cast<const u16*>(s.o)[off];
    return s.dtype == kMergeBF16 ? ElementTraits<bf16_t>::to_float(h) : ElementTraits<f16_t>::to_float(h);
  }
  static __device__ __forceinline__ void load4(const MergeState& s, af_i64 off, float (&v)[4]) {
    if (s.dtype == kMergeF32) {
      const float4 x = *reinterpret_cast<const float4*>(static_cast<const float*>(s.o) + off);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
      return;
    }
    const uint2 x = *reinterpret_cast<const uint2*>(static_cast<const u16*>(s.o) + off);
    const u16 h[4] = {(u16)(x.x & 0xffffu), (u16)(x.x >> 16), (u16)(x.y & 0xffffu), (u16)(x.y >> 16)};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      v[j] = s.dtype == kMergeBF16 ? ElementTraits<bf16_t>::to_float(h[j]) : ElementTraits<f16_t>::to_float(h[j]);
  }
  static __device__ __forceinline__ u32 pack2(int dtype, float lo, float hi) {
    return dtype == kMergeBF16 ? ElementTraits<bf16_t>::pack(lo, hi) : ElementTraits<f16_t>::pack(lo, hi);
  }
  static __device__ __forceinline__ void store1(const MergeState& s, af_i64 off, float v) {
    if (s.dtype == kMergeF32) static_cast<float*>(s.o)[off] = v;
    else static_cast<u16*>(s.o)[off] = (u16)(pack2(s.dtype, v, 0.f) & 0xffffu);
  }
  static __device__ __forceinline__ void store4(const MergeState& s, af_i64 off, const float (&v)[4]) {
    if (s.dtype == kMergeF32) {
      *reinterpret_cast<float4*>(static_cast<float*>(s.o) + off) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
    *reinterpret_cast<uint2*>(static_cast<u16*>(s.o) + off) =
        make_uint2(pack2(s.dtype, v[0], v[1]), pack2(s.dtype, v[2], v[3]));
  }
  static __device__ __forceinline__ af_i64 o_offset(const MergeState& s, unsigned b, unsigned h, unsigned i) {
    return b * s.o_stride[0] + h * s.o_stride[1] + i * s.o_stride[2];
  }
  static __device__ __forceinline__ af_i64 lse_offset(const MergeState& s, unsigned b, unsigned h, unsigned i) {
    return b * s.lse_stride[0] + h * s.lse_stride[1] + i * s.lse_stride[2];
  }

  static __device__ void run(const MergeStatesParams& p) {
    grid_dependency_wait();  // launched in stream order today; a dependent launch would be safe
    allow_dependent_launch();
    const float ninf = __int_as_float(0xff800000u), qnan = __int_as_float(0x7fc00000);
    const int t = threadIdx.x, r = t / p.chunks, c = t % p.chunks;
    const int row = blockIdx.x * p.rows_per_block + r;
    const bool active = r < p.rows_per_block && row < p.rows;
    const unsigned i = active ? (unsigned)row % (unsigned)p.len : 0u, bh = active ? (unsigned)row / (unsigned)p.len : 0u;
    const unsigned h = bh % (unsigned)p.heads, b = bh / (unsigned)p.heads;
    const int n = p.num_states, width = p.vec ? 4 : 1;
    float m = ninf, sum = 0.f;
    bool nan = false;
    // The thread's chunks of the row: one unless the row has more chunks than a block has threads;
    // at least one pass, for the LSE, when the head dim is 0.
    for (int d = c * width; active; d += p.chunks * width) {
      const bool has_o = d < p.dim;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      m = ninf, sum = 0.f, nan = false;
      for (int k0 = 0; k0 < n; k0 += kBatch) {
        float l[kBatch], v[kBatch][4];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          l[j] = ninf;
          v[j][0] = v[j][1] = v[j][2] = v[j][3] = 0.f;
          if (k0 + j < n) {
            const MergeState& s = p.states[k0 + j];
            l[j] = s.lse[lse_offset(s, b, h, i)];
            if (has_o && p.vec) load4(s, o_offset(s, b, h, i) + d, v[j]);
            else if (has_o) v[j][0] = load1(s, o_offset(s, b, h, i) + d);
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
          const float scale = m == ninf ? 0.f : expf(m - mb);
          sum *= scale;
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] *= scale;
          m = mb;
        }
        // Empty states (-inf) are skipped rather than weighted by 0, so their O rows never count.
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          if (!(l[j] > ninf)) continue;  // -inf, NaN or past the last state
          const float w = expf(l[j] - m);
          sum += w;
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] += w * v[j][e];
        }
      }
      if (!has_o) break;
      const bool empty = !nan && m == ninf;  // no state kept a key of this row
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] = nan ? qnan : empty ? 0.f : acc[e] / sum;
      if (p.vec) store4(p.out, o_offset(p.out, b, h, i) + d, acc);
      else store1(p.out, o_offset(p.out, b, h, i) + d, acc[0]);
      if (d + p.chunks * width >= p.dim) break;
    }
    // Every thread of the block's rows has read their LSEs (out may be one of the states).
    __syncthreads();
    if (active && c == 0)
      p.out.lse[lse_offset(p.out, b, h, i)] = nan ? qnan : m == ninf ? ninf : m + logf(sum);
  }
};

}  // namespace attnfuse_kernels
