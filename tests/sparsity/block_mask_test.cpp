// Tests of BlockMask construction: CSR layout, full/partial blocks, broadcast, exact cell semantics.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

// Fixed seeds plus one fresh seed; SCOPED_TRACE prints whichever failed.
std::vector<uint64_t> seeds() { return {1, 2, 3, std::random_device{}()}; }

// A cheap deterministic per-cell hash in [0, 1).
double cell_hash(uint64_t seed, int64_t b, int64_t h, int64_t q, int64_t kv) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b) * 0xBF58476D1CE4E5B9ull ^
               static_cast<uint64_t>(h) * 0x94D049BB133111EBull ^
               static_cast<uint64_t>(q) * 0xD6E8FEB86659FD93ull ^ static_cast<uint64_t>(kv);
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<double>(x >> 11) * 0x1p-53;
}

void expect_keeps_matches(const BlockMask& m, const BlockMask::Predicate& p, int64_t B, int64_t H) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q = 0; q < m.q_len(); ++q)
        for (int64_t kv = 0; kv < m.kv_len(); ++kv) {
          ASSERT_EQ(m.keeps(b, h, q, kv), p(m.batch() == 1 ? 0 : b, m.heads() == 1 ? 0 : h, q, kv))
              << "b=" << b << " h=" << h << " q=" << q << " kv=" << kv;
        }
}

TEST(BlockMask, CausalIsLowerTriangularWithFullBlocksBelowTheDiagonal) {
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const BlockMask m = BlockMask::from_predicate(causal, 1, 1, 256, 256, 64, 64);
  ASSERT_EQ(m.num_q_blocks(), 4);
  ASSERT_EQ(m.num_kv_blocks(), 4);
  for (int64_t qb = 0; qb < 4; ++qb) {
    auto cols = m.kv_blocks(0, 0, qb);
    auto full = m.full_flags(0, 0, qb);
    ASSERT_EQ(cols.size(), static_cast<size_t>(qb + 1));
    ASSERT_EQ(full.size(), cols.size());
    for (int64_t e = 0; e <= qb; ++e) {
      EXPECT_EQ(cols[static_cast<size_t>(e)], e);
      EXPECT_EQ(full[static_cast<size_t>(e)], e < qb ? 1 : 0) << "qb=" << qb << " kb=" << e;
    }
  }
  EXPECT_DOUBLE_EQ(m.density(), 10.0 / 16.0);
  expect_keeps_matches(m, causal, 1, 1);
}

TEST(BlockMask, BottomRightCausalWithMoreKeysThanQueries) {
  // Nq=100, Nk=300: query i sits at position i + 200.
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q + 200; };
  const BlockMask m = BlockMask::from_predicate(causal, 1, 1, 100, 300, 32, 64);
  EXPECT_EQ(m.num_q_blocks(), 4);
  EXPECT_EQ(m.num_kv_blocks(), 5);
  // Query block 0 (rows 0..31, positions 200..231): key blocks 0,1,2 full; block 3 (192..255)
  // partial; block 4 (256..299) inactive.
  auto cols = m.kv_blocks(0, 0, 0);
  auto full = m.full_flags(0, 0, 0);
  ASSERT_EQ(std::vector<int32_t>(cols.begin(), cols.end()), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<uint8_t>(full.begin(), full.end()), (std::vector<uint8_t>{1, 1, 1, 0}));
  expect_keeps_matches(m, causal, 1, 1);
}

