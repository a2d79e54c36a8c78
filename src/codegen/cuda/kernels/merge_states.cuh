// merge_states on the GPU: the log-sum-exp merge of partial attention results (O, LSE) computed
// over disjoint key sets, row by row, with the CPU's rules (include/attnfuse/merge_states.hpp):
//   m = max_k LSE_k,  w_k = e^{LSE_k - m},  s = Σ_k w_k,  O = Σ_k (w_k / s) O_k,  LSE = m + log s.
// A state whose row has LSE = -inf holds no key: its O row does not count (NaN there included). A
// row empty in every state gets O = 0 and LSE = -inf; a NaN LSE makes the row's O and LSE NaN.
// Every state may have its own dtype and strides (fp32 split partials merged into a bf16 output is
// the usual case), and the output may be one of the states (each lane reads its dims of every state
// before it writes them).
//
// One warp per row. Lane k reads state k's LSE, so a launch merges at most kMergeMaxStates states
// (runtime/merge_states_cuda.cpp merges more in two levels). The O rows are read in chunks of four
// elements per lane (one 16- or 8-byte load) when every row allows it (MergeStatesParams::vec),
// else one element per lane.
#pragma once

#include "params.cuh"
#include "primitives.cuh"

namespace attnfuse_kernels {

template <int kWarps = 4>
struct MergeStatesKernel {
  static constexpr int kPrefetch = 4;   // states whose first O chunk loads with the LSEs
  static constexpr int kMinBlocks = 1;  // resident blocks asked of ptxas (__launch_bounds__)

  static __device__ __forceinline__ void add4(float (&acc)[4], float w, const float (&v)[4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] += w * v[j];
  }
  static __device__ __forceinline__ af_i64 row_offset(const MergeState& s, af_i64 b, af_i64 h, af_i64 i) {
    return b * s.o_stride[0] + h * s.o_stride[1] + i * s.o_stride[2];
  }
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

  static __device__ void run(const MergeStatesParams& p) {
    __shared__ float weight[kWarps][kMergeMaxStates];
    grid_dependency_wait();  // launched in stream order today; a dependent launch would be safe
    allow_dependent_launch();
    const float ninf = __int_as_float(0xff800000u);
    const int lane = threadIdx.x & 31, wid = threadIdx.x / 32;
    const af_i64 row = (af_i64)blockIdx.x * kWarps + wid;
    if (row >= p.rows) return;
    const af_i64 i = row % p.len, bh = row / p.len, h = bh % p.heads, b = bh / p.heads;
    const int n = p.num_states;

    // Lane k holds state k's LSE; the row's maximum and sum are warp reductions. The first chunk of
    // the first kPrefetch states' O rows is loaded with it, so a row waits for one memory latency,
    // not two (an empty state's chunk is loaded too, and ignored: its values never reach O).
    float l = ninf;
    if (lane < n) {
      const MergeState& s = p.states[lane];
      l = s.lse[b * s.lse_stride[0] + h * s.lse_stride[1] + i * s.lse_stride[2]];
    }
    float pre[kPrefetch][4];
    const bool prefetch = p.vec && 4 * lane < p.dim;
#pragma unroll
    for (int k = 0; k < kPrefetch; ++k)
      if (prefetch && k < n) load4(p.states[k], row_offset(p.states[k], b, h, i) + 4 * lane, pre[k]);
    const bool nan = __ballot_sync(0xffffffffu, l != l) != 0;
    float m = l != l ? ninf : l;
#pragma unroll
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    // e^{LSE_k - m} <= 1 with one term exactly 1: the sum is in [1, n]. (m = +inf gives NaN
    // weights, as one big softmax would.)
    float w = lane < n ? expf(l - m) : 0.f;
    float sum = w;
#pragma unroll
    for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    // Empty states (-inf) are skipped rather than weighted by 0, so their O rows never count.
    const unsigned live = __ballot_sync(0xffffffffu, lane < n && l != ninf);
    weight[wid][lane] = w / sum;
    __syncwarp();

    const MergeState& out = p.out;
    const af_i64 base_out = row_offset(out, b, h, i);
    const bool empty = !nan && m == ninf;  // no state kept a key of this row
    if (p.vec) {
      // The first chunk, from the prefetched registers; then any further chunks (D > 128).
      for (int d = 4 * lane; d < p.dim; d += 128) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (nan || empty) {
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[j] = nan ? __int_as_float(0x7fc00000) : 0.f;
        } else {
          const int first_loaded = d == 4 * lane ? kPrefetch : 0;
          if (first_loaded)
#pragma unroll
            for (int k = 0; k < kPrefetch; ++k)
              if (k < n && ((live >> k) & 1u)) add4(acc, weight[wid][k], pre[k]);
          for (int k = first_loaded; k < n; ++k) {
            if (!((live >> k) & 1u)) continue;
            float v[4];
            load4(p.states[k], row_offset(p.states[k], b, h, i) + d, v);
            add4(acc, weight[wid][k], v);
          }
        }
        store4(out, base_out + d, acc);
      }
    } else {
      for (int d = lane; d < p.dim; d += 32) {
        float acc = nan ? __int_as_float(0x7fc00000) : 0.f;
        if (!nan && !empty)
          for (int k = 0; k < n; ++k) {
            if (!((live >> k) & 1u)) continue;
            const MergeState& s = p.states[k];
            acc += weight[wid][k] * load1(s, row_offset(s, b, h, i) + d);
          }
        store1(out, base_out + d, acc);
      }
    }
    if (lane == 0)
      out.lse[b * out.lse_stride[0] + h * out.lse_stride[1] + i * out.lse_stride[2]] =
          nan ? __int_as_float(0x7fc00000) : empty ? ninf : m + logf(sum);
  }
};

}  // namespace attnfuse_kernels
