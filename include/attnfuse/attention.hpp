// Running a compiled program: the tensors of one call, their validation, and the backends.
#pragma once

#include <cstdint>
#include <optional>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/kernel_spec.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse {

// One attention call. Q [B,Hq,Nq,D], K [B,Hkv,Nk,D], V [B,Hkv,Nk,Dv], out [B,Hq,Nq,Dv].
struct AttentionArgs {
  TensorView q, k, v, out;
  std::optional<LseView> lse;      // [B,Hq,Nq] fp32, natural log; -inf for fully masked rows
  std::optional<TensorView> bias;  // additive_bias: [1|B, 1|Hq, Nq, Nk] (shape 1 broadcasts)
  const BlockMask* block_mask = nullptr;  // block_sparse
  std::optional<int64_t> q_offset;  // position of query 0; default Nk - Nq (bottom-right)

  int64_t resolved_q_offset() const { return q_offset ? *q_offset : k.shape[2] - q.shape[2]; }
};

// Checks shapes, dtypes, strides and run-time tensors against the spec; throws Error
// (Shape / DType / MissingTensor / Unsupported) and never touches the outputs.
void validate(const KernelSpec& spec, const AttentionArgs& args);

// The fused CPU backend (validates first).
void run_cpu(const KernelSpec& spec, const AttentionArgs& args);

}  // namespace attnfuse