TEST(BlockMask, DenseGridRoundTrip) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const int64_t B = 2, H = 3, Nq = 100, Nk = 77;
    const int bq = 16, bk = 8;
    const int64_t nqb = 7, nkb = 10;
    std::vector<uint8_t> grid(static_cast<size_t>(B * H * nqb * nkb));
    for (auto& g : grid) g = static_cast<uint8_t>(rng() % 3 == 0 ? (1 + rng() % 200) : 0);
    const BlockMask m = BlockMask::from_dense(grid.data(), B, H, Nq, Nk, bq, bk);
    ASSERT_EQ(m.num_q_blocks(), nqb);
    ASSERT_EQ(m.num_kv_blocks(), nkb);
    int64_t active = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t qb = 0; qb < nqb; ++qb) {
          std::vector<uint8_t> back(static_cast<size_t>(nkb), 0);
          auto cols = m.kv_blocks(b, h, qb);
          auto full = m.full_flags(b, h, qb);
          for (size_t e = 0; e < cols.size(); ++e) {
            if (e > 0) {
              EXPECT_LT(cols[e - 1], cols[e]) << "columns must ascend";
            }
            EXPECT_EQ(full[e], 1) << "dense-grid blocks are full";
            back[static_cast<size_t>(cols[e])] = 1;
          }
          active += static_cast<int64_t>(cols.size());
          for (int64_t kb = 0; kb < nkb; ++kb) {
            ASSERT_EQ(back[static_cast<size_t>(kb)] != 0,
                      grid[static_cast<size_t>(((b * H + h) * nqb + qb) * nkb + kb)] != 0);
          }
        }
    EXPECT_DOUBLE_EQ(m.density(), static_cast<double>(active) / static_cast<double>(B * H * nqb * nkb));
    auto grid_pred = [&](int64_t b, int64_t h, int64_t q, int64_t kv) {
      return grid[static_cast<size_t>(((b * H + h) * nqb + q / bq) * nkb + kv / bk)] != 0;
    };
    expect_keeps_matches(m, grid_pred, B, H);
  }
}

TEST(BlockMask, DenseGridLargeEnoughForTheThreadTeam) {
  // Grids of 2^20 entries and more are read by the OpenMP team (smaller ones by one thread):
  // the same CSR either way.
  std::mt19937_64 rng(std::random_device{}());
  const int64_t H = 2, n = 1024 * 16, nb = 1024;
  std::vector<uint8_t> grid(static_cast<size_t>(H * nb * nb));
  for (auto& g : grid) g = rng() % 7 == 0;
  const BlockMask m = BlockMask::from_dense(grid.data(), 1, H, n, n, 16, 16);
  int64_t active = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t qb = 0; qb < nb; ++qb) {
      const auto cols = m.kv_blocks(0, h, qb);
      size_t e = 0;
      for (int64_t kb = 0; kb < nb; ++kb)
        if (grid[static_cast<size_t>((h * nb + qb) * nb + kb)]) {
          ASSERT_LT(e, cols.size()) << "h=" << h << " qb=" << qb;
          ASSERT_EQ(cols[e++], kb) << "h=" << h << " qb=" << qb;
        }
      ASSERT_EQ(e, cols.size()) << "h=" << h << " qb=" << qb;
      active += static_cast<int64_t>(e);
    }
  EXPECT_EQ(static_cast<int64_t>(m.csr().cols.size()), active);
}

TEST(BlockMask, BroadcastOverBatchAndHeads) {
  std::atomic<int> calls_outside_zero{0};
  auto pred = [&](int64_t b, int64_t h, int64_t q, int64_t kv) {
    if (b != 0 || h != 0) ++calls_outside_zero;
    return (q + kv) % 3 != 0;
  };
  const BlockMask m = BlockMask::from_predicate(pred, 1, 1, 40, 50, 16, 16);
  EXPECT_EQ(calls_outside_zero.load(), 0) << "a broadcast axis is evaluated at index 0 only";
  EXPECT_EQ(m.batch(), 1);
  EXPECT_EQ(m.heads(), 1);
  for (int64_t qb = 0; qb < m.num_q_blocks(); ++qb) {
    auto a = m.kv_blocks(0, 0, qb);
    auto b = m.kv_blocks(5, 31, qb);
    EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), std::vector<int32_t>(b.begin(), b.end()));
  }
  EXPECT_EQ(m.keeps(7, 9, 3, 4), pred(0, 0, 3, 4));

  // Broadcast over heads only: batch is indexed, heads folded.
  auto per_batch = [](int64_t b, int64_t, int64_t q, int64_t kv) { return b == 0 ? kv <= q : kv >= q; };
  const BlockMask mb = BlockMask::from_predicate(per_batch, 2, 1, 20, 20, 8, 8);
  for (int64_t h : {0, 3, 11}) {
    EXPECT_TRUE(mb.keeps(0, h, 10, 2));
    EXPECT_FALSE(mb.keeps(1, h, 10, 2));
  }
  EXPECT_THROW(mb.kv_blocks(2, 0, 0), Error) << "batch 2 is outside a batch-2 mask";
}

