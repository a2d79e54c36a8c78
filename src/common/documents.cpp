// Reading and checking the cu_seqlens offsets of document masks (see documents.hpp).
#include "common/documents.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

[[noreturn]] void shape_error(const std::string& msg) { throw Error(ErrorCode::Shape, msg); }

std::string row_name(const char* name, const SeqOffsetsView& v, int64_t b) {
  return v.batch == 1 ? std::string(name) : fmt::format("{}[{}]", name, b);
}

// One row: [0, ..., n], non-decreasing.
void check_row(const char* name, const SeqOffsetsView& v, int64_t b, int64_t n, const char* axis) {
  const std::string row = row_name(name, v, b);
  if (v.at(b, 0) != 0)
    shape_error(fmt::format("{} must start at 0 but entry 0 is {}", row, v.at(b, 0)));
  for (int64_t d = 1; d < v.length; ++d)
    if (v.at(b, d) < v.at(b, d - 1))
      shape_error(fmt::format("{} must be non-decreasing (document d holds rows [cu[d], cu[d+1])) but "
                              "entry {} is {} after {}",
                              row, d, v.at(b, d), v.at(b, d - 1)));
  if (v.at(b, v.length - 1) != n)
    shape_error(fmt::format("{} must end at {} = {} but its last entry is {}", row, axis, n,
                            v.at(b, v.length - 1)));
}

void check_view(const char* name, const SeqOffsetsView& v, int64_t B) {
  if (v.length < 1)
    shape_error(fmt::format("{} has {} entries; it needs num_docs + 1 >= 1 (e.g. [0, N] for one "
                            "document)", name, v.length));
  if (v.batch != 1 && v.batch != B)
    shape_error(fmt::format("{} has {} rows of offsets; it must have 1 (shared by every batch entry) "
                            "or B = {}", name, v.batch, B));
  if (v.data == nullptr) throw Error(ErrorCode::MissingTensor, fmt::format("{} has no data pointer", name));
}

}  // namespace

int64_t Documents::doc_of_query(int64_t i) const {
  return std::upper_bound(q.begin(), q.end(), i) - q.begin() - 1;
}

int64_t Documents::doc_of_key(int64_t j) const {
  return std::upper_bound(k.begin(), k.end(), j) - k.begin() - 1;
}

Documents read_documents(const AttentionArgs& a, int64_t b) {
  Documents docs;
  const SeqOffsetsView &q = *a.cu_seqlens_q, &k = *a.cu_seqlens_k;
  docs.q.resize(static_cast<size_t>(q.length));
  docs.k.resize(static_cast<size_t>(k.length));
  for (int64_t d = 0; d < q.length; ++d) docs.q[size_t(d)] = q.at(b, d);
  for (int64_t d = 0; d < k.length; ++d) docs.k[size_t(d)] = k.at(b, d);
  return docs;
}

void check_documents(const AttentionArgs& a, bool read_offsets) {
  if (!a.cu_seqlens_q || !a.cu_seqlens_k)
    throw Error(ErrorCode::MissingTensor,
                fmt::format("the program uses document but {} given; pass the document offsets of the "
                            "queries and of the keys (cu_seqlens_q, cu_seqlens_k)",
                            !a.cu_seqlens_q && !a.cu_seqlens_k ? "no cu_seqlens_q / cu_seqlens_k were"
                            : !a.cu_seqlens_q                  ? "no cu_seqlens_q was"
                                                               : "no cu_seqlens_k was"));
  if (a.q_offset)
    throw Error(ErrorCode::Unsupported,
                "q_offset does not apply to document masks: each document is aligned bottom-right on "
                "its own (its last query sees its last key); drop q_offset");
  const int64_t B = a.q.shape[0], Nq = a.q.shape[2], Nk = a.k.shape[2];
  const SeqOffsetsView &q = *a.cu_seqlens_q, &k = *a.cu_seqlens_k;
  check_view("cu_seqlens_q", q, B);
  check_view("cu_seqlens_k", k, B);
  if (q.length != k.length)
    shape_error(fmt::format("cu_seqlens_q has {} documents but cu_seqlens_k has {}: document d of the "
                            "queries attends to document d of the keys, so both need the same count "
                            "(empty documents are allowed)",
                            q.length - 1, k.length - 1));
  if (!read_offsets) return;  // device memory (CUDA): counts and batch rows only
  for (int64_t b = 0; b < std::max<int64_t>(q.batch, k.batch); ++b) {
    check_row("cu_seqlens_q", q, b, Nq, "Nq");
    check_row("cu_seqlens_k", k, b, Nk, "Nk");
  }
}

int64_t longest_key_document(const AttentionArgs& a) {
  const SeqOffsetsView& k = *a.cu_seqlens_k;
  int64_t longest = 0;
  for (int64_t b = 0; b < k.batch; ++b)
    for (int64_t d = 0; d + 1 < k.length; ++d) longest = std::max(longest, k.at(b, d + 1) - k.at(b, d));
  return longest;
}

}  // namespace attnfuse
