// The launch parameters of the fused forward kernel: one plain struct shared verbatim by the
// host runtime (C++) and the device code (NVRTC), so both sides agree on every offset.
#pragma once

#ifdef __CUDACC_RTC__
typedef long long af_i64;
#else
#include <cstdint>
typedef long long af_i64;
#endif

namespace attnfuse_kernels {

// Strides are in elements; the last dimension of every tensor is contiguous.
struct FwdParams {
  const void* q;  // [B, Hq, Nq, D]
  const void* k;  // [B, Hkv, Nk, D]
  const void* v;  // [B, Hkv, Nk, Dv]
  void* o;        // [B, Hq, Nq, Dv]
  float* lse;     // [B, Hq, Nq] or null
  const float* bias;          // additive_bias: [1|B, 1|Hq, Nq, Nk] fp32, or null
  const float* alibi_slopes;  // custom ALiBi slopes per query head, or null (standard)

  af_i64 q_stride[3];  // batch, head, row
  af_i64 k_stride[3];
  af_i64 v_stride[3];
  af_i64 o_stride[3];
  af_i64 lse_stride[2];   // batch, head
  af_i64 bias_stride[3];  // batch, head, row (0 where broadcast)

  int batch, heads_q, heads_kv, len_q, len_k;
  int head_ratio;      // heads_q / heads_kv
  af_i64 q_offset;     // position of query 0 (bottom-right default: len_k - len_q)

  float scale;         // score scale (1/sqrt(D) unless the program says otherwise)
  float scale_log2;    // scale * log2(e): folded into exp2 when no modifier follows the dot
  float softcap;       // softcap c
  float inv_softcap;   // 1 / c
  int window;          // sliding_window w: keep |delta| < w
};

}  // namespace attnfuse_kernels
