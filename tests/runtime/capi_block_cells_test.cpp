// attnfuse_block_mask_from_block_cells and _from_block_kinds through the shared library: masks given
// by C callbacks, one call per block of cells, run as the C++ mask of the same cells does (same
// bits), with a classifier callback, a grid of block kinds or neither; every error as a status
// code and a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "attnfuse/attnfuse.h"
#include "attnfuse/block_mask.hpp"
#include "attnfuse/program.hpp"
#include "runtime/capi_block_rule.hpp"
#include "runtime/capi_views.hpp"

namespace {

using capi_test::exact_kinds;
using capi_test::fill_rule;
using capi_test::Problem;
using capi_test::Rule;
using capi_test::same_bits;

// Says nothing it is sure of, in ways C allows: Partial, or values outside the enum.
int classify_unsure(void*, int64_t, int64_t, int64_t q0, int64_t, int64_t kv0, int64_t) {
  return (q0 + kv0) % 3 == 0 ? ATTNFUSE_BLOCK_PARTIAL : (q0 + kv0) % 3 == 1 ? 7 : -1;
}

// Calls every block wholly above the diagonal Inactive. The rule's sprinkle keeps cells there, so
// this classifier contradicts fill; what it says is believed, and those cells are dropped.
int classify_above_diagonal_empty(void*, int64_t, int64_t, int64_t, int64_t q1, int64_t kv0, int64_t) {
  return kv0 > q1 - 1 ? ATTNFUSE_BLOCK_INACTIVE : ATTNFUSE_BLOCK_PARTIAL;
}

TEST(CApiBlockCells, CallbackMasksRunAsTheCppMaskOfTheSameCells) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rule rule{seed};
  Problem p(seed);
  for (auto [bq, bk] : {std::pair{16, 16}, {32, 24}, {7, 64}}) {
    SCOPED_TRACE(testing::Message() << "blocks " << bq << "x" << bk);
    const auto want = attnfuse::BlockMask::from_predicate(
        [&rule](int64_t, int64_t h, int64_t q, int64_t kv) { return rule.keep(h, q, kv); }, 1, Problem::Hq,
        Problem::N, Problem::N, bq, bk);
    const std::vector<float> o_want = p.run_cpp(want);
    for (attnfuse_block_classify_fn classify : {attnfuse_block_classify_fn{nullptr}, &classify_unsure}) {
      attnfuse_block_mask* mask = nullptr;
      ASSERT_EQ(attnfuse_block_mask_from_block_cells(classify, fill_rule, &rule, 1, Problem::Hq, Problem::N,
                                                     Problem::N, bq, bk, &mask),
                ATTNFUSE_OK)
          << attnfuse_last_error();
      EXPECT_TRUE(same_bits(p.run_c(mask), o_want)) << (classify ? "unsure classifier" : "no classifier");
      attnfuse_block_mask_free(mask);
    }
  }
  // A classifier is believed: blocks it calls Inactive lose the sprinkle's cells above the diagonal,
  // which is the causal-window-only mask's output.
  attnfuse_block_mask* mask = nullptr;
  ASSERT_EQ(attnfuse_block_mask_from_block_cells(classify_above_diagonal_empty, fill_rule, &rule, 1, Problem::Hq,
                                                 Problem::N, Problem::N, 16, 16, &mask),
            ATTNFUSE_OK);
  const auto believed = attnfuse::BlockMask::from_predicate(
      [&rule](int64_t, int64_t h, int64_t q, int64_t kv) { return kv / 16 <= q / 16 && rule.keep(h, q, kv); }, 1,
      Problem::Hq, Problem::N, Problem::N, 16, 16);
  const std::vector<float> o_believed = p.run_c(mask);
  EXPECT_TRUE(same_bits(o_believed, p.run_cpp(believed)));
  const auto every_cell = attnfuse::BlockMask::from_predicate(
      [&rule](int64_t, int64_t h, int64_t q, int64_t kv) { return rule.keep(h, q, kv); }, 1, Problem::Hq, Problem::N,
      Problem::N, 16, 16);
  EXPECT_FALSE(same_bits(o_believed, p.run_cpp(every_cell))) << "the dropped cells change the output";
  attnfuse_block_mask_free(mask);
}

struct CountingRule {
  Rule rule;
  std::atomic<int> calls{0};
};

int fill_counting(void* user, int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, uint8_t* keep) {
  auto* c = static_cast<CountingRule*>(user);
  ++c->calls;
  return fill_rule(&c->rule, b, h, q0, q1, kv0, kv1, keep);
}

