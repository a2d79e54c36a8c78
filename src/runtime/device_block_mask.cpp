// Uploads a BlockMask's CSR for the CUDA kernel (device_block_mask.hpp).
#include "runtime/device_block_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "attnfuse/error.hpp"

namespace attnfuse::runtime {

DeviceBlockMask::~DeviceBlockMask() {
  if (base) driver().cuMemFree(base);
}

namespace {

// Every coarsening of one mask the runtime has made (one per tile shape that asked, so a few at
// most); never replaced, since launches in flight and other threads may still read one.
struct CoarseCopies {
  struct Entry {
    int block_q, block_k;
    BlockMask mask;
  };
  std::vector<std::unique_ptr<Entry>> list;
};

}  // namespace

const BlockMask* tile_block_mask(const BlockMask& mask, int bm, int bn) {
  if (mask.block_q() % bm == 0 && mask.block_k() % bn == 0) return &mask;
  // Coarsen each axis that is finer than the tile up to the tile.
  const int cq = mask.block_q() % bm == 0 ? mask.block_q() : bm;
  const int ck = mask.block_k() % bn == 0 ? mask.block_k() : bn;
  if (cq % mask.block_q() != 0 || ck % mask.block_k() != 0) return nullptr;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = mask.coarse_copy();
  if (!slot) slot = std::make_shared<CoarseCopies>();
  auto& copies = *static_cast<CoarseCopies*>(slot.get());
  for (const auto& e : copies.list)
    if (e->block_q == cq && e->block_k == ck) return &e->mask;
  copies.list.push_back(std::make_unique<CoarseCopies::Entry>(CoarseCopies::Entry{cq, ck, mask.coarsened(cq, ck)}));
  return &copies.list.back()->mask;
}

std::vector<int32_t> heaviest_rows_first(const BlockMask& mask) {
  const auto row_ptr = mask.csr().row_ptr;
  const size_t rows = row_ptr.empty() ? 0 : row_ptr.size() - 1;
  std::vector<int32_t> order(rows);
  for (size_t r = 0; r < rows; ++r) order[r] = static_cast<int32_t>(r);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return row_ptr[size_t(a) + 1] - row_ptr[size_t(a)] > row_ptr[size_t(b) + 1] - row_ptr[size_t(b)];
  });
  return order;
}

const DeviceBlockMask& upload_block_mask(const BlockMask& mask) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto& slot = mask.device_copy()) return *static_cast<const DeviceBlockMask*>(slot.get());
  const BlockMask::Csr c = mask.csr();
  if (!c.row_ptr.empty() && c.row_ptr.back() > INT32_MAX)
    throw Error(ErrorCode::Unsupported, fmt::format("the BlockMask has {} active blocks; the CUDA kernel "
                                                    "indexes up to 2^31 - 1", c.row_ptr.back()));
  std::vector<int32_t> row_ptr(c.row_ptr.begin(), c.row_ptr.end());
  const std::vector<int32_t> order = heaviest_rows_first(mask);
  auto align = [](size_t x) { return (x + 255) & ~size_t{255}; };
  const size_t o_rows = 0, o_cols = align(o_rows + row_ptr.size() * 4), o_full = align(o_cols + c.cols.size() * 4);
  const size_t o_bptr = align(o_full + c.full.size()), o_bits = align(o_bptr + c.bitmap_ptr.size() * 8);
  const size_t o_order = align(o_bits + c.bitmap.size() * 8);
  const size_t total = std::max<size_t>(o_order + order.size() * 4, 256);
  auto dm = std::make_shared<DeviceBlockMask>();
  const DriverApi& d = driver();
  check(d.cuMemAlloc(&dm->base, total), "cuMemAlloc (BlockMask)");
  auto put = [&](size_t off, const void* src, size_t bytes) {
    if (bytes) check(d.cuMemcpyHtoD(dm->base + off, src, bytes), "cuMemcpyHtoD (BlockMask)");
  };
  put(o_rows, row_ptr.data(), row_ptr.size() * 4);
  put(o_cols, c.cols.data(), c.cols.size() * 4);
  put(o_full, c.full.data(), c.full.size());
  put(o_bptr, c.bitmap_ptr.data(), c.bitmap_ptr.size() * 8);
  put(o_bits, c.bitmap.data(), c.bitmap.size() * 8);
  put(o_order, order.data(), order.size() * 4);
  auto at = [&](size_t off) { return reinterpret_cast<const char*>(dm->base + off); };
  dm->row_ptr = reinterpret_cast<const int*>(at(o_rows));
  dm->cols = reinterpret_cast<const int*>(at(o_cols));
  dm->full = reinterpret_cast<const unsigned char*>(at(o_full));
  dm->bits_ptr = reinterpret_cast<const int64_t*>(at(o_bptr));
  dm->bits = reinterpret_cast<const uint64_t*>(at(o_bits));
  dm->order = reinterpret_cast<const int*>(at(o_order));
  mask.device_copy() = dm;
  return *dm;
}

}  // namespace attnfuse::runtime
