// The block-sparse prefill work list (runtime/sparse_work.hpp): host logic, no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <climits>
#include <random>
#include <vector>

#include "runtime/sparse_work.hpp"

namespace attnfuse::runtime {
namespace {

struct Item {
  int32_t row, begin, end, part, parts, slot0;
};

std::vector<Item> items_of(const SparseWork& w) {
  std::vector<Item> out;
  for (int64_t i = 0; i < w.num_items; ++i) {
    const int32_t* e = w.items.data() + i * kSparseWorkInts;
    out.push_back({e[0], e[1], e[2], e[3], e[4], e[5]});
  }
  return out;
}

TEST(SparseWork, UncutRowsGoHeaviestFirstInRowOrderOnTies) {
  // Rows keep 2, 5, 0, 2, 1, 5 blocks.
  const std::vector<int64_t> row_ptr = {0, 2, 7, 7, 9, 10, 15};
  const SparseWork w = build_sparse_work(row_ptr, SparseWorkShape{2, 6, 0, 0});
  ASSERT_EQ(w.num_items, 6);
  EXPECT_EQ(w.slots, 0);
  const std::vector<Item> it = items_of(w);
  const int32_t order[] = {1, 5, 0, 3, 4, 2};
  for (size_t i = 0; i < it.size(); ++i) {
    EXPECT_EQ(it[i].row, order[i]);
    EXPECT_EQ(it[i].begin, row_ptr[size_t(order[i])]);
    EXPECT_EQ(it[i].end, row_ptr[size_t(order[i]) + 1]);
    EXPECT_EQ(it[i].part, 0);
    EXPECT_EQ(it[i].parts, 1);
    EXPECT_EQ(it[i].slot0, -1);
  }
}

TEST(SparseWork, RowsPastTheCapAreCutIntoBalancedParts) {
  // Row 0: 10 blocks x 2 tiles = 20 tiles, cap 8: 3 parts of 3, 3, 4 blocks. Row 1: 3 blocks (6
  // tiles): whole. Row 2: 9 blocks (18 tiles): 3 parts of 3. Slots in row order, per_row 4 each.
  const std::vector<int64_t> row_ptr = {0, 10, 13, 22};
  const SparseWork w = build_sparse_work(row_ptr, SparseWorkShape{2, 4, 8, 0});
  EXPECT_EQ(w.num_items, 7);
  EXPECT_EQ(w.slots, (3 + 3) * 4);
  const std::vector<Item> it = items_of(w);
  // Longest first: row 0's 4-block part, then the 3-block parts in (row, part) order.
  EXPECT_EQ(it[0].row, 0);
  EXPECT_EQ(it[0].part, 2);
  EXPECT_EQ(it[0].end - it[0].begin, 4);
  for (const Item& e : it) {
    if (e.row == 0) {
      EXPECT_EQ(e.slot0, 0);
    }
    if (e.row == 1) {
      EXPECT_EQ(e.slot0, -1);
    }
    if (e.row == 2) {
      EXPECT_EQ(e.slot0, 12);
    }
    if (e.row != 1) {
      EXPECT_EQ(e.parts, 3);
    }
  }
}

TEST(SparseWork, ForcedPartsStopAtOneBlockEachAndEmptyRowsStayWhole) {
  const std::vector<int64_t> row_ptr = {0, 0, 2, 9};  // 0, 2 and 7 blocks
  const SparseWork w = build_sparse_work(row_ptr, SparseWorkShape{1, 3, 0, 3});
  const std::vector<Item> it = items_of(w);
  ASSERT_EQ(w.num_items, 1 + 2 + 3);
  EXPECT_EQ(w.slots, (2 + 3) * 3);
  for (const Item& e : it) EXPECT_EQ(e.parts, e.row == 0 ? 1 : (e.row == 1 ? 2 : 3));
}

TEST(SparseWork, EveryBlockIsRunOnceWhateverTheCut) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> row_ptr = {0};
    const int rows = 1 + int(rng() % 40);
    for (int r = 0; r < rows; ++r) row_ptr.push_back(row_ptr.back() + int64_t(rng() % 3 == 0 ? rng() % 200 : rng() % 6));
    const SparseWorkShape shape{1 + int(rng() % 4), 1 + int64_t(rng() % 5), int64_t(rng() % 30),
                                trial % 5 == 0 ? 1 + int(rng() % 9) : 0};
    const SparseWork w = build_sparse_work(row_ptr, shape);
    std::vector<int> seen(size_t(row_ptr.back()), 0);
    std::vector<int> parts_seen(size_t(rows), 0);
    int64_t last_len = INT64_MAX, slots = 0;
    std::vector<int32_t> slot0(size_t(rows), -2);
    for (const Item& e : items_of(w)) {
      EXPECT_LE(e.end - e.begin, last_len) << "heaviest first";
      last_len = e.end - e.begin;
      EXPECT_GE(e.begin, row_ptr[size_t(e.row)]);
      EXPECT_LE(e.end, row_ptr[size_t(e.row) + 1]);
      for (int32_t k = e.begin; k < e.end; ++k) ++seen[size_t(k)];
      ++parts_seen[size_t(e.row)];
      if (slot0[size_t(e.row)] == -2) slot0[size_t(e.row)] = e.slot0;
      EXPECT_EQ(e.slot0, slot0[size_t(e.row)]) << "one slot base per row";
      EXPECT_EQ(e.slot0 < 0, e.parts == 1);
      if (e.part == 0 && e.parts > 1) slots += e.parts * shape.per_row;
    }
    for (int c : seen) EXPECT_EQ(c, 1);
    for (int r = 0; r < rows; ++r) EXPECT_GE(parts_seen[size_t(r)], 1);
    EXPECT_EQ(w.slots, slots);
  }
}

TEST(SparseWork, CapIsTheMeanLoadPerResidentBlockWithAFloor) {
  EXPECT_EQ(sparse_cap_tiles(14381, 264), 55);
  EXPECT_EQ(sparse_cap_tiles(100, 264), kMinPartTiles);
  EXPECT_EQ(sparse_cap_tiles(0, 0), kMinPartTiles);
}

}  // namespace
}  // namespace attnfuse::runtime
