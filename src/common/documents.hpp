// The documents of packed sequences (document masks): the cu_seqlens offsets of one batch entry
// as plain vectors, the position frame of a document, and the checks validate() runs on them.
#pragma once

#include <cstdint>
#include <vector>

#include "attnfuse/attention.hpp"

namespace attnfuse {

// Positions inside a document (the convention of attention.hpp, FlashAttention varlen): key u
// of document d sits at position u, query t at t + Lk - Lq. In the call's global indices
// (query i, key j of document d) that is
//   key position    j - k[d]
//   query position  i - q[d] + Lk - Lq = i + shift(d) - k[d]
//   Δ               i + shift(d) - j,   shift(d) = k[d+1] - q[d+1]
// so causal / sliding_window / alibi read Δ exactly as without documents, with shift(d) in the
// place of q_offset, and only RoPE needs the origin k[d] of the document's positions.
struct Documents {
  std::vector<int64_t> q, k;  // num_docs + 1 offsets each: [0, ..., Nq] and [0, ..., Nk]

  int64_t count() const { return static_cast<int64_t>(q.size()) - 1; }
  int64_t shift(int64_t d) const { return k[size_t(d + 1)] - q[size_t(d + 1)]; }
  // The document holding query i / key j (the last of equal offsets, i.e. the non-empty one).
  int64_t doc_of_query(int64_t i) const;
  int64_t doc_of_key(int64_t j) const;
};

// The offsets of batch entry b, unchecked (call check_documents first).
Documents read_documents(const AttentionArgs& args, int64_t b);

// For a call whose program has document(): both offset tensors present (Error(MissingTensor)),
// num_docs + 1 of each with batch rows 1 or B (Error(Shape)), and every row starting at 0,
// non-decreasing and ending at Nq resp. Nk (Error(Shape) naming the tensor, row and entry).
// An explicit q_offset is Error(Unsupported): each document is aligned bottom-right on its own.
// read_offsets = false (device memory, CUDA calls) checks counts and batch rows, not the entries.
void check_documents(const AttentionArgs& args, bool read_offsets = true);

// The longest key document of the call: positions run 0 .. max Lk - 1, so this is the length
// RoPE scalings read (reference::rope_seq_len).
int64_t longest_key_document(const AttentionArgs& args);

}  // namespace attnfuse
