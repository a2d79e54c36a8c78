// The CUDA runtime's choice of the mask a prefill tile reads (runtime/device_block_mask.hpp):
// host logic, no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "runtime/device_block_mask.hpp"

namespace attnfuse::runtime {
namespace {

BlockMask causal_mask(int bq, int bk) {
  return BlockMask::from_predicate([](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; }, 1, 1, 333, 333,
                                   bq, bk);
}

TEST(TileBlockMask, MultiplesOfTheTileAreReadAsTheyAre) {
  const BlockMask m = causal_mask(256, 128);
  EXPECT_EQ(tile_block_mask(m, 128, 128), &m);
  EXPECT_EQ(tile_block_mask(m, 128, 64), &m);
}

TEST(TileBlockMask, FinerMasksAreCoarsenedOnceAndKept) {
  const BlockMask m = causal_mask(64, 32);
  const BlockMask* c = tile_block_mask(m, 128, 64);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c, &m);
  EXPECT_EQ(c->block_q(), 128);
  EXPECT_EQ(c->block_k(), 64);
  for (int64_t q = 0; q < 333; q += 7)
    for (int64_t kv = 0; kv < 333; kv += 5) ASSERT_EQ(c->keeps(0, 0, q, kv), q >= kv);
  EXPECT_EQ(tile_block_mask(m, 128, 64), c) << "the second call reuses the first coarsening";
  // Another tile gets its own copy, and the first stays valid (launches may still read it).
  const BlockMask* d = tile_block_mask(m, 128, 128);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d, c);
  EXPECT_EQ(d->block_k(), 128);
  EXPECT_EQ(tile_block_mask(m, 128, 64), c);
  // Copies of a mask share its coarsenings.
  const BlockMask copy = m;
  EXPECT_EQ(tile_block_mask(copy, 128, 64), c);
  // One axis coarsened, the other already a multiple.
  const BlockMask wide = causal_mask(64, 256);
  const BlockMask* w = tile_block_mask(wide, 128, 128);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->block_q(), 128);
  EXPECT_EQ(w->block_k(), 256);
}

TEST(HeaviestRowsFirst, SortsRowsByActiveBlocksStably) {
  // Two heads of 4 x 5 blocks; flattened rows (h * 4 + qb) keep 2, 5, 0, 2 | 1, 5, 2, 3 blocks.
  const int keeps[2][4] = {{2, 5, 0, 2}, {1, 5, 2, 3}};
  std::vector<uint8_t> grid(2 * 4 * 5, 0);
  for (int h = 0; h < 2; ++h)
    for (int qb = 0; qb < 4; ++qb)
      for (int kb = 0; kb < keeps[h][qb]; ++kb) grid[size_t((h * 4 + qb) * 5 + kb)] = 1;
  const BlockMask m = BlockMask::from_dense(grid.data(), 1, 2, 4 * 64, 5 * 64, 64, 64);
  // 5-block rows in row order, then 3, then the 2-block rows in row order, 1, 0.
  EXPECT_EQ(heaviest_rows_first(m), (std::vector<int32_t>{1, 5, 7, 0, 3, 6, 4, 2}));
}

TEST(TileBlockMask, NeitherMultipleNorDivisorIsRefused) {
  EXPECT_EQ(tile_block_mask(causal_mask(96, 128), 128, 128), nullptr);
  EXPECT_EQ(tile_block_mask(causal_mask(128, 48), 128, 64), nullptr);
}

TEST(TileBlockMask, ConcurrentCallersGetOneCoarsening) {
  const BlockMask m = causal_mask(32, 32);
  std::vector<const BlockMask*> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = tile_block_mask(m, 128, 128); });
  for (auto& t : threads) t.join();
  for (const BlockMask* g : got) EXPECT_EQ(g, got[0]);
}

}  // namespace
}  // namespace attnfuse::runtime
