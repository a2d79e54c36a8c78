// Building a paged KV cache (attention.hpp's PagedKV) from contiguous K/V: an owning copy with a
// shuffled page assignment, for tests, examples and moving an existing cache over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/tensor.hpp"

namespace attnfuse {

// Owns the pages and the page table; view() is valid while this object lives (and survives moves).
struct PagedCache {
  DType dtype = DType::F32;
  PagedKV::Layout layout = PagedKV::Layout::NHD;
  std::array<int64_t, 4> k_shape{}, v_shape{};  // of the page tensors, in the layout's order
  std::vector<std::byte> k_storage, v_storage;
  std::vector<int32_t> page_indices, page_indptr, last_page_len;

  PagedKV view() const;
};

// Copies the first lengths[b] keys (<= Nk) of every batch entry of k [B, Hkv, Nk, D] and
// v [B, Hkv, Nk, Dv] (any strides, last dimension contiguous, one dtype) into pages of page_size
// rows. The pages are handed out in an order shuffled by `seed`, with some spare pages left
// unused, so page indices are neither sorted nor dense. Rows the table does not cover (the tail of
// last pages, spare pages) hold NaN, so a kernel that reads past a sequence shows it. Throws
// Error(Shape) for lengths that do not fit (wrong count, negative, > Nk, page_size < 1).
PagedCache make_paged_cache(const TensorView& k, const TensorView& v, std::span<const int64_t> lengths,
                            int64_t page_size, PagedKV::Layout layout, uint64_t seed);

}  // namespace attnfuse
