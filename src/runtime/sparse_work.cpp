// Builds the block-sparse prefill work list (sparse_work.hpp).
#include "runtime/sparse_work.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "attnfuse/error.hpp"
#include "passes/split_kv.hpp"

namespace attnfuse::runtime {

int64_t sparse_cap_tiles(int64_t total_tiles, int64_t resident_blocks) {
  const int64_t mean = (total_tiles + std::max<int64_t>(resident_blocks, 1) - 1) / std::max<int64_t>(resident_blocks, 1);
  return std::max(mean, kMinPartTiles);
}

SparseWork build_sparse_work(std::span<const int64_t> row_ptr, const SparseWorkShape& s) {
  struct Entry {
    int64_t row, begin, end, part, parts;
  };
  std::vector<Entry> entries;
  const int64_t rows = row_ptr.empty() ? 0 : static_cast<int64_t>(row_ptr.size()) - 1;
  entries.reserve(static_cast<size_t>(rows));
  SparseWork w;
  // Partial slots in row order: a cut row's P parts x per_row kernel blocks, consecutive.
  std::vector<int64_t> first_slot(static_cast<size_t>(rows), -1);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = row_ptr[size_t(r)], n = row_ptr[size_t(r) + 1] - b;
    int64_t parts = 1;
    if (s.forced_parts > 0) parts = s.forced_parts;
    else if (s.cap_tiles > 0) parts = (n * s.sub + s.cap_tiles - 1) / s.cap_tiles;
    parts = std::clamp<int64_t>(parts, 1, std::min<int64_t>(std::max<int64_t>(n, 1), passes::kMaxSplits));
    if (parts > 1) {
      first_slot[size_t(r)] = w.slots;
      w.slots += parts * s.per_row;
    }
    for (int64_t j = 0; j < parts; ++j) entries.push_back({r, b + n * j / parts, b + n * (j + 1) / parts, j, parts});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.end - a.begin > b.end - b.begin; });
  w.num_items = static_cast<int64_t>(entries.size());
  if (w.slots > INT32_MAX || w.num_items > INT32_MAX / kSparseWorkInts || rows > INT32_MAX)
    throw Error(ErrorCode::Unsupported, fmt::format("the block-sparse work list ({} entries, {} partial slots) "
                                                    "exceeds the kernel's 32-bit indices", w.num_items, w.slots));
  w.items.reserve(static_cast<size_t>(w.num_items * kSparseWorkInts));
  for (const Entry& e : entries)
    for (int64_t v : {e.row, e.begin, e.end, e.part, e.parts, first_slot[size_t(e.row)], int64_t{0}, int64_t{0}})
      w.items.push_back(static_cast<int32_t>(v));
  return w;
}

}  // namespace attnfuse::runtime
