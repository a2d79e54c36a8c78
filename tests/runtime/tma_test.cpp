// The geometry of the Hopper kernel's K/V tensor maps (runtime/tma.hpp): what the copy engine is
// handed, and which tensors fall back to cp.async. No GPU needed (the driver call itself runs in
// the GPU suite).
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/tma.hpp"

namespace attnfuse::runtime {
namespace {

alignas(16) unsigned char buffer[64];

TEST(TmaGeometry, ContiguousBhsd) {
  // [B=2, H=8, N=1000, D=128] contiguous: element strides (H*N*D, N*D, D).
  const long long strides[3] = {8 * 1000 * 128, 1000 * 128, 128};
  const auto g = tile_map_geometry(buffer, 2, 8, 1000, 128, strides, 128);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->dims[0], 128u);
  EXPECT_EQ(g->dims[1], 1000u);
  EXPECT_EQ(g->dims[2], 8u);
  EXPECT_EQ(g->dims[3], 2u);
  EXPECT_EQ(g->byte_strides[0], 256u);
  EXPECT_EQ(g->byte_strides[1], 256u * 1000);
  EXPECT_EQ(g->byte_strides[2], 256u * 1000 * 8);
  EXPECT_EQ(g->box[0], 64u);  // 128 bytes: the swizzle span
  EXPECT_EQ(g->box[1], 128u);
  EXPECT_EQ(g->box[2], 1u);
  EXPECT_EQ(g->box[3], 1u);
}

TEST(TmaGeometry, BshdStridesAndUnitDims) {
  // BSHD [B=1, N=777, H=4, D=64] viewed as [B, H, N, D]: row stride H*D, head stride D. B = 1
  // takes the packed stride whatever the caller passed (here 0).
  const long long strides[3] = {0, 64, 4 * 64};
  const auto g = tile_map_geometry(buffer, 1, 4, 777, 64, strides, 64);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->byte_strides[0], 4u * 64 * 2);
  EXPECT_EQ(g->byte_strides[1], 64u * 2);
  EXPECT_EQ(g->byte_strides[2], g->byte_strides[1] * 4);  // packed over the head dim
}

TEST(TmaGeometry, RefusesWhatTheCopyEngineCannotTake) {
  const long long strides[3] = {8 * 100 * 128, 100 * 128, 128};
  EXPECT_FALSE(tile_map_geometry(buffer + 8, 2, 8, 100, 128, strides, 128)) << "base not 16-byte aligned";
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 100, 96, strides, 128)) << "D not whole 64-element boxes";
  const long long odd_rows[3] = {8 * 100 * 132, 100 * 132, 132};  // 264-byte rows: not a multiple of 16
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 100, 128, odd_rows, 128));
  const long long broadcast_heads[3] = {100 * 128, 0, 128};
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 100, 128, broadcast_heads, 128)) << "a zero stride over 8 heads";
  const long long huge[3] = {(1ll << 40), 100 * 128, 128};
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 100, 128, huge, 128)) << "strides must stay below 2^40 bytes";
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 0, 128, strides, 128)) << "no rows";
  EXPECT_FALSE(tile_map_geometry(buffer, 2, 8, 100, 128, strides, 512)) << "a box holds at most 256 rows";
}

}  // namespace
}  // namespace attnfuse::runtime