TEST(BlockMask, EmptyRowsAndEmptyMask) {
  // Query rows 16..31 keep nothing: their block row is empty.
  auto pred = [](int64_t, int64_t, int64_t q, int64_t kv) { return (q < 16 || q >= 32) && kv % 5 == 0; };
  const BlockMask m = BlockMask::from_predicate(pred, 1, 2, 48, 40, 16, 16);
  for (int64_t h = 0; h < 2; ++h) {
    EXPECT_EQ(m.kv_blocks(0, h, 0).size(), 3u);
    EXPECT_TRUE(m.kv_blocks(0, h, 1).empty());
    EXPECT_TRUE(m.full_flags(0, h, 1).empty());
    EXPECT_EQ(m.kv_blocks(0, h, 2).size(), 3u);
  }
  expect_keeps_matches(m, pred, 1, 2);

  auto none = [](int64_t, int64_t, int64_t, int64_t) { return false; };
  const BlockMask e = BlockMask::from_predicate(none, 2, 2, 33, 33, 16, 16);
  EXPECT_DOUBLE_EQ(e.density(), 0.0);
  for (int64_t qb = 0; qb < e.num_q_blocks(); ++qb) EXPECT_TRUE(e.kv_blocks(1, 1, qb).empty());
  EXPECT_FALSE(e.keeps(1, 1, 0, 0));
}

TEST(BlockMask, OddLengthsWithPartialLastBlocks) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    for (int64_t nq : {1, 17, 129})
      for (int64_t nk : {1, 17, 129}) {
        SCOPED_TRACE(::testing::Message() << "nq=" << nq << " nk=" << nk);
        const double p = 0.2 + 0.6 * cell_hash(seed, 99, 0, nq, nk);
        auto pred = [&](int64_t b, int64_t h, int64_t q, int64_t kv) {
          // Mix a structured (banded) rule with random cells so blocks come out in all three
          // states: inactive, partial and full.
          const int64_t d = q - kv;
          if (d > 40 || d < -40) return false;
          if ((q / 16 + kv / 16) % 4 == 0) return true;
          return cell_hash(seed, b, h, q, kv) < p;
        };
        const BlockMask m = BlockMask::from_predicate(pred, 2, 2, nq, nk, 16, 32);
        EXPECT_EQ(m.num_q_blocks(), (nq + 15) / 16);
        EXPECT_EQ(m.num_kv_blocks(), (nk + 31) / 32);
        expect_keeps_matches(m, pred, 2, 2);
        // full flags agree with the cells: a full block keeps all its in-range cells.
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t qb = 0; qb < m.num_q_blocks(); ++qb) {
              auto cols = m.kv_blocks(b, h, qb);
              auto full = m.full_flags(b, h, qb);
              for (size_t e = 0; e < cols.size(); ++e) {
                bool all = true, any = false;
                for (int64_t q = qb * 16; q < std::min<int64_t>(nq, qb * 16 + 16); ++q)
                  for (int64_t kv = cols[e] * 32; kv < std::min<int64_t>(nk, cols[e] * 32 + 32); ++kv) {
                    const bool k = pred(b, h, q, kv);
                    all = all && k;
                    any = any || k;
                  }
                EXPECT_TRUE(any) << "an active block keeps some cell";
                EXPECT_EQ(full[e] != 0, all);
              }
            }
      }
  }
}

