// Tests of BlockMask::from_block_classifier: with an exact classifier it builds the very mask
// from_predicate builds (CSR, full flags, cell bits), evaluates cells only in the blocks it calls
// Partial, and a cautious (always Partial) classifier is exact too. Also from_dense in parallel.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"
#include "sparsity/same_mask.hpp"

namespace attnfuse {
namespace {

using Kind = BlockMask::BlockKind;

// Causal with a query offset (bottom-right when off = kv_len - q_len): keep kv <= q + off.
struct Causal {
  int64_t off;
  bool operator()(int64_t, int64_t, int64_t q, int64_t kv) const { return kv <= q + off; }
  Kind operator()(int64_t, int64_t, int64_t q0, int64_t q1, int64_t k0, int64_t k1) const {
    if (k1 - 1 <= q0 + off) return Kind::Full;
    if (k0 > q1 - 1 + off) return Kind::Inactive;
    return Kind::Partial;
  }
};

// Symmetric window |q + off - kv| < w, per head a different w (so heads differ).
struct Window {
  int64_t off;
  int64_t w(int64_t h) const { return 5 + 23 * h; }
  bool operator()(int64_t, int64_t h, int64_t q, int64_t kv) const {
    const int64_t d = q + off - kv;
    return d < w(h) && -d < w(h);
  }
  Kind operator()(int64_t, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1) const {
    const int64_t lo = q0 + off - (k1 - 1), hi = q1 - 1 + off - k0;
    if (lo > -w(h) && hi < w(h)) return Kind::Full;
    if (lo >= w(h) || hi <= -w(h)) return Kind::Inactive;
    return Kind::Partial;
  }
};

TEST(BlockMaskClassifier, ExactClassifiersGiveTheCellMask) {
  for (int64_t nq : {1, 17, 129, 300})
    for (int64_t nk : {1, 33, 129, 301})
      for (auto [bq, bk] : {std::pair{16, 16}, std::pair{32, 8}, std::pair{7, 64}}) {
        SCOPED_TRACE(::testing::Message() << "nq=" << nq << " nk=" << nk << " block " << bq << "x" << bk);
        const Causal c{nk - nq};
        expect_same_mask(BlockMask::from_predicate(c, 1, 1, nq, nk, bq, bk),
                    BlockMask::from_block_classifier(c, c, 1, 1, nq, nk, bq, bk));
        const Window w{-13};
        expect_same_mask(BlockMask::from_predicate(w, 2, 3, nq, nk, bq, bk),
                    BlockMask::from_block_classifier(w, w, 2, 3, nq, nk, bq, bk));
      }
}

// The point of the classifier: cells are evaluated in Partial blocks only.
TEST(BlockMaskClassifier, EvaluatesCellsOnlyInPartialBlocks) {
  std::atomic<int64_t> cells{0};
  const Causal c{0};
  auto counting = [&](int64_t b, int64_t h, int64_t q, int64_t kv) {
    ++cells;
    return c(b, h, q, kv);
  };
  const BlockMask m = BlockMask::from_block_classifier(c, counting, 1, 1, 1000, 1000, 64, 64);
  // 16 diagonal blocks of up to 64 x 64 cells (the last one 40 x 40).
  EXPECT_EQ(cells.load(), 15 * 64 * 64 + 40 * 40);
  EXPECT_EQ(m.num_q_blocks(), 16);
}

// Partial is always safe: a block it calls Partial is stored by what its cells say, so "don't
// know" everywhere (or a value outside the enum) gives from_predicate's mask.
TEST(BlockMaskClassifier, CautiousClassifierIsExact) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> cellmap(130 * 90);
  for (auto& x : cellmap) x = rng() % 4 == 0;
  // Blocks 0..15 of 16 x 16: make some entirely kept and some entirely dropped.
  for (int64_t q = 0; q < 130; ++q)
    for (int64_t kv = 0; kv < 90; ++kv) {
      const int64_t blk = (q / 16) * 7 + kv / 16;
      if (blk % 3 == 0) cellmap[static_cast<size_t>(q * 90 + kv)] = 1;
      if (blk % 3 == 1) cellmap[static_cast<size_t>(q * 90 + kv)] = 0;
    }
  auto keep = [&](int64_t, int64_t, int64_t q, int64_t kv) { return cellmap[static_cast<size_t>(q * 90 + kv)] != 0; };
  auto unsure = [](int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) { return Kind::Partial; };
  auto odd = [](int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) { return static_cast<Kind>(42); };
  const BlockMask ref = BlockMask::from_predicate(keep, 1, 1, 130, 90, 16, 16);
  expect_same_mask(ref, BlockMask::from_block_classifier(unsure, keep, 1, 1, 130, 90, 16, 16));
  expect_same_mask(ref, BlockMask::from_block_classifier(odd, keep, 1, 1, 130, 90, 16, 16));
  // A classifier that knows the kept and dropped blocks and says Partial elsewhere: same mask.
  auto knows = [](int64_t, int64_t, int64_t q0, int64_t, int64_t k0, int64_t) {
    const int64_t blk = (q0 / 16) * 7 + k0 / 16;
    return blk % 3 == 0 ? Kind::Full : blk % 3 == 1 ? Kind::Inactive : Kind::Partial;
  };
  expect_same_mask(ref, BlockMask::from_block_classifier(knows, keep, 1, 1, 130, 90, 16, 16));
}

// A grid classifier (Full / Inactive from a block grid) is what from_dense builds.
TEST(BlockMaskClassifier, GridClassifierMatchesFromDense) {
  std::mt19937_64 rng(11);
  const int64_t H = 3, nq = 200, nk = 333, bq = 32, bk = 16, nqb = 7, nkb = 21;
  std::vector<uint8_t> grid(static_cast<size_t>(H * nqb * nkb));
  for (auto& g : grid) g = rng() % 5 == 0;
  auto at = [&](int64_t h, int64_t q, int64_t kv) { return grid[static_cast<size_t>((h * nqb + q / bq) * nkb + kv / bk)]; };
  auto keep = [&](int64_t, int64_t h, int64_t q, int64_t kv) { return at(h, q, kv) != 0; };
  auto classify = [&](int64_t, int64_t h, int64_t q0, int64_t, int64_t k0, int64_t) {
    return at(h, q0, k0) ? Kind::Full : Kind::Inactive;
  };
  const BlockMask dense = BlockMask::from_dense(grid.data(), 1, H, nq, nk, bq, bk);
  expect_same_mask(dense, BlockMask::from_block_classifier(classify, keep, 1, H, nq, nk, bq, bk));
  expect_same_mask(dense, BlockMask::from_predicate(keep, 1, H, nq, nk, bq, bk));
}

TEST(BlockMaskClassifier, ErrorsAndExceptions) {
  const Causal c{0};
  EXPECT_THROW(BlockMask::from_block_classifier({}, c, 1, 1, 8, 8, 4, 4), Error);
  EXPECT_THROW(BlockMask::from_block_classifier(c, {}, 1, 1, 8, 8, 4, 4), Error);
  EXPECT_THROW(BlockMask::from_block_classifier(c, c, 1, 1, 8, 8, 0, 4), Error);
  auto bad = [](int64_t, int64_t, int64_t q0, int64_t, int64_t, int64_t) -> Kind {
    if (q0 == 32) throw std::runtime_error("classifier failed at q0=32");
    return Kind::Full;
  };
  try {
    BlockMask::from_block_classifier(bad, c, 1, 2, 64, 64, 8, 8);
    FAIL() << "expected the classifier's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "classifier failed at q0=32");
  }
}

}  // namespace
}  // namespace attnfuse
