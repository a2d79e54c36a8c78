// attnfuse::run_cpu: validates the call, resolves it into KernelParams and dispatches to the
// fused kernel's compile-time specialization for the spec's roles.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/documents.hpp"
#include "common/paged.hpp"
#include "cpu/fused_kernel.hpp"
#include "reference/reference.hpp"

namespace attnfuse {
namespace {

std::array<int64_t, 3> bhs(const TensorView& t) { return {t.strides[0], t.strides[1], t.strides[2]}; }

// The query positions RoPE must cover, [first, first + count): q_offset .. q_offset + Nq - 1, or
// with documents, from the lowest first position of a document's queries (Lk - Lq) up to the
// highest last one (Lk - 1).
std::pair<int64_t, int64_t> query_positions(const std::vector<Documents>& docs, int64_t q_offset, int64_t Nq) {
  if (docs.empty()) return {q_offset, Nq};
  int64_t lo = 0, hi = 0;  // [lo, hi)
  bool any = false;
  for (const Documents& row : docs)
    for (int64_t d = 0; d < row.count(); ++d) {
      const int64_t lq = row.q[size_t(d + 1)] - row.q[size_t(d)], lk = row.k[size_t(d + 1)] - row.k[size_t(d)];
      if (lq == 0) continue;
      lo = any ? std::min(lo, lk - lq) : lk - lq, hi = any ? std::max(hi, lk) : lk;
      any = true;
    }
  return {lo, hi - lo};
}

}  // namespace

void run_cpu(const KernelSpec& spec, const AttentionArgs& args) {
  validate(spec, args);
  cpu::KernelParams p;
  p.q = args.q.data, p.k = args.k.data, p.v = args.v.data, p.out = args.out.data;
  p.dtype = args.q.dtype;
  // The tile pass's shape, within what the kernel's layout holds (a hand-built spec may say 0).
  p.block_q = std::clamp(spec.tile.block_q > 0 ? spec.tile.block_q : cpu::kMaxBlockQ, 1, cpu::kMaxBlockQ);
  p.block_k = std::clamp(spec.tile.block_k > 0 ? spec.tile.block_k : 64, 1, cpu::kMaxBlockK);
  p.B = args.q.shape[0], p.Hq = args.q.shape[1], p.Nq = args.q.shape[2], p.D = args.q.shape[3];
  p.Hkv = args.k.shape[1], p.Nk = args.k.shape[2], p.Dv = args.v.shape[3];
  p.q_strides = bhs(args.q), p.k_strides = bhs(args.k), p.v_strides = bhs(args.v);
  // Paged KV: K/V rows come through the page table; per-entry lengths and query positions.
  std::vector<int64_t> kv_len, q_offsets;
  if (args.paged) {
    const PagedKV& pk = *args.paged;
    p.k = pk.k_pages.data, p.v = pk.v_pages.data;
    p.Hkv = pk.heads(), p.Dv = pk.v_pages.shape[3];
    p.k_strides = pk.strides(pk.k_pages), p.v_strides = pk.strides(pk.v_pages);
    p.page_table = pk.page_indices.data(), p.page_start = pk.page_indptr.data();
    p.page_size = pk.page_size();
    kv_len = paged_kv_lengths(pk);
    for (int64_t nk : kv_len) q_offsets.push_back(paged_q_offset(args, nk));
    p.kv_len = kv_len.data(), p.q_offsets = q_offsets.data();
    p.Nk = kv_len.empty() ? 0 : *std::max_element(kv_len.begin(), kv_len.end());
  }
  p.out_strides = bhs(args.out);
  if (args.lse) {
    p.lse = args.lse->data;
    p.lse_strides = args.lse->strides;
  }
  // As in the reference: D = 0 has no 1/sqrt(D), and an empty contraction should give 0, not NaN.
  p.scale = static_cast<float>(spec.scalars.scale ? *spec.scalars.scale
                                                  : (p.D > 0 ? 1.0 / std::sqrt(double(p.D)) : 1.0));
  p.q_offset = args.paged ? args.q_offset.value_or(0) : args.resolved_q_offset();
  p.masks = spec.masks;
  p.window = spec.scalars.window;
  p.block_mask = args.block_mask;
  std::vector<float> slopes;
  if (spec.modifiers.has(ModifierKind::Alibi)) {
    slopes.resize(static_cast<size_t>(p.Hq));
    for (int64_t h = 0; h < p.Hq; ++h)
      slopes[static_cast<size_t>(h)] = static_cast<float>(reference::alibi_slope(spec.scalars, h, p.Hq));
    p.alibi_slopes = slopes.data();
  }
  p.softcap = static_cast<float>(spec.scalars.softcap);
  if (spec.needs_bias()) {
    const TensorView& bias = *args.bias;
    p.bias = bias.data;
    p.bias_dtype = bias.dtype;
    // Broadcast axes (size 1) read row 0 for every batch / head.
    p.bias_strides = {bias.shape[0] == 1 ? 0 : bias.strides[0], bias.shape[1] == 1 ? 0 : bias.strides[1],
                      bias.strides[2]};
  }
  // document: the offsets as plain vectors, one entry per batch entry unless both are shared.
  std::vector<Documents> documents;
  if (spec.needs_cu_seqlens()) {
    const int64_t rows = args.cu_seqlens_q->batch == 1 && args.cu_seqlens_k->batch == 1 ? 1 : p.B;
    for (int64_t b = 0; b < rows; ++b) documents.push_back(read_documents(args, b));
    p.documents = documents.data();
    p.document_rows = rows;
  }
  // RoPE: frequencies once per call at the reference's sequence length (dynamic and longrope
  // read it), so the kernel rotates and prunes exactly as the reference does.
  cpu::RopePlan rope;
  if (spec.score != ScoreKind::ScaledDot) {
    auto [q_first, q_count] = query_positions(documents, p.q_offset, p.Nq);
    if (args.paged && !q_offsets.empty()) {  // every entry's [q_offset_b, q_offset_b + Nq)
      const auto [lo, hi] = std::minmax_element(q_offsets.begin(), q_offsets.end());
      q_first = *lo, q_count = *hi + p.Nq - *lo;
    }
    rope = cpu::make_rope_plan(spec.scalars.rope, p.D, reference::rope_seq_len(args),
                               spec.score == ScoreKind::RopeWindow, p.Nk, q_first, q_count);
    if (args.rope_tables) rope.use_tables(*args.rope_tables, q_first, q_count);
    p.rope = &rope;
  }
  const bool masked = spec.masks.has(MaskKind::Causal) || spec.masks.has(MaskKind::SlidingWindow) ||
                      spec.masks.has(MaskKind::BlockSparse);
  const cpu::KernelFn kernel = cpu::select_kernel(spec.norm, spec.modifiers, masked);
  if (!kernel)
    throw Error(ErrorCode::Internal, "no CPU kernel specialization for this modifier chain");
  kernel(p);
}

}  // namespace attnfuse
