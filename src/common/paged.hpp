// Paged KV caches (AttentionArgs::paged): the checks validate() runs on a page table and the
// per-sequence lengths and positions every backend derives from it.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse {

// For a call with args.paged: k / v left empty, page tensors with a contiguous last dimension,
// data behind them and the heads / head dims / dtype of Q (Error(Shape / DType / MissingTensor));
// page_indptr with B + 1 entries, starting at 0, non-decreasing; page_indices long enough and in
// [0, num_pages); last_page_len with B entries in [1, page_size] for sequences with pages
// (Error(Shape) naming the entry). additive_bias, block_sparse and document are
// Error(Unsupported). Reads the page table only; writes nothing. read_table = false (the table
// is device memory, CUDA calls) checks the sizes of the three index arrays but not their entries.
void check_paged(const KernelSpec& spec, const AttentionArgs& args, bool read_table = true);

// The KV length of every batch entry (call check_paged first).
std::vector<int64_t> paged_kv_lengths(const PagedKV& paged);

// The position of query 0 of batch entry b with KV length nk: the explicit q_offset, else
// bottom-right (nk - Nq).
inline int64_t paged_q_offset(const AttentionArgs& args, int64_t nk) {
  return args.q_offset ? *args.q_offset : nk - args.q.shape[2];
}

// The sequence length RoPE frequencies are computed for (dynamic / longrope): the largest
// position in play over the batch plus one, as Hugging Face's max(position_ids) + 1 of a padded
// batch.
int64_t paged_rope_seq_len(const AttentionArgs& args);

}  // namespace attnfuse
