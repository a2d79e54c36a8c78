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
