// Uploads a BlockMask's CSR for the CUDA kernel (device_block_mask.hpp).
#include "runtime/device_block_mask.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "attnfuse/error.hpp"
#include "codegen/cuda/kernels/params.cuh"

namespace attnfuse::runtime {

DeviceBlockMask::~DeviceBlockMask() {
  if (base) driver().cuMemFree(base);
}

DeviceSparseWork::~DeviceSparseWork() {
  if (items) driver().cuMemFree(items);
}

namespace {

// The work lists made for one mask (one per launch shape that asked); never replaced, since
// launches in flight may still read one.
struct WorkLists {
  std::mutex mu;
  std::vector<std::unique_ptr<DeviceSparseWork>> list;
};

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

std::vector<uint32_t> entry_states(const BlockMask& mask) {
  using attnfuse_kernels::kBsFull, attnfuse_kernels::kBsGroupEmpty, attnfuse_kernels::kBsGroupFull;
  const BlockMask::Csr c = mask.csr();
  std::vector<uint32_t> state(c.cols.size(), 0);
  const int64_t bq = mask.block_q(), bk = mask.block_k(), nqb = mask.num_q_blocks();
  const int64_t groups = std::min<int64_t>((bq + attnfuse_kernels::kBsGroupRows - 1) / attnfuse_kernels::kBsGroupRows,
                                           attnfuse_kernels::kBsMaxGroups);
  const int64_t nrows = static_cast<int64_t>(c.row_ptr.size()) - 1;
  // A group's cell test reads its rows' runs of bits; a row's run [r * bk, r * bk + cols) may
  // start and end inside words.
  auto run_bits = [](const uint64_t* w, int64_t lo, int64_t len, bool& any, bool& all) {
    while (len > 0) {
      const int64_t i = lo >> 6, off = lo & 63, n = std::min<int64_t>(len, 64 - off);
      const uint64_t sel = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << off;
      any = any || (w[i] & sel) != 0;
      all = all && (w[i] & sel) == sel;
      lo += n;
      len -= n;
    }
  };
#pragma omp parallel for schedule(dynamic, 64) if (nrows > 256)
  for (int64_t r = 0; r < nrows; ++r) {
    const int64_t qb = r % nqb;
    const int64_t rows_in = std::min<int64_t>(bq, mask.q_len() - qb * bq);
    for (int64_t e = c.row_ptr[static_cast<size_t>(r)]; e < c.row_ptr[static_cast<size_t>(r) + 1]; ++e) {
      const auto ue = static_cast<size_t>(e);
      if (c.full[ue]) {
        state[ue] = kBsFull;
        continue;
      }
      const int64_t cols_in = std::min<int64_t>(bk, mask.kv_len() - int64_t{c.cols[ue]} * bk);
      const uint64_t* bits = c.bitmap.data() + c.bitmap_ptr[ue];
      uint32_t s = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t r0 = g * attnfuse_kernels::kBsGroupRows;
        const int64_t r1 = std::min<int64_t>(rows_in, r0 + attnfuse_kernels::kBsGroupRows);
        bool any = false, all = true;
        for (int64_t row = r0; row < r1 && (all || !any); ++row) run_bits(bits, row * bk, cols_in, any, all);
        if (!any) s |= kBsGroupEmpty << (2 * g);
        if (all) s |= kBsGroupFull << (2 * g);
      }
      state[ue] = s;
    }
  }
  return state;
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
  const std::vector<uint32_t> state = entry_states(mask);
  auto align = [](size_t x) { return (x + 255) & ~size_t{255}; };
  const size_t o_rows = 0, o_cols = align(o_rows + row_ptr.size() * 4), o_state = align(o_cols + c.cols.size() * 4);
  const size_t o_bptr = align(o_state + state.size() * 4), o_bits = align(o_bptr + c.bitmap_ptr.size() * 8);
  const size_t total = std::max<size_t>(o_bits + c.bitmap.size() * 8, 256);
  auto dm = std::make_shared<DeviceBlockMask>();
  const DriverApi& d = driver();
  check(d.cuMemAlloc(&dm->base, total), "cuMemAlloc (BlockMask)");
  auto put = [&](size_t off, const void* src, size_t bytes) {
    if (bytes) check(d.cuMemcpyHtoD(dm->base + off, src, bytes), "cuMemcpyHtoD (BlockMask)");
  };
  put(o_rows, row_ptr.data(), row_ptr.size() * 4);
  put(o_cols, c.cols.data(), c.cols.size() * 4);
  put(o_state, state.data(), state.size() * 4);
  put(o_bptr, c.bitmap_ptr.data(), c.bitmap_ptr.size() * 8);
  put(o_bits, c.bitmap.data(), c.bitmap.size() * 8);
  auto at = [&](size_t off) { return reinterpret_cast<const char*>(dm->base + off); };
  dm->row_ptr = reinterpret_cast<const int*>(at(o_rows));
  dm->cols = reinterpret_cast<const int*>(at(o_cols));
  dm->state = reinterpret_cast<const uint32_t*>(at(o_state));
  dm->group_states = std::any_of(state.begin(), state.end(), [](uint32_t s) { return s > attnfuse_kernels::kBsFull; });
  dm->bits_ptr = reinterpret_cast<const int64_t*>(at(o_bptr));
  dm->bits = reinterpret_cast<const uint64_t*>(at(o_bits));
  mask.device_copy() = dm;
  return *dm;
}

const DeviceSparseWork& sparse_work(const BlockMask& mask, const SparseWorkShape& shape) {
  std::shared_ptr<void> slot;
  {
    static std::mutex mu;  // guards the slot's creation; each mask's lists have their own lock
    std::lock_guard<std::mutex> lock(mu);
    auto& s = mask.work_lists();
    if (!s) s = std::make_shared<WorkLists>();
    slot = s;
  }
  auto& lists = *static_cast<WorkLists*>(slot.get());
  std::lock_guard<std::mutex> lock(lists.mu);
  for (const auto& w : lists.list)
    if (w->shape == shape) return *w;
  const SparseWork host = build_sparse_work(mask.csr().row_ptr, shape);
  auto w = std::make_unique<DeviceSparseWork>();
  w->shape = shape;
  w->num_items = host.num_items;
  w->slots = host.slots;
  const DriverApi& d = driver();
  const size_t bytes = std::max<size_t>(host.items.size() * 4, 4);
  check(d.cuMemAlloc(&w->items, bytes), "cuMemAlloc (block-sparse work list)");
  if (!host.items.empty())
    check(d.cuMemcpyHtoD(w->items, host.items.data(), host.items.size() * 4), "cuMemcpyHtoD (block-sparse work list)");
  lists.list.push_back(std::move(w));
  return *lists.list.back();
}

}  // namespace attnfuse::runtime
