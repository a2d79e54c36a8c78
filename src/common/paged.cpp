// Checks of a paged KV cache's page tensors and page table (common/paged.hpp).
#include "common/paged.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

[[noreturn]] void shape_error(const std::string& msg) { throw Error(ErrorCode::Shape, msg); }

std::string dims(const std::array<int64_t, 4>& s) {
  return fmt::format("[{}, {}, {}, {}]", s[0], s[1], s[2], s[3]);
}

void check_pages(const TensorView& t, const char* name) {
  for (int64_t s : t.shape)
    if (s < 0) shape_error(fmt::format("{} has a negative dimension: {}", name, dims(t.shape)));
  if (t.shape[3] > 1 && t.strides[3] != 1)
    shape_error(fmt::format("{}'s last dimension must be contiguous (stride 1) but has stride {}",
                            name, t.strides[3]));
  if (t.numel() > 0 && t.data == nullptr)
    throw Error(ErrorCode::MissingTensor, fmt::format("{} {} has no data pointer", name, dims(t.shape)));
}

bool empty_view(const TensorView& t) {
  return t.data == nullptr && t.shape == std::array<int64_t, 4>{0, 0, 0, 0};
}

}  // namespace

void check_paged(const KernelSpec& spec, const AttentionArgs& a, bool read_table) {
  const PagedKV& pk = *a.paged;
  if (!empty_view(a.k) || !empty_view(a.v))
    shape_error("K and V come from the paged cache (args.paged), so args.k and args.v must be left "
                "empty (no data, shape [0, 0, 0, 0])");
  if (spec.needs_bias())
    throw Error(ErrorCode::Unsupported, "additive_bias needs one key axis shared by the batch; it is "
                                        "not supported with a paged KV cache");
  if (spec.needs_block_mask())
    throw Error(ErrorCode::Unsupported, "block_sparse needs one key axis shared by the batch (a "
                                        "BlockMask of one kv_len); it is not supported with a paged "
                                        "KV cache");
  if (spec.needs_cu_seqlens())
    throw Error(ErrorCode::Unsupported, "document masks are not supported with a paged KV cache: "
                                        "give each document its own sequence (page table entry)");
  check_pages(pk.k_pages, "k_pages");
  check_pages(pk.v_pages, "v_pages");
  const char* layout = pk.layout == PagedKV::Layout::NHD ? "[num_pages, page_size, Hkv, D] (NHD)"
                                                         : "[num_pages, Hkv, page_size, D] (HND)";
  const auto &k = pk.k_pages.shape, &v = pk.v_pages.shape;
  if (v[0] != k[0] || v[1] != k[1] || v[2] != k[2])
    shape_error(fmt::format("v_pages {} does not fit k_pages {}: both are {} with the same pages, "
                            "page size and heads", dims(v), dims(k), layout));
  const int64_t B = a.q.shape[0], Hq = a.q.shape[1], D = a.q.shape[3], Hkv = pk.heads();
  if (k[3] != D)
    shape_error(fmt::format("k_pages {} has head dim {} but Q has {} (k_pages is {})", dims(k), k[3], D, layout));
  if (Hq > 0 && (Hkv == 0 || Hq % Hkv != 0))
    shape_error(fmt::format("query heads (Hq={}) must be a multiple of the paged cache's key/value "
                            "heads (Hkv={}; k_pages {} is {})", Hq, Hkv, dims(k), layout));
  for (const auto& [view, name] : {std::pair{&pk.k_pages, "k_pages"}, std::pair{&pk.v_pages, "v_pages"}})
    if (view->dtype != a.q.dtype)
      throw Error(ErrorCode::DType, fmt::format("{} is {} but Q is {}: the paged cache must share Q's dtype",
                                                name, dtype_name(view->dtype), dtype_name(a.q.dtype)));

  // The page table.
  const auto &indptr = pk.page_indptr, &indices = pk.page_indices, &last = pk.last_page_len;
  if (static_cast<int64_t>(indptr.size()) != B + 1)
    shape_error(fmt::format("page_indptr has {} entries but the batch has B = {}; it needs B + 1",
                            indptr.size(), B));
  if (static_cast<int64_t>(last.size()) != B)
    shape_error(fmt::format("last_page_len has {} entries but the batch has B = {}; it needs B",
                            last.size(), B));
  if (!read_table) {  // device memory (CUDA): the sizes are all the host can check
    if (pk.page_size() == 0 && !indices.empty())
      throw Error(ErrorCode::MissingTensor, "the paged cache has page_size 0 but page_indices is not empty");
    return;
  }
  if (indptr[0] != 0) shape_error(fmt::format("page_indptr must start at 0 but starts at {}", indptr[0]));
  for (int64_t b = 0; b < B; ++b)
    if (indptr[size_t(b + 1)] < indptr[size_t(b)])
      shape_error(fmt::format("page_indptr decreases at entry {} ({} after {}); it must be non-decreasing",
                              b + 1, indptr[size_t(b + 1)], indptr[size_t(b)]));
  if (indptr[size_t(B)] > static_cast<int64_t>(indices.size()))
    shape_error(fmt::format("page_indptr ends at {} but page_indices has only {} entries",
                            indptr[size_t(B)], indices.size()));
  const int64_t pages = pk.num_pages(), page_size = pk.page_size();
  if (indptr[size_t(B)] > 0 && (indices.data() == nullptr || page_size == 0))
    throw Error(ErrorCode::MissingTensor, page_size == 0 ? "the paged cache has page_size 0 but sequences have pages"
                                                         : "page_indices has no data pointer");
  for (int64_t e = 0; e < indptr[size_t(B)]; ++e)
    if (indices[size_t(e)] < 0 || indices[size_t(e)] >= pages)
      shape_error(fmt::format("page_indices[{}] = {} is out of range: the cache has {} pages", e,
                              indices[size_t(e)], pages));
  for (int64_t b = 0; b < B; ++b)
    if (indptr[size_t(b + 1)] > indptr[size_t(b)] && (last[size_t(b)] < 1 || last[size_t(b)] > page_size))
      shape_error(fmt::format("last_page_len[{}] = {} must be in [1, page_size = {}] (sequence {} has "
                              "pages)", b, last[size_t(b)], page_size, b));
}

std::vector<int64_t> paged_kv_lengths(const PagedKV& paged) {
  std::vector<int64_t> n(static_cast<size_t>(std::max<int64_t>(paged.batch(), 0)));
  for (int64_t b = 0; b < paged.batch(); ++b) n[size_t(b)] = paged.kv_len(b);
  return n;
}

int64_t paged_rope_seq_len(const AttentionArgs& args) {
  const int64_t Nq = args.q.shape[2];
  int64_t len = 0;
  for (int64_t nk : paged_kv_lengths(*args.paged))
    len = std::max({len, nk, Nq > 0 ? paged_q_offset(args, nk) + Nq : 0});
  return len;
}

}  // namespace attnfuse
