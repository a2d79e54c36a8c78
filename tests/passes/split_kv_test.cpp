// The split-KV choice (passes/split_kv.hpp) against a brute-force search of its cost model and
// the shapes the decode benchmark runs (H200: 132 SMs, 2 decode blocks per SM).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <thread>

#include "passes/split_kv.hpp"

namespace attnfuse::passes {
namespace {

int64_t model_cost(const SplitShape& s, int64_t n) {
  const int64_t cap = int64_t{s.sms} * s.blocks_per_sm;
  return ((s.key_tiles + n - 1) / n) * ((s.blocks * n + cap - 1) / cap);
}

TEST(SplitKv, DecodeShapesFillTheDevice) {
  // Llama-3-8B decode, B = 1: 8 KV heads, one packed tile each, KV 32k in 64-key tiles.
  const int s1 = choose_num_splits({8, 512, 132, 2});
  EXPECT_GE(8 * s1, 132 * 2 * 9 / 10) << "the split grid should fill ~a wave of resident blocks";
  EXPECT_LE(s1, kMaxSplits);
  // Llama-3-70B, B = 1, KV 32k: same grid of 8 blocks.
  EXPECT_EQ(choose_num_splits({8, 512, 132, 2}), s1);
  // B = 32 x 8 KV heads = 256 blocks: already ~a wave, no split.
  EXPECT_EQ(choose_num_splits({256, 512, 132, 2}), 1);
  // Prefill grids (thousands of blocks) never split.
  EXPECT_EQ(choose_num_splits({4096, 128, 132, 1}), 1);
}

TEST(SplitKv, ShortKeyAxesAreNotSplitBelowTwoTilesPerPart) {
  EXPECT_EQ(choose_num_splits({8, 1, 132, 2}), 1);
  EXPECT_EQ(choose_num_splits({8, 3, 132, 2}), 1);
  const int s = choose_num_splits({8, 10, 132, 2});
  EXPECT_GE(s, 2);
  EXPECT_LE(s, 5);  // at least 2 key tiles per part
}

TEST(SplitKv, MatchesBruteForceOfItsModel) {
  for (int64_t blocks : {1, 3, 8, 32, 64, 100, 200})
    for (int64_t tiles : {4, 17, 64, 512, 2048})
      for (int bps : {1, 2, 3}) {
        const SplitShape s{blocks, tiles, 132, bps};
        const int got = choose_num_splits(s);
        ASSERT_GE(got, 1);
        if (blocks * 5 >= int64_t{132} * bps * 4) {
          EXPECT_EQ(got, 1) << blocks << " " << tiles;
          continue;
        }
        const int64_t max_n = std::min<int64_t>(kMaxSplits, tiles / kMinTilesPerSplit);
        ASSERT_LE(got, std::max<int64_t>(max_n, 1));
        int64_t best = model_cost(s, 1);
        for (int64_t n = 2; n <= max_n; ++n) best = std::min(best, model_cost(s, n));
        EXPECT_LE(model_cost(s, got) * 100, best * 105) << blocks << " " << tiles << " " << bps;
        for (int64_t n = 1; n < got; ++n)
          EXPECT_GT(model_cost(s, n) * 100, best * 105) << "a smaller split is within 5%: " << n;
      }
}

TEST(SplitKv, RaggedGridsTakeWavesOfParts) {
  // Varlen decode, 32 sequences x 8 KV heads = 256 blocks of a mean 144 key tiles, one block per
  // SM: the uniform rule keeps the full grid whole; ragged, 8 waves of 132 -> 5 parts.
  EXPECT_EQ(choose_num_splits({256, 144, 132, 1}), 1);
  EXPECT_EQ(choose_num_splits({256, 144, 132, 1, true}), 5);
  // Parts keep kMinTilesPerRaggedPart tiles of the mean length: 24 tiles -> 3 parts, 10 -> 1.
  EXPECT_EQ(choose_num_splits({256, 24, 132, 1, true}), 3);
  EXPECT_EQ(choose_num_splits({256, 10, 132, 1, true}), 1);
  // Small ragged grids: at most kMaxRaggedSplits from the waves rule, the uniform choice if more.
  const int uniform = choose_num_splits({16, 512, 132, 2});
  const int ragged = choose_num_splits({16, 512, 132, 2, true});
  EXPECT_EQ(ragged, std::max<int64_t>(uniform, kMaxRaggedSplits));
  EXPECT_EQ(choose_num_splits({4, 4096, 132, 1, true}), choose_num_splits({4, 4096, 132, 1}));
  // Prefill-sized grids (thousands of blocks) stay whole either way.
  EXPECT_EQ(choose_num_splits({4096, 128, 132, 1, true}), 1);
}

TEST(SplitKv, RememberedAnswersMatchFreshOnes) {
  // Six shapes in turn, more than the per-thread memo holds, so entries are evicted and filled
  // again; every answer must be what the first round (and another thread, with its own memo) gave.
  const SplitShape shapes[] = {{8, 512, 132, 3}, {8, 512, 132, 2}, {64, 64, 132, 3},
                               {8, 513, 132, 3}, {1, 2048, 132, 1}, {16, 100, 132, 2}};
  int first[6];
  for (int i = 0; i < 6; ++i) first[i] = choose_num_splits(shapes[i]);
  for (int round = 0; round < 5; ++round)
    for (int i = round % 2; i < 6; i += 1 + round % 2) EXPECT_EQ(choose_num_splits(shapes[i]), first[i]) << i;
  std::thread other([&] {
    for (int i = 5; i >= 0; --i) EXPECT_EQ(choose_num_splits(shapes[i]), first[i]) << i;
  });
  other.join();
  EXPECT_GT(first[0], 1);
  EXPECT_NE(first[0], first[1]) << "the memo must key on blocks_per_sm too";
  const SplitShape flat{256, 144, 132, 1}, ragged{256, 144, 132, 1, true};
  EXPECT_NE(choose_num_splits(flat), choose_num_splits(ragged)) << "the memo must key on ragged too";
  EXPECT_NE(choose_num_splits(ragged), choose_num_splits(flat));
}

}  // namespace
}  // namespace attnfuse::passes