TEST(BlockMask, KeepAllWithCutLastBlockIsFull) {
  auto all = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  const BlockMask m = BlockMask::from_predicate(all, 1, 1, 17, 129, 16, 64);
  for (int64_t qb = 0; qb < m.num_q_blocks(); ++qb) {
    auto full = m.full_flags(0, 0, qb);
    ASSERT_EQ(full.size(), 3u);
    for (auto f : full) EXPECT_EQ(f, 1);
  }
  EXPECT_DOUBLE_EQ(m.density(), 1.0);
  EXPECT_FALSE(m.keeps(0, 0, 17, 0)) << "cells beyond the lengths are never kept";
  EXPECT_FALSE(m.keeps(0, 0, 0, 129));
}

TEST(BlockMask, DefaultBlockSizesAndLargeBlocks) {
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const BlockMask m = BlockMask::from_predicate(causal, 1, 1, 300, 300);
  EXPECT_EQ(m.block_q(), 128);
  EXPECT_EQ(m.block_k(), 128);
  EXPECT_EQ(m.num_q_blocks(), 3);
  expect_keeps_matches(m, causal, 1, 1);
}

TEST(BlockMask, ZeroLengths) {
  auto all = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  const BlockMask a = BlockMask::from_predicate(all, 1, 1, 0, 10, 4, 4);
  EXPECT_EQ(a.num_q_blocks(), 0);
  EXPECT_DOUBLE_EQ(a.density(), 0.0);
  const BlockMask b = BlockMask::from_predicate(all, 1, 1, 10, 0, 4, 4);
  EXPECT_EQ(b.num_kv_blocks(), 0);
  EXPECT_TRUE(b.kv_blocks(0, 0, 2).empty());
  EXPECT_FALSE(b.keeps(0, 0, 0, 0));
  const BlockMask c = BlockMask::from_dense(nullptr, 0, 4, 10, 10, 4, 4);
  EXPECT_DOUBLE_EQ(c.density(), 0.0);
}

