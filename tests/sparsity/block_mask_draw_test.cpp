// Tests of BlockMask::to_string: the exact drawing of small masks, the header, downsampling of
// large ones (strongest state wins), choosing (b, h), and bad arguments.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "attnfuse/block_mask.hpp"
#include "attnfuse/error.hpp"

namespace attnfuse {
namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(BlockMaskDraw, SmallCausalMaskExactly) {
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const BlockMask m = BlockMask::from_predicate(causal, 1, 1, 256, 256, 64, 64);
  EXPECT_EQ(m.to_string(),
            "BlockMask b=0 h=0 (batch 1, heads 1): q_len 256, kv_len 256, block 64x64 (grid 4 x 4), "
            "density 62.5% (6 full '#', 4 partial '+', 6 inactive '.')\n"
            "+...\n"
            "#+..\n"
            "##+.\n"
            "###+\n");
}

TEST(BlockMaskDraw, DenseGridWithOddLengths) {
  // 3 x 5 blocks (the last ones cut by the lengths); dense grids only have full blocks.
  const uint8_t grid[15] = {1, 0, 0, 0, 1,  //
                            0, 1, 1, 0, 0,  //
                            0, 0, 0, 0, 0};
  const BlockMask m = BlockMask::from_dense(grid, 1, 1, 40, 70, 16, 16);
  const auto lines = lines_of(m.to_string());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("q_len 40, kv_len 70, block 16x16 (grid 3 x 5)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("density 26.7% (4 full '#', 0 partial '+', 11 inactive '.')"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "#...#");
  EXPECT_EQ(lines[2], ".##..");
  EXPECT_EQ(lines[3], ".....") << "a row without active blocks is drawn, not skipped";
}

TEST(BlockMaskDraw, ChoosesBatchAndHeadAndFoldsBroadcastAxes) {
  // Head h keeps only key block h.
  auto per_head = [](int64_t, int64_t h, int64_t, int64_t kv) { return kv / 8 == h; };
  const BlockMask m = BlockMask::from_predicate(per_head, 1, 3, 8, 24, 8, 8);
  EXPECT_EQ(lines_of(m.to_string()).back(), "#..");
  EXPECT_EQ(lines_of(m.to_string(0, 2)).back(), "..#");
  EXPECT_EQ(lines_of(m.to_string(7, 1)).back(), ".#.") << "batch 1 broadcasts: any b draws b = 0";
  EXPECT_NE(m.to_string(0, 2).find("b=0 h=2 (batch 1, heads 3)"), std::string::npos);
  EXPECT_THROW(m.to_string(0, 3), Error);
  EXPECT_THROW(m.to_string(0, -1), Error);
}

// A 128k causal mask has 1024 x 1024 blocks: drawn as 64 x 64 characters of 16 x 16 blocks each.
// Diagonal groups contain full blocks (below the diagonal), so they show '#', not '+'.
TEST(BlockMaskDraw, LargeMasksAreDownsampledToTheStrongestState) {
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  auto classify = [](int64_t, int64_t, int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
    if (k1 - 1 <= q0) return BlockMask::BlockKind::Full;
    if (k0 > q1 - 1) return BlockMask::BlockKind::Inactive;
    return BlockMask::BlockKind::Partial;
  };
  const BlockMask m = BlockMask::from_block_classifier(classify, causal, 1, 1, 131072, 131072);
  const auto lines = lines_of(m.to_string());
  ASSERT_EQ(lines.size(), 2u + 64u);
  EXPECT_NE(lines[0].find("grid 1024 x 1024"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("downsampled: one character = 16 x 16 blocks"), std::string::npos) << lines[1];
  for (size_t r = 0; r < 64; ++r) {
    const std::string& row = lines[2 + r];
    ASSERT_EQ(row.size(), 64u);
    EXPECT_EQ(row, std::string(r + 1, '#') + std::string(63 - r, '.')) << "row " << r;
  }

  // A group whose only active block is partial shows '+'; max_cells picks the size.
  auto lone = [](int64_t, int64_t, int64_t q, int64_t kv) { return q == 5 && kv == 200; };
  const auto small = lines_of(BlockMask::from_predicate(lone, 1, 1, 64, 256, 4, 4).to_string(0, 0, 8));
  ASSERT_EQ(small.size(), 2u + 8u);
  EXPECT_NE(small[1].find("one character = 2 x 8 blocks"), std::string::npos) << small[1];
  EXPECT_EQ(small[2], "......+.");
  for (size_t r = 3; r < small.size(); ++r) EXPECT_EQ(small[r], "........");
}

TEST(BlockMaskDraw, EmptyMasksAndBadArguments) {
  auto all = [](int64_t, int64_t, int64_t, int64_t) { return true; };
  const BlockMask z = BlockMask::from_predicate(all, 1, 1, 0, 100, 16, 16);
  EXPECT_EQ(lines_of(z.to_string()).size(), 1u) << "no query blocks: the header alone";
  EXPECT_NE(z.to_string().find("density 0%"), std::string::npos) << z.to_string();
  const BlockMask m = BlockMask::from_predicate(all, 2, 1, 16, 16, 16, 16);
  EXPECT_THROW(m.to_string(2, 0), Error);
  EXPECT_THROW(m.to_string(0, 0, 0), Error);
}

}  // namespace
}  // namespace attnfuse
