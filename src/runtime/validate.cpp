// attnfuse::validate: checks one call's tensors against the spec before any kernel runs, so every
// user mistake becomes one typed Error with one actionable message and no output is touched.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <string>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/documents.hpp"
#include "common/paged.hpp"
#include "reference/reference.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

std::string dims(const std::array<int64_t, 4>& s) {
  return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]);
}

// Non-negative sizes, a contiguous last axis and data behind a non-empty view.
void check_view(const TensorView& t, const char* name) {
  for (int64_t s : t.shape)
    if (s < 0) fail(ErrorCode::Shape, fmt::format("{} has a negative dimension: {}", name, dims(t.shape)));
  if (t.shape[3] > 1 && t.strides[3] != 1)
    fail(ErrorCode::Shape,
         fmt::format("{}'s last dimension must be contiguous (stride 1) but has stride {}; make "
                     "it contiguous first",
                     name, t.strides[3]));
  if (t.numel() > 0 && t.data == nullptr)
    fail(ErrorCode::MissingTensor,
         fmt::format("{} {} has {} elements but no data pointer", name, dims(t.shape), t.numel()));
}

void check_dtypes(const KernelSpec& spec, const AttentionArgs& a) {
  const DType t = a.q.dtype;
  const std::pair<const TensorView*, const char*> others[] = {{&a.k, "K"}, {&a.v, "V"}, {&a.out, "out"}};
  for (const auto& [view, name] : others)
    if (view->dtype != t && !(a.paged && view != &a.out))  // paged: check_paged checks the pages
      fail(ErrorCode::DType, fmt::format("{} is {} but Q is {}: Q, K, V and out must share one dtype",
                                         name, dtype_name(view->dtype), dtype_name(t)));
  // The CPU kernel takes any input dtype at run time; a CUDA kernel is compiled for one.
  if (spec.target == Target::Cuda && spec.dtype != t)
    fail(ErrorCode::DType, fmt::format("the kernel was compiled for {} but the tensors are {}; "
                                       "compile the program for {}",
                                       dtype_name(spec.dtype), dtype_name(t), dtype_name(t)));
}

void check_outputs(const KernelSpec& spec, const AttentionArgs& a, int64_t Dv);

void check_shapes(const KernelSpec& spec, const AttentionArgs& a) {
  const auto &q = a.q.shape, &k = a.k.shape, &v = a.v.shape;
  const int64_t B = q[0], Hq = q[1], D = q[3], Hkv = k[1], Nk = k[2], Dv = v[3];
  if (k[0] != B || k[3] != D)
    fail(ErrorCode::Shape, fmt::format("K {} does not fit Q {}: K must be [B, Hkv, Nk, D] with Q's "
                                       "batch and head dim",
                                       dims(k), dims(q)));
  if (v[0] != B || v[1] != Hkv || v[2] != Nk)
    fail(ErrorCode::Shape, fmt::format("V {} does not fit K {}: V must be [B, Hkv, Nk, Dv] with K's "
                                       "batch, heads and length",
                                       dims(v), dims(k)));
  if (Hq > 0 && (Hkv == 0 || Hq % Hkv != 0))
    fail(ErrorCode::Shape,
         fmt::format("query heads (Hq={}) must be a multiple of key/value heads (Hkv={})", Hq, Hkv));
  check_outputs(spec, a, Dv);
}

void check_outputs(const KernelSpec& spec, const AttentionArgs& a, int64_t Dv) {
  const auto& q = a.q.shape;
  const int64_t B = q[0], Hq = q[1], Nq = q[2], D = q[3];
  const std::array<int64_t, 4> want{B, Hq, Nq, Dv};
  if (a.out.shape != want)
    fail(ErrorCode::Shape, fmt::format("out {} must be [B, Hq, Nq, Dv] = {}", dims(a.out.shape), dims(want)));
  if (spec.head_dim != 0 && spec.head_dim != D)
    fail(ErrorCode::Shape, fmt::format("the kernel was compiled for head dim {} but Q has head dim {}",
                                       spec.head_dim, D));
  if (a.lse) {
    const auto& s = a.lse->shape;
    if (s[0] != B || s[1] != Hq || s[2] != Nq)
      fail(ErrorCode::Shape, fmt::format("lse [{}, {}, {}] must be [B, Hq, Nq] = [{}, {}, {}]", s[0],
                                         s[1], s[2], B, Hq, Nq));
    if (B * Hq * Nq > 0 && a.lse->data == nullptr)
      fail(ErrorCode::MissingTensor, "lse was given without a data pointer");
  }
}

