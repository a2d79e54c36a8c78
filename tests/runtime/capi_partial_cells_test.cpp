// attnfuse_block_mask_from_partial_cells through the shared library: a grid of block kinds and the
// packed cells of its partial blocks, no callback, run as the C++ mask of the same cells does (same
// bits), whatever the bytes past the lengths hold; every error as a status code and a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attnfuse.h"
#include "attnfuse/block_mask.hpp"
#include "runtime/capi_block_rule.hpp"
#include "runtime/capi_views.hpp"

namespace {

using capi_test::exact_kinds;
using capi_test::Problem;
using capi_test::Rule;
using capi_test::same_bits;

// The slabs of kinds' partial blocks in its C order, [partial, bq, bk], as an array library lays
// them out: whole blocks, with the cells past the lengths set to `past` (nonzero: they must not be
// read as kept).
std::vector<uint8_t> pack_cells(const Rule& rule, const std::vector<uint8_t>& kinds, int64_t heads, int64_t n, int bq,
                                int bk, uint8_t past) {
  const int64_t nqb = (n + bq - 1) / bq, nkb = (n + bk - 1) / bk;
  std::vector<uint8_t> cells;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t qb = 0; qb < nqb; ++qb)
      for (int64_t kb = 0; kb < nkb; ++kb) {
        if (kinds[static_cast<size_t>((h * nqb + qb) * nkb + kb)] != ATTNFUSE_BLOCK_PARTIAL) continue;
        for (int64_t q = qb * bq; q < (qb + 1) * bq; ++q)
          for (int64_t kv = kb * bk; kv < (kb + 1) * bk; ++kv)
            cells.push_back(q >= n || kv >= n ? past : rule.keep(h, q, kv) ? uint8_t(1 + (q + kv) % 200) : 0);
      }
  return cells;
}

TEST(CApiPartialCells, PackedCellsRunAsTheCppMaskOfTheSameCells) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const Rule rule{seed};
  Problem p(seed);
  for (auto [bq, bk] : {std::pair{32, 24}, {7, 64}, {16, 16}, {64, 7}}) {
    SCOPED_TRACE(testing::Message() << "blocks " << bq << "x" << bk);
    int partial = 0;
    std::vector<uint8_t> kinds = exact_kinds(rule, Problem::Hq, Problem::N, bq, bk, &partial);
    ASSERT_GT(partial, 0);
    std::vector<uint8_t> cells = pack_cells(rule, kinds, Problem::Hq, Problem::N, bq, bk, 0xFF);
    attnfuse_block_mask* mask = nullptr;
    ASSERT_EQ(attnfuse_block_mask_from_partial_cells(kinds.data(), cells.data(), partial, 1, Problem::Hq, Problem::N,
                                                     Problem::N, bq, bk, &mask),
              ATTNFUSE_OK)
        << attnfuse_last_error();
    kinds.assign(kinds.size(), 0xEE), cells.assign(cells.size(), 0xEE);  // read during the call only
    const auto want = attnfuse::BlockMask::from_predicate(
        [&rule](int64_t, int64_t h, int64_t q, int64_t kv) { return rule.keep(h, q, kv); }, 1, Problem::Hq,
        Problem::N, Problem::N, bq, bk);
    const std::vector<float> o_want = p.run_cpp(want);
    EXPECT_TRUE(same_bits(p.run_c(mask), o_want));
    attnfuse_block_mask_free(mask);

    // Every block called partial (full and empty ones included): stored by what its cells say.
    std::vector<uint8_t> all(kinds.size(), ATTNFUSE_BLOCK_PARTIAL);
    cells = pack_cells(rule, all, Problem::Hq, Problem::N, bq, bk, 0x01);
    ASSERT_EQ(attnfuse_block_mask_from_partial_cells(all.data(), cells.data(), static_cast<int64_t>(all.size()), 1,
                                                     Problem::Hq, Problem::N, Problem::N, bq, bk, &mask),
              ATTNFUSE_OK)
        << attnfuse_last_error();
    EXPECT_TRUE(same_bits(p.run_c(mask), o_want)) << "every block partial";
    attnfuse_block_mask_free(mask);
  }
}

