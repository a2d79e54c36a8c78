// The CUDA runtime's choice of the mask a prefill tile reads (runtime/device_block_mask.hpp):
// host logic, no GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "codegen/cuda/kernels/params.cuh"
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

// The state words the kernel reads (params.cuh kBs*), against a per-cell count of the mask.
uint32_t expected_state(const BlockMask& m, int64_t qb, int32_t kb) {
  const int64_t q0 = qb * m.block_q(), k0 = int64_t{kb} * m.block_k();
  const int64_t q1 = std::min(m.q_len(), q0 + m.block_q()), k1 = std::min(m.kv_len(), k0 + m.block_k());
  uint32_t s = 0;
  for (int64_t g = 0; g * 64 < m.block_q() && g < attnfuse_kernels::kBsMaxGroups; ++g) {
    bool any = false, all = true;
    for (int64_t q = q0 + 64 * g; q < std::min(q1, q0 + 64 * (g + 1)); ++q)
      for (int64_t k = k0; k < k1; ++k) {
        const bool kept = m.keeps(0, 0, q, k);
        any = any || kept;
        all = all && kept;
      }
    if (!any) s |= attnfuse_kernels::kBsGroupEmpty << (2 * g);
    if (all) s |= attnfuse_kernels::kBsGroupFull << (2 * g);
  }
  return s;
}

TEST(EntryStates, GroupsOfSixtyFourRowsThatKeepNoneOrAllOfTheirCells) {
  // A 64-block grid coarsened to the wgmma tile (128 x 64): most coarse blocks are active for
  // one of their two fine rows only. Plus a causal mask at odd lengths (partial groups at the
  // diagonal, groups cut by q_len) and 256-row blocks (four groups).
  std::vector<uint8_t> grid(9 * 9, 0);
  for (int i = 0; i < 9; ++i) {
    grid[i * 9 + i] = 1;
    grid[i * 9] = 1;
    grid[i * 9 + (i * 5 + 3) % 9] = 1;
  }
  const BlockMask fine = BlockMask::from_dense(grid.data(), 1, 1, 9 * 64 - 17, 9 * 64, 64, 64);
  const BlockMask* coarse = tile_block_mask(fine, 128, 64);
  ASSERT_NE(coarse, nullptr);
  for (const BlockMask* m : {coarse, &fine}) {
    const auto st = entry_states(*m);
    const auto c = m->csr();
    ASSERT_EQ(st.size(), c.cols.size());
    int skipped = 0;
    for (int64_t qb = 0; qb < m->num_q_blocks(); ++qb)
      for (int64_t e = c.row_ptr[qb]; e < c.row_ptr[qb + 1]; ++e) {
        const auto ue = static_cast<size_t>(e);
        if (c.full[ue]) {
          EXPECT_EQ(st[ue], attnfuse_kernels::kBsFull);
          continue;
        }
        EXPECT_EQ(st[ue], expected_state(*m, qb, c.cols[ue])) << "block " << qb << ", " << c.cols[ue];
        skipped += (st[ue] & attnfuse_kernels::kBsGroupEmpty) != 0;
      }
    if (m != coarse) continue;
    EXPECT_GE(skipped, 6) << "the coarsened grid has blocks one row group skips";
    // Coarse row 0 holds fine rows 0 (blocks 0, 3) and 1 (blocks 0, 1, 8): key block 1 keeps
    // none of rows 0-63 and all of rows 64-127.
    const auto cols = m->kv_blocks(0, 0, 0);
    const auto at = std::find(cols.begin(), cols.end(), 1);
    ASSERT_NE(at, cols.end());
    EXPECT_EQ(st[static_cast<size_t>(at - cols.begin())], attnfuse_kernels::kBsGroupEmpty | (attnfuse_kernels::kBsGroupFull << 2));
  }
  const BlockMask causal = BlockMask::from_predicate([](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; },
                                                     1, 1, 555, 600, 256, 64);
  const auto st = entry_states(causal);
  const auto c = causal.csr();
  for (int64_t qb = 0; qb < causal.num_q_blocks(); ++qb)
    for (int64_t e = c.row_ptr[qb]; e < c.row_ptr[qb + 1]; ++e) {
      const auto ue = static_cast<size_t>(e);
      EXPECT_EQ(st[ue], c.full[ue] ? attnfuse_kernels::kBsFull : expected_state(causal, qb, c.cols[ue]))
          << "block " << qb << ", " << c.cols[ue];
    }
}

}  // namespace
}  // namespace attnfuse::runtime