void check_bias(const KernelSpec& spec, const AttentionArgs& a) {
  if (!spec.needs_bias()) {
    if (a.bias)
      fail(ErrorCode::Unsupported, "a bias tensor was given but the program has no additive_bias; "
                                   "add additive_bias to the program or drop the bias");
    return;
  }
  if (!a.bias) fail(ErrorCode::MissingTensor, "the program uses additive_bias but no bias tensor was given");
  const TensorView& bias = *a.bias;
  check_view(bias, "bias");
  const int64_t B = a.q.shape[0], Hq = a.q.shape[1], Nq = a.q.shape[2], Nk = a.k.shape[2];
  const auto& s = bias.shape;
  if ((s[0] != 1 && s[0] != B) || (s[1] != 1 && s[1] != Hq) || s[2] != Nq || s[3] != Nk)
    fail(ErrorCode::Shape, fmt::format("bias {} must be [1|B, 1|Hq, Nq, Nk] = [1|{}, 1|{}, {}, {}]",
                                       dims(s), B, Hq, Nq, Nk));
  if (bias.dtype != DType::F32 && bias.dtype != a.q.dtype)
    fail(ErrorCode::DType, fmt::format("bias is {} but must be fp32 or the inputs' dtype ({})",
                                       dtype_name(bias.dtype), dtype_name(a.q.dtype)));
}

void check_block_mask(const KernelSpec& spec, const AttentionArgs& a) {
  const BlockMask* m = a.block_mask;
  if (!spec.needs_block_mask()) {
    if (m)
      fail(ErrorCode::Unsupported, "a BlockMask was given but the program has no block_sparse; add "
                                   "block_sparse to the program or drop the mask");
    return;
  }
  if (!m) fail(ErrorCode::MissingTensor, "the program uses block_sparse but no BlockMask was given");
  const int64_t B = a.q.shape[0], Hq = a.q.shape[1], Nq = a.q.shape[2], Nk = a.k.shape[2];
  if (m->q_len() != Nq || m->kv_len() != Nk)
    fail(ErrorCode::Shape, fmt::format("the BlockMask was built for lengths (q {}, kv {}) but the call "
                                       "has (q {}, kv {}); rebuild it for these lengths",
                                       m->q_len(), m->kv_len(), Nq, Nk));
  if ((m->batch() != 1 && m->batch() != B) || (m->heads() != 1 && m->heads() != Hq))
    fail(ErrorCode::Shape, fmt::format("the BlockMask has batch {} and heads {}; each must be 1 or the "
                                       "call's (batch {}, query heads {})",
                                       m->batch(), m->heads(), B, Hq));
}

void check_cu_seqlens(const KernelSpec& spec, const AttentionArgs& a, bool host) {
  if (!spec.needs_cu_seqlens()) {
    if (a.cu_seqlens_q || a.cu_seqlens_k)
      fail(ErrorCode::Unsupported, "document offsets (cu_seqlens) were given but the program has no "
                                   "document mask; add document to the program or drop them");
    return;
  }
  check_documents(a, host);
}

// Positions are 64-bit integers everywhere (query i at i + q_offset, Δ = query - key position,
// window and RoPE limits added to Δ): a given q_offset within ±2^62 keeps every such sum exact for
// any length memory can hold. (CUDA takes 32-bit positions and refuses more at launch.)
void check_q_offset(const AttentionArgs& a) {
  constexpr int64_t kMaxOffset = int64_t{1} << 62;
  if (a.q_offset && (*a.q_offset > kMaxOffset || *a.q_offset < -kMaxOffset))
    fail(ErrorCode::Shape, fmt::format("q_offset {} is outside ±2^62: query positions and their distances to "
                                       "the keys must stay exact 64-bit integers", *a.q_offset));
}