// A grid of block kinds (what an array library computes at once) with fill called on Partial
// blocks only gives the C++ mask of the rule.
TEST(CApiBlockCells, KindGridsFillOnlyPartialBlocks) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  CountingRule counting{Rule{seed}};
  const Rule& rule = counting.rule;
  Problem p(seed);
  const int bq = 32, bk = 24;
  const int64_t nqb = (Problem::N + bq - 1) / bq, nkb = (Problem::N + bk - 1) / bk;
  int partial = 0;
  std::vector<uint8_t> kinds = exact_kinds(rule, Problem::Hq, Problem::N, bq, bk, &partial);
  ASSERT_GT(partial, 0);
  attnfuse_block_mask* mask = nullptr;
  ASSERT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), fill_counting, &counting, 1, Problem::Hq, Problem::N,
                                                 Problem::N, bq, bk, &mask),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  kinds.assign(kinds.size(), 0xEE);  // read during the call only
  EXPECT_EQ(counting.calls.load(), partial);
  const auto want = attnfuse::BlockMask::from_predicate(
      [&rule](int64_t, int64_t h, int64_t q, int64_t kv) { return rule.keep(h, q, kv); }, 1, Problem::Hq, Problem::N,
      Problem::N, bq, bk);
  EXPECT_TRUE(same_bits(p.run_c(mask), p.run_cpp(want)));
  attnfuse_block_mask_free(mask);

  // No Partial block: fill may be NULL, and the grid is a from_dense grid.
  std::vector<uint8_t> grid(static_cast<size_t>(nqb * nkb));
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = (i * 7) % 3 == 0 ? ATTNFUSE_BLOCK_FULL : ATTNFUSE_BLOCK_INACTIVE;
  ASSERT_EQ(attnfuse_block_mask_from_block_kinds(grid.data(), nullptr, nullptr, 1, 1, Problem::N, Problem::N, bq, bk,
                                                 &mask),
            ATTNFUSE_OK)
      << attnfuse_last_error();
  EXPECT_TRUE(same_bits(p.run_c(mask), p.run_cpp(attnfuse::BlockMask::from_dense(grid.data(), 1, 1, Problem::N,
                                                                                  Problem::N, bq, bk))));
  attnfuse_block_mask_free(mask);
}

TEST(CApiBlockCells, KindGridErrorsAreStatusCodes) {
  Rule rule{2};
  std::vector<uint8_t> kinds(4 * 4, ATTNFUSE_BLOCK_PARTIAL);
  attnfuse_block_mask* mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
  kinds[5] = 3;
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), fill_rule, &rule, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mask, nullptr);
  EXPECT_NE(std::string(attnfuse_last_error()).find("kinds[5] is 3"), std::string::npos) << attnfuse_last_error();
  kinds[5] = ATTNFUSE_BLOCK_PARTIAL;
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), nullptr, nullptr, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnfuse_last_error()).find("fill must not be NULL when a block is partial"),
            std::string::npos)
      << attnfuse_last_error();
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(nullptr, fill_rule, &rule, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnfuse_last_error()).find("kinds pointer is null"), std::string::npos);
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(nullptr, nullptr, nullptr, 1, 1, 0, 0, 16, 16, &mask), ATTNFUSE_OK)
      << "no blocks: nothing to read";
  attnfuse_block_mask_free(mask);
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), fill_rule, &rule, 1, 1, 64, -1, 16, 16, &mask),
            ATTNFUSE_ERROR_SHAPE);
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), fill_rule, &rule, 1, 1, 64, 64, 16, 0, &mask),
            ATTNFUSE_ERROR_SHAPE);
  EXPECT_EQ(attnfuse_block_mask_from_block_kinds(kinds.data(), fill_rule, &rule, 1, 1, 64, 64, 16, 16, nullptr),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
}

int fill_fails_at_row_32(void*, int64_t, int64_t, int64_t q0, int64_t, int64_t, int64_t, uint8_t* keep) {
  keep[0] = 1;
  return q0 == 32 ? 3 : 0;
}

TEST(CApiBlockCells, ErrorsAreStatusCodes) {
  Rule rule{1};
  attnfuse_block_mask* mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
  EXPECT_EQ(attnfuse_block_mask_from_block_cells(nullptr, fill_rule, &rule, 1, 1, 64, 64, 16, 16, nullptr),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attnfuse_block_mask_from_block_cells(nullptr, nullptr, &rule, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mask, nullptr) << "out is cleared on error";
  EXPECT_NE(std::string(attnfuse_last_error()).find("fill must not be NULL"), std::string::npos);

  mask = reinterpret_cast<attnfuse_block_mask*>(0x1);
  EXPECT_EQ(attnfuse_block_mask_from_block_cells(nullptr, fill_fails_at_row_32, nullptr, 1, 2, 100, 50, 16, 16,
                                                 &mask),
            ATTNFUSE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mask, nullptr);
  const std::string err = attnfuse_last_error();
  EXPECT_NE(err.find("fill returned 3 for the block at b=0 h="), std::string::npos) << err;
  EXPECT_NE(err.find("q0=32"), std::string::npos) << err;

  EXPECT_EQ(attnfuse_block_mask_from_block_cells(nullptr, fill_rule, &rule, 1, 1, 64, 64, 0, 16, &mask),
            ATTNFUSE_ERROR_SHAPE);
  EXPECT_NE(std::string(attnfuse_last_error()).find("block sizes must be >= 1"), std::string::npos);
  ASSERT_EQ(attnfuse_block_mask_from_block_cells(nullptr, fill_rule, &rule, 1, 1, 64, 64, 16, 16, &mask),
            ATTNFUSE_OK);
  EXPECT_STREQ(attnfuse_last_error(), "") << "a success clears the last error";
  attnfuse_block_mask_free(mask);
}

}  // namespace
