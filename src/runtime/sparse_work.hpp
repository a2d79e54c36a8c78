// The work list of a block-sparse prefill launch (params.cuh bs_work): each entry is one mask row
// (batch, head, query block), or one part of it, with the range of its active blocks it runs.
// Entries go heaviest first, so a dense row (BigBird's global row) starts in the first wave, and
// a row longer than the average load of one resident block is cut into parts, run by separate
// blocks and merged by the last of them (log-sum-exp, the split-KV rule), so it does not outlast
// the rest of the grid. Host logic, no GPU needed; the runtime caches and uploads the list with
// the mask (device_block_mask.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace attnfuse::runtime {

struct SparseWorkShape {
  int sub = 1;            // kernel key tiles per mask block
  int64_t per_row = 1;    // kernel blocks per entry: broadcast batch x broadcast heads x query tiles per mask block
  int64_t cap_tiles = 0;  // most key tiles one part takes (0: rows are never cut)
  int forced_parts = 0;   // > 0: every row in this many parts (at most one per active block); overrides the cap
  bool operator==(const SparseWorkShape&) const = default;
};

// Ints per entry: mask row, first and end CSR entry, part, parts, first partial slot of the row
// (-1 when it is not cut), two unused (32-byte entries).
inline constexpr int kSparseWorkInts = 8;

struct SparseWork {
  std::vector<int32_t> items;  // kSparseWorkInts per entry, heaviest first
  int64_t num_items = 0;
  // Partial-result slots of the cut rows (a slot: one kernel tile's rows): a cut row with P
  // parts takes P x per_row of them, consecutive, starting at its entries' field 5.
  int64_t slots = 0;
};

// The entries of a mask's CSR (row_ptr: rows + 1 offsets). A row with n active blocks cut into P
// parts gives part j the blocks [n j / P, n (j + 1) / P). Order: most key tiles first, ties in
// (row, part) order. Throws Error(Unsupported) past int32 slot or entry counts.
SparseWork build_sparse_work(std::span<const int64_t> row_ptr, const SparseWorkShape& shape);

// The cap for a launch: a part longer than the average load of one resident block would end
// after the rest of the grid; parts shorter than kMinPartTiles cost their Q load and merge for
// little. total_tiles = key tiles over every kernel block of the launch.
inline constexpr int64_t kMinPartTiles = 8;
int64_t sparse_cap_tiles(int64_t total_tiles, int64_t resident_blocks);

}  // namespace attnfuse::runtime