void check_scalars(const KernelSpec& spec, const ScalarArgs& s, const AttentionArgs& a) {
  if (spec.modifiers.has(ModifierKind::Alibi) && s.alibi == AlibiSlopes::Custom) {
    const auto n = static_cast<int64_t>(s.alibi_slopes.size());
    if (n != 1 && n != a.q.shape[1])
      fail(ErrorCode::Shape, fmt::format("alibi has {} custom slopes but the call has {} query heads",
                                         n, a.q.shape[1]));
  }
  if (spec.modifiers.has(ModifierKind::Softcap) && !(s.softcap > 0.0))
    fail(ErrorCode::Verify, fmt::format("softcap must be positive (got {})", s.softcap));
  // rope / rope_window: the RoPE library checks every parameter it reads (an even rotary_dim
  // <= D, base, scaling factors, longrope list sizes) and names the one at fault. A head dim of 0
  // has nothing to rotate.
  const int64_t D = a.q.shape[3];
  if (spec.score != ScoreKind::ScaledDot && D > 0) {
    rope::validate_rope_params(s.rope, static_cast<int>(std::min<int64_t>(D, INT32_MAX)));
    if (spec.score == ScoreKind::RopeWindow && !(s.rope.window_k > 0.0))
      fail(ErrorCode::Verify, fmt::format("rope_window's k must be positive (got {}): pair r keeps "
                                          "the cells with |delta| <= k * wavelength_r",
                                          s.rope.window_k));
  }
}

void check_rope_tables(const KernelSpec& spec, const ScalarArgs& scalars, const AttentionArgs& a) {
  if (!a.rope_tables) return;
  const RopeTablesView& t = *a.rope_tables;
  if (spec.score == ScoreKind::ScaledDot)
    fail(ErrorCode::Unsupported, "RoPE tables were given but the program has no rope or rope_window; drop "
                                 "them or rotate in the program");
  const int64_t D = a.q.shape[3];
  const int64_t pairs = D > 0 ? rope::rotary_dim_of(scalars.rope, static_cast<int>(std::min<int64_t>(D, INT32_MAX))) / 2 : 0;
  if (t.pairs != pairs)
    fail(ErrorCode::Shape, fmt::format("the RoPE tables have {} pairs per position but the program rotates {} "
                                       "(rotary_dim / 2)", t.pairs, pairs));
  if (t.positions < 0 || (t.positions * t.pairs > 0 && (!t.cos || !t.sin)))
    fail(ErrorCode::MissingTensor, "the RoPE tables need cos and sin data for their positions");
  const int64_t needed = reference::rope_seq_len(a);
  if (t.positions < needed)
    fail(ErrorCode::Shape, fmt::format("the RoPE tables cover positions [0, {}) but the call rotates positions "
                                       "up to {}", t.positions, needed - 1));
}

}  // namespace

void validate(const KernelSpec& spec, const AttentionArgs& args, IndexMemory indices) {
  validate(spec, spec.scalars, args, indices);
}

void validate(const KernelSpec& spec, const ScalarArgs& scalars, const AttentionArgs& args, IndexMemory indices) {
  const bool host = indices == IndexMemory::Host;
  check_q_offset(args);
  if (args.paged) {  // K and V come from the pages (common/paged.hpp)
    check_view(args.q, "Q");
    check_view(args.out, "out");
    check_dtypes(spec, args);
    check_paged(spec, args, host);
    check_outputs(spec, args, args.paged->v_pages.shape[3]);
    check_bias(spec, args);
    check_block_mask(spec, args);
    check_cu_seqlens(spec, args, host);
    check_scalars(spec, scalars, args);
    check_rope_tables(spec, scalars, args);
    return;
  }
  check_view(args.q, "Q");
  check_view(args.k, "K");
  check_view(args.v, "V");
  check_view(args.out, "out");
  check_dtypes(spec, args);
  check_shapes(spec, args);
  check_bias(spec, args);
  check_block_mask(spec, args);
  check_cu_seqlens(spec, args, host);
  check_scalars(spec, scalars, args);
  check_rope_tables(spec, scalars, args);
}

}  // namespace attnfuse
