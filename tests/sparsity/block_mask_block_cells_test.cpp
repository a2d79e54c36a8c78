// Tests of BlockMask::from_block_cells: masks filled one block of cells at a time (the C ABI's
// attnfuse_block_mask_from_block_cells goes through it) equal the masks of the same cells given
// per cell, with and without a classifier; each block is asked for once, cut by the lengths.
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"
#include "sparsity/same_mask.hpp"

namespace attnfuse {
namespace {

// Fills a block from a per-cell rule, writing varied nonzero bytes for kept cells (any nonzero
// byte keeps a cell, not only 1).
template <class Keep>
BlockMask::BlockFiller filler_of(Keep keep) {
  return [keep](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, uint8_t* out) {
    for (int64_t q = q0; q < q1; ++q)
      for (int64_t kv = kv0; kv < kv1; ++kv)
        if (keep(b, h, q, kv)) out[(q - q0) * (kv1 - kv0) + (kv - kv0)] = static_cast<uint8_t>(1 + (q * 7 + kv) % 255);
  };
}

TEST(BlockMaskBlockCells, FilledBlocksBuildThePerCellMask) {
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t salt = rng();
  SCOPED_TRACE(testing::Message() << "salt " << salt);
  const auto window = [](int64_t b, int64_t h, int64_t q, int64_t kv) {
    return kv <= q + b && q - kv < 40 + 9 * h;
  };
  const auto random = [salt](int64_t b, int64_t h, int64_t q, int64_t kv) {
    uint64_t x = salt ^ (uint64_t(b) << 52) ^ (uint64_t(h) << 44) ^ (uint64_t(q) << 22) ^ uint64_t(kv);
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
    return (x & 3) == 0;
  };
  // The window's exact classifier: rows [q0, q1) against keys [kv0, kv1) for b, h.
  const BlockMask::BlockClassifier classify_window = [](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0,
                                                        int64_t kv1) {
    const int64_t w = 40 + 9 * h;
    const bool none = kv0 > (q1 - 1) + b || (q0 - (kv1 - 1)) >= w;
    const bool all = (kv1 - 1) <= q0 + b && (q1 - 1) - kv0 < w;
    return none ? BlockMask::BlockKind::Inactive : all ? BlockMask::BlockKind::Full : BlockMask::BlockKind::Partial;
  };
  for (auto [block_q, block_k] : {std::pair{64, 64}, {16, 100}, {5, 37}, {32, 200}, {1, 1}}) {
    for (auto [q_len, kv_len] : {std::pair<int64_t, int64_t>{301, 517}, {200, 64}}) {
      SCOPED_TRACE(testing::Message() << q_len << "x" << kv_len << " in " << block_q << "x" << block_k);
      expect_same_mask(BlockMask::from_block_cells(filler_of(window), 2, 3, q_len, kv_len, block_q, block_k),
                       BlockMask::from_predicate(window, 2, 3, q_len, kv_len, block_q, block_k));
      expect_same_mask(
          BlockMask::from_block_cells(classify_window, filler_of(window), 2, 3, q_len, kv_len, block_q, block_k),
          BlockMask::from_predicate(window, 2, 3, q_len, kv_len, block_q, block_k));
      expect_same_mask(BlockMask::from_block_cells(filler_of(random), 2, 3, q_len, kv_len, block_q, block_k),
                       BlockMask::from_predicate(random, 2, 3, q_len, kv_len, block_q, block_k));
    }
  }
}

// Each block is filled once, with its bounds cut by the lengths; a broadcast head axis asks about
// head 0 only; blocks the classifier settles are never filled.
TEST(BlockMaskBlockCells, EachBlockIsFilledOnceWithItsCutBounds) {
  using Call = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  std::mutex mu;
  std::multiset<Call> calls;
  const BlockMask::BlockFiller record = [&](int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1,
                                            uint8_t* keep) {
    for (int64_t i = 0; i < (q1 - q0) * (kv1 - kv0); ++i) ASSERT_EQ(keep[i], 0) << "the bytes arrive zeroed";
    keep[0] = 1;
    std::lock_guard lock(mu);
    calls.insert({b, h, q0, q1, kv0, kv1});
  };
  const int64_t q_len = 70, kv_len = 45;
  const int bq = 16, bk = 20;
  const BlockMask m = BlockMask::from_block_cells(record, 2, 1, q_len, kv_len, bq, bk);
  std::multiset<Call> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t q0 = 0; q0 < q_len; q0 += bq)
      for (int64_t kv0 = 0; kv0 < kv_len; kv0 += bk) want.insert({b, 0, q0, std::min(q_len, q0 + bq), kv0,
                                                                  std::min(kv_len, kv0 + bk)});
  EXPECT_EQ(calls, want);
  EXPECT_EQ(m.density(), 1.0);  // one cell kept per block: every block active, none full
  EXPECT_TRUE(m.keeps(1, 5, 16, 20) && !m.keeps(1, 5, 17, 20));

  calls.clear();
  const BlockMask::BlockClassifier settle_even = [](int64_t, int64_t, int64_t q0, int64_t, int64_t kv0, int64_t) {
    return (q0 / 16 + kv0 / 20) % 2 == 0 ? BlockMask::BlockKind::Inactive : BlockMask::BlockKind::Partial;
  };
  BlockMask::from_block_cells(settle_even, record, 1, 1, q_len, kv_len, bq, bk);
  for (const auto& [b, h, q0, q1, kv0, kv1] : calls) EXPECT_EQ((q0 / 16 + kv0 / 20) % 2, 1) << q0 << "," << kv0;
  EXPECT_EQ(calls.size(), 7u);  // 5 x 3 blocks, the 7 with an odd sum
}

TEST(BlockMaskBlockCells, FillerErrorsReachTheCallerAndEmptyFillersAreRefused) {
  const BlockMask::BlockFiller fails = [](int64_t, int64_t, int64_t q0, int64_t, int64_t, int64_t, uint8_t*) {
    if (q0 == 32) throw std::runtime_error("no cells for this block");
  };
  EXPECT_THROW(
      {
        try {
          BlockMask::from_block_cells(fails, 1, 2, 100, 100, 16, 16);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "no cells for this block");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_THROW(BlockMask::from_block_cells(BlockMask::BlockFiller{}, 1, 1, 8, 8, 4, 4), Error);
  EXPECT_THROW(BlockMask::from_block_cells(filler_of([](int64_t, int64_t, int64_t, int64_t) { return true; }), 1, 1,
                                           8, 8, 0, 4),
               Error);
}

}  // namespace
}  // namespace attnfuse