TEST(BlockMask, RejectsBadArguments) {
  auto all = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  const uint8_t grid[4] = {1, 1, 1, 1};
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate(all, 1, 1, 8, 8, 0, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate(all, 1, 1, 8, 8, 4, -1); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate(all, 1, 1, -1, 8, 4, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate(all, 1, 1, 8, -8, 4, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate(all, -1, 1, 8, 8, 4, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_predicate({}, 1, 1, 8, 8, 4, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_dense(grid, 1, 1, 8, 8, 0, 4); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { BlockMask::from_dense(nullptr, 1, 1, 8, 8, 4, 4); }), ErrorCode::Shape);
  try {
    BlockMask::from_predicate(all, 1, 1, 8, 8, 0, 4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block sizes must be >= 1"), std::string::npos) << e.what();
  }
  const BlockMask m = BlockMask::from_dense(grid, 1, 1, 8, 8, 4, 4);
  EXPECT_THROW(m.kv_blocks(0, 0, 2), Error);
  EXPECT_THROW(m.full_flags(0, 0, -1), Error);
}

TEST(BlockMask, PredicateExceptionsPropagate) {
  auto bad = [](int64_t, int64_t, int64_t q, int64_t) -> bool {
    if (q == 37) throw std::runtime_error("predicate failed at q=37");
    return true;
  };
  try {
    BlockMask::from_predicate(bad, 1, 4, 64, 64, 8, 8);
    FAIL() << "expected the predicate's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "predicate failed at q=37");
  }
}

}  // namespace
}  // namespace attnfuse

namespace attnfuse {
namespace {

// The state a coarse block must have, from the cells of the fine mask under it.
BlockMask::BlockKind expected_kind(const BlockMask& fine, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0,
                                   int64_t k1) {
  bool any = false, all = true;
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t kv = k0; kv < k1; ++kv) {
      const bool kept = fine.keeps(b, h, q, kv);
      any |= kept;
      all &= kept;
    }
  return !any ? BlockMask::BlockKind::Inactive : (all ? BlockMask::BlockKind::Full : BlockMask::BlockKind::Partial);
}

TEST(BlockMask, CoarsenedKeepsTheSameCellsInTileSizedBlocks) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    // Fine blocks of three kinds: from a grid (every active block full), and from a predicate
    // with partial blocks (a band plus random cells), over odd lengths and a broadcast head axis.
    const int64_t B = 2, H = 3, nq = 301, nk = 419;
    std::vector<uint8_t> grid(static_cast<size_t>(B * H * 10 * 14));
    for (auto& g : grid) g = rng() % 3 == 0;
    const BlockMask from_grid = BlockMask::from_dense(grid.data(), B, H, nq, nk, 32, 32);
    auto band = [seed](int64_t, int64_t, int64_t q, int64_t kv) {
      return (q - kv < 70 && kv - q < 40) || cell_hash(seed, 0, 0, q, kv) < 0.02;
    };
    const BlockMask from_pred = BlockMask::from_predicate(band, B, 1, nq, nk, 16, 32);
    for (const BlockMask* fine : {&from_grid, &from_pred})
      for (auto [cq, ck] : {std::pair{64, 64}, std::pair{128, 32}, std::pair{32, 128}, std::pair{128, 128}}) {
        if (cq % fine->block_q() != 0 || ck % fine->block_k() != 0) continue;
        SCOPED_TRACE(::testing::Message() << fine->block_q() << "x" << fine->block_k() << " -> " << cq << "x" << ck);
        const BlockMask coarse = fine->coarsened(cq, ck);
        ASSERT_EQ(coarse.block_q(), cq);
        ASSERT_EQ(coarse.block_k(), ck);
        ASSERT_EQ(coarse.batch(), fine->batch());
        ASSERT_EQ(coarse.heads(), fine->heads());
        expect_keeps_matches(coarse, [fine](int64_t b, int64_t h, int64_t q, int64_t kv) { return fine->keeps(b, h, q, kv); },
                             coarse.batch(), coarse.heads());
        // Block states: full exactly where every cell under it is kept, listed exactly where one is.
        for (int64_t b = 0; b < coarse.batch(); ++b)
          for (int64_t h = 0; h < coarse.heads(); ++h)
            for (int64_t qb = 0; qb < coarse.num_q_blocks(); ++qb) {
              const auto cols = coarse.kv_blocks(b, h, qb);
              const auto full = coarse.full_flags(b, h, qb);
              size_t e = 0;
              for (int64_t kb = 0; kb < coarse.num_kv_blocks(); ++kb) {
                const auto want = expected_kind(*fine, b, h, qb * cq, std::min(nq, (qb + 1) * cq), kb * ck,
                                                std::min(nk, (kb + 1) * ck));
                const bool listed = e < cols.size() && cols[e] == kb;
                ASSERT_EQ(listed, want != BlockMask::BlockKind::Inactive) << "qb=" << qb << " kb=" << kb;
                if (listed) {
                  ASSERT_EQ(full[e++] != 0, want == BlockMask::BlockKind::Full) << "qb=" << qb << " kb=" << kb;
                }
              }
            }
      }
  }
  const BlockMask m = BlockMask::from_predicate([](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; }, 1, 1,
                                                100, 100, 32, 32);
  EXPECT_THROW(m.coarsened(48, 64), Error);  // not a multiple of 32
  EXPECT_THROW(m.coarsened(0, 64), Error);
  EXPECT_EQ(m.coarsened(32, 32).csr().cols.size(), m.csr().cols.size());
}

}  // namespace
}  // namespace attnfuse
