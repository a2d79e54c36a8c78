// The CUDA backend's environment knobs (runtime/cuda_knobs.hpp): their parsers, no GPU needed.
#include <gtest/gtest.h>

#include "attnfuse/error.hpp"
#include "runtime/cuda_knobs.hpp"

namespace attnfuse::runtime {
namespace {

TEST(CudaKnobs, UnsetOrEmptyMeansNoOverride) {
  EXPECT_FALSE(parse_tile_knob(nullptr));
  EXPECT_FALSE(parse_tile_knob(""));
  EXPECT_FALSE(parse_decode_tile_knob(nullptr));
  EXPECT_FALSE(parse_wgmma_tile_knob(""));
  EXPECT_FALSE(parse_decode_splits_knob(nullptr));
  EXPECT_FALSE(parse_decode_splits_knob(""));
  EXPECT_FALSE(parse_paged_deep_max_tiles_knob(nullptr));
  EXPECT_FALSE(parse_paged_deep_max_tiles_knob(""));
  EXPECT_FALSE(parse_tma_l2_promotion_knob(nullptr));  // the runtime's per-kernel choice
  EXPECT_FALSE(parse_tma_l2_promotion_knob(""));
  EXPECT_FALSE(parse_early_l2_knob(nullptr));  // kEarlyL2DefaultTiles
  EXPECT_FALSE(parse_early_l2_knob(""));
}

TEST(CudaKnobs, WellFormedValuesBecomeTiles) {
  const auto t = parse_tile_knob("128,64,8");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->block_q, 128);
  EXPECT_EQ(t->block_k, 64);
  EXPECT_EQ(t->num_warps, 8);
  EXPECT_EQ(t->stages, 2);
  EXPECT_FALSE(t->wgmma);
  const auto d = parse_decode_tile_knob("16,64,1,4");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->block_q, 16);
  EXPECT_EQ(d->stages, 4);
  EXPECT_TRUE(d->pack_gqa);
  EXPECT_EQ(d->key_warps, 1);
  const auto narrow = parse_decode_tile_knob("16,128,4,3,4");  // the narrow tile: 4 warps share 16 rows
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->key_warps, 4);
  EXPECT_EQ(narrow->block_k, 128);
  EXPECT_EQ(narrow->stages, 3);
  const auto two = parse_wgmma_tile_knob("64,2");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->block_k, 64);
  EXPECT_EQ(two->min_blocks, 2);
  EXPECT_EQ(two->stages, 0);  // the tile pass's
  const auto three = parse_wgmma_tile_knob("128,2,3");
  ASSERT_TRUE(three);
  EXPECT_EQ(three->block_k, 128);
  EXPECT_EQ(three->min_blocks, 2);
  EXPECT_EQ(three->stages, 3);
  EXPECT_EQ(three->block_q, 0);  // the tile pass's
  const auto rows = parse_wgmma_tile_knob("128,1,4,192");
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->stages, 4);
  EXPECT_EQ(rows->block_q, 192);
  EXPECT_EQ(parse_decode_splits_knob("1"), 1);
  EXPECT_EQ(parse_decode_splits_knob("128"), 128);
  EXPECT_EQ(parse_paged_deep_max_tiles_knob("1"), 1);
  EXPECT_EQ(parse_paged_deep_max_tiles_knob("1000000"), 1000000);
  EXPECT_EQ(parse_tma_l2_promotion_knob("none"), 0);
  EXPECT_EQ(parse_tma_l2_promotion_knob("64"), 1);
  EXPECT_EQ(parse_tma_l2_promotion_knob("128"), 2);
  EXPECT_EQ(parse_tma_l2_promotion_knob("256"), 3);
  EXPECT_EQ(parse_early_l2_knob("0"), 0);  // no hints
  EXPECT_EQ(parse_early_l2_knob("1"), 1);
  EXPECT_EQ(parse_early_l2_knob("16"), 16);
}

TEST(CudaKnobs, MalformedValuesNameTheKnob) {
  auto refused = [](auto parse, const char* text, const char* knob) {
    try {
      parse(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find(knob), std::string::npos) << e.what();
    }
  };
  for (const char* bad : {"128,64", "128,64,8,", "128,64,8x", "100,64,8", "128,24,8", "128,64,0", "-128,64,8", "a,b,c"})
    refused(parse_tile_knob, bad, "ATTNFUSE_CUDA_TILE");
  for (const char* bad : {"16,64,1", "16,64,1,1", "16,40,1,2", "16,64,1,2,3", "16,64,4,2",
                          "16,64,4,2,3", "16,32,4,2,4", "16,64,4,2,4,", "16,64,4,2,0"})
    refused(parse_decode_tile_knob, bad, "ATTNFUSE_CUDA_DECODE_TILE");
  for (const char* bad :
       {"96,1", "64,0", "64,4", "64", "64,2,1", "64,2,5", "64,2,3,", "64,2,3,4", "64,2,3,256", "64,2,3,192,"})
    refused(parse_wgmma_tile_knob, bad, "ATTNFUSE_CUDA_WGMMA_TILE");
  for (const char* bad : {"0", "129", "-4", "8,", "8x", "x"})
    refused(parse_decode_splits_knob, bad, "ATTNFUSE_CUDA_DECODE_SPLITS");
  for (const char* bad : {"0", "-1", "32,", "3x", "x"})
    refused(parse_paged_deep_max_tiles_knob, bad, "ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES");
  for (const char* bad : {"0", "32", "512", "256 ", "None", "L2_256B"})
    refused(parse_tma_l2_promotion_knob, bad, "ATTNFUSE_CUDA_TMA_L2_PROMOTE");
  for (const char* bad : {"-1", "17", "2,", "1x", "on", " "})
    refused(parse_early_l2_knob, bad, "ATTNFUSE_CUDA_EARLY_L2");
  for (const char* bad : {"2", "on", "ALL", "1 "})
    refused(parse_sparse_64_rows_knob, bad, "ATTNFUSE_CUDA_SPARSE_64_ROWS");
}

TEST(CudaKnobs, SparseSixtyFourRowsIsAutoOffOrAll) {
  EXPECT_EQ(parse_sparse_64_rows_knob(nullptr), Sparse64Rows::Auto);
  EXPECT_EQ(parse_sparse_64_rows_knob(""), Sparse64Rows::Auto);
  EXPECT_EQ(parse_sparse_64_rows_knob("1"), Sparse64Rows::Auto);
  EXPECT_EQ(parse_sparse_64_rows_knob("0"), Sparse64Rows::Off);
  EXPECT_EQ(parse_sparse_64_rows_knob("all"), Sparse64Rows::All);
}

}  // namespace
}  // namespace attnfuse::runtime
