// Running a compiled program: the tensors of one call, their validation, and the backends.
#pragma once

#include <cstdint>
#include <optional>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse {

// Document boundaries of sequences packed along the sequence axis (FlashAttention's varlen
// cu_seqlens): offsets [0, e_0, e_1, ..., N], num_docs + 1 of them, non-decreasing, the last one
// the sequence length. Document d holds rows [offsets[d], offsets[d+1]); empty documents are
// allowed. One row of offsets shared by every batch entry ([num_docs + 1]), or one row per batch
// entry ([B, num_docs + 1]); int32 or int64.
struct SeqOffsetsView {
  enum class Type { I32, I64 };
  const void* data = nullptr;
  Type type = Type::I32;
  int64_t batch = 1;         // 1: shared by every batch entry; else B
  int64_t length = 0;        // num_docs + 1
  int64_t batch_stride = 0;  // elements between the rows of two batch entries

  static SeqOffsetsView contiguous(const int32_t* data, int64_t length, int64_t batch = 1) {
    return {data, Type::I32, batch, length, length};
  }
  static SeqOffsetsView contiguous(const int64_t* data, int64_t length, int64_t batch = 1) {
    return {data, Type::I64, batch, length, length};
  }
  // Offset d of batch entry b (row 0 for every b when the offsets are shared).
  int64_t at(int64_t b, int64_t d) const {
    const int64_t i = (batch == 1 ? 0 : b) * batch_stride + d;
    return type == Type::I32 ? static_cast<const int32_t*>(data)[i] : static_cast<const int64_t*>(data)[i];
  }
};

// One attention call. Q [B,Hq,Nq,D], K [B,Hkv,Nk,D], V [B,Hkv,Nk,Dv], out [B,Hq,Nq,Dv].
struct AttentionArgs {
  TensorView q, k, v, out;
  std::optional<LseView> lse;      // [B,Hq,Nq] fp32, natural log; -inf for fully masked rows
  std::optional<TensorView> bias;  // additive_bias: [1|B, 1|Hq, Nq, Nk] (shape 1 broadcasts)
  const BlockMask* block_mask = nullptr;  // block_sparse
  std::optional<int64_t> q_offset;  // position of query 0; default Nk - Nq (bottom-right)
  // document: the documents of the queries and of the keys, document d of one pairing with
  // document d of the other (so both hold num_docs + 1 offsets, ending at Nq resp. Nk).
  // Positions restart in each document, and each document is aligned bottom-right on its own
  // (FlashAttention varlen): query t of a document with Lq queries and Lk keys has position
  // t + Lk - Lq, key u has position u. Δ, causal, sliding_window, alibi, rope and rope_window
  // all read these positions; an explicit q_offset is refused (Error(Unsupported)).
  std::optional<SeqOffsetsView> cu_seqlens_q, cu_seqlens_k;

  int64_t resolved_q_offset() const { return q_offset ? *q_offset : k.shape[2] - q.shape[2]; }
};

// Checks shapes, dtypes, strides and run-time tensors against the spec; throws Error
// (Shape / DType / MissingTensor / Unsupported) and never touches the outputs.
void validate(const KernelSpec& spec, const AttentionArgs& args);

// The fused CPU backend (validates first).
void run_cpu(const KernelSpec& spec, const AttentionArgs& args);

}  // namespace attnfuse