// A heads axis of 1 broadcasts: head 0's kinds and cells serve every head of the call.
TEST(CApiPartialCells, OneHeadBroadcasts) {
  const Rule rule{11};
  Problem p(12);
  int partial = 0;
  const std::vector<uint8_t> kinds = exact_kinds(rule, 1, Problem::N, 24, 40, &partial);
  const std::vector<uint8_t> cells = pack_cells(rule, kinds, 1, Problem::N, 24, 40, 0x80);
  attnfuse_block_mask* mask = nullptr;
  ASSERT_EQ(attnfuse_block_mask_from_partial_cells(kinds.data(), cells.data(), partial, 1, 1, Problem::N, Problem::N,
                                                   24, 40, &mask),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  const auto want = attnfuse::BlockMask::from_predicate(
      [&rule](int64_t, int64_t, int64_t q, int64_t kv) { return rule.keep(0, q, kv); }, 1, 1, Problem::N, Problem::N,
      24, 40);
  EXPECT_TRUE(same_bits(p.run_c(mask), p.run_cpp(want)));
  attnfuse_block_mask_free(mask);
}

TEST(CApiPartialCells, ErrorsAreStatusCodes) {
  const std::string who = "attnfuse_block_mask_from_partial_cells: ";
  std::vector<uint8_t> kinds(4 * 4, ATTNFUSE_BLOCK_FULL);
  kinds[3] = kinds[9] = ATTNFUSE_BLOCK_PARTIAL;
  std::vector<uint8_t> cells(2 * 16 * 16, 1);
  attnfuse_block_mask* mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
  const auto expect_error = [&](int64_t num_partial, const uint8_t* k, const uint8_t* c, const std::string& says) {
    mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
    EXPECT_EQ(attnfuse_block_mask_from_partial_cells(k, c, num_partial, 1, 1, 64, 64, 16, 16, &mask),
              ATTNFUSE_ERROR_INVALID_ARGUMENT)
        << says;
    EXPECT_EQ(mask, nullptr) << "out is cleared on error";
    EXPECT_EQ(std::string(attnfuse_last_error()), who + says);
  };
  expect_error(3, kinds.data(), cells.data(), "kinds holds 2 partial blocks, num_partial is 3");
  expect_error(1, kinds.data(), cells.data(), "kinds holds 2 partial blocks, num_partial is 1");
  expect_error(2, kinds.data(), nullptr, "the cells pointer is null");
  expect_error(2, nullptr, cells.data(), "the kinds pointer is null");
  kinds[14] = 7;
  expect_error(2, kinds.data(), cells.data(), "kinds[14] is 7, not 0 (inactive), 1 (full) or 2 (partial)");
  kinds[14] = ATTNFUSE_BLOCK_INACTIVE;
  ASSERT_EQ(attnfuse_block_mask_from_partial_cells(kinds.data(), cells.data(), 2, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_OK);
  EXPECT_STREQ(attnfuse_last_error(), "") << "a success clears the last error";
  attnfuse_block_mask_free(mask);
  // No partial block: cells may be NULL; no block at all: kinds may be NULL too.
  kinds[3] = kinds[9] = ATTNFUSE_BLOCK_INACTIVE;
  ASSERT_EQ(attnfuse_block_mask_from_partial_cells(kinds.data(), nullptr, 0, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_OK);
  attnfuse_block_mask_free(mask);
  ASSERT_EQ(attnfuse_block_mask_from_partial_cells(nullptr, nullptr, 0, 1, 1, 0, 0, 16, 16, &mask), ATTNFUSE_OK);
  attnfuse_block_mask_free(mask);
  // Shapes as from_dense: the grid is not read.
  EXPECT_EQ(attnfuse_block_mask_from_partial_cells(nullptr, nullptr, 5, 1, 1, 64, -1, 16, 16, &mask),
            ATTNFUSE_ERROR_SHAPE);
  EXPECT_EQ(attnfuse_block_mask_from_partial_cells(nullptr, nullptr, 5, 1, 1, 64, 64, 16, 0, &mask),
            ATTNFUSE_ERROR_SHAPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("block sizes must be >= 1"), std::string::npos);
  EXPECT_EQ(attnfuse_block_mask_from_partial_cells(kinds.data(), nullptr, 0, 1, 1, 64, 64, 16, 16, nullptr),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
}

}  // namespace
