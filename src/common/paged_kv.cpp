// make_paged_cache: contiguous K/V copied into shuffled pages (include/attnfuse/paged_kv.hpp).
#include "attnfuse/paged_kv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "attnfuse/error.hpp"

namespace attnfuse {

PagedKV PagedCache::view() const {
  PagedKV p;
  p.layout = layout;
  // Kernels only read the pages (TensorView holds a mutable pointer for outputs' sake).
  p.k_pages = TensorView::contiguous(const_cast<std::byte*>(k_storage.data()), dtype, k_shape);
  p.v_pages = TensorView::contiguous(const_cast<std::byte*>(v_storage.data()), dtype, v_shape);
  p.page_indices = page_indices, p.page_indptr = page_indptr, p.last_page_len = last_page_len;
  return p;
}

PagedCache make_paged_cache(const TensorView& k, const TensorView& v, std::span<const int64_t> lengths,
                            int64_t page_size, PagedKV::Layout layout, uint64_t seed) {
  const int64_t B = k.shape[0], Hkv = k.shape[1], Nk = k.shape[2], D = k.shape[3], Dv = v.shape[3];
  if (static_cast<int64_t>(lengths.size()) != B || page_size < 1 || v.shape[0] != B ||
      v.shape[1] != Hkv || v.shape[2] != Nk || v.dtype != k.dtype)
    throw Error(ErrorCode::Shape, fmt::format("make_paged_cache: {} lengths for batch {}, page size {}: "
                                              "need one length per entry, page_size >= 1 and V fitting K",
                                              lengths.size(), B, page_size));
  PagedCache c;
  c.dtype = k.dtype, c.layout = layout;
  c.page_indptr.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)];
    if (n < 0 || n > Nk)
      throw Error(ErrorCode::Shape, fmt::format("make_paged_cache: length {} of entry {} is outside [0, Nk = {}]", n, b, Nk));
    const int64_t pages = (n + page_size - 1) / page_size;
    c.page_indptr.push_back(static_cast<int32_t>(c.page_indptr.back() + pages));
    c.last_page_len.push_back(static_cast<int32_t>(pages == 0 ? 0 : n - (pages - 1) * page_size));
  }
  // Spare pages (a quarter more, at least one) so that the indices in use are not dense.
  const int64_t used = c.page_indptr.back(), num_pages = used + used / 4 + 1;
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  c.page_indices.assign(order.begin(), order.begin() + used);

  auto shape = [&](int64_t d) {
    return layout == PagedKV::Layout::NHD ? std::array<int64_t, 4>{num_pages, page_size, Hkv, d}
                                          : std::array<int64_t, 4>{num_pages, Hkv, page_size, d};
  };
  c.k_shape = shape(D), c.v_shape = shape(Dv);
  const auto es = static_cast<size_t>(dtype_size(k.dtype));
  // All-ones bytes are NaN in fp32, bf16 and fp16 alike.
  c.k_storage.assign(size_t(num_pages * page_size * Hkv * D) * es, std::byte{0xff});
  c.v_storage.assign(size_t(num_pages * page_size * Hkv * Dv) * es, std::byte{0xff});
  const PagedKV view = c.view();
  const auto ks = view.strides(view.k_pages), vs = view.strides(view.v_pages);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < lengths[size_t(b)]; ++j) {
        const int64_t page = c.page_indices[size_t(c.page_indptr[size_t(b)] + j / page_size)];
        const int64_t slot = j % page_size;
        const auto* ksrc = static_cast<const std::byte*>(k.data) + size_t(k.offset(b, h, j, 0)) * es;
        const auto* vsrc = static_cast<const std::byte*>(v.data) + size_t(v.offset(b, h, j, 0)) * es;
        std::copy(ksrc, ksrc + size_t(D) * es, c.k_storage.data() + size_t(page * ks[0] + h * ks[1] + slot * ks[2]) * es);
        std::copy(vsrc, vsrc + size_t(Dv) * es, c.v_storage.data() + size_t(page * vs[0] + h * vs[1] + slot * vs[2]) * es);
      }
  return c;
}

}  // namespace attnfuse
