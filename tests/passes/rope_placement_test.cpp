// The rope_mode=auto cost model: visited cells against a brute-force count, the choice at the
// ends of the range (decode fuses, long prefill prerotates) and the closed-form crossover.
#include <gtest/gtest.h>

#include <cmath>

#include "passes/rope_placement.hpp"

namespace attnfuse::passes {
namespace {

double brute_cells(const RopeCallShape& s) {
  double n = 0;
  for (int64_t i = 0; i < s.len_q; ++i)
    for (int64_t j = 0; j < s.len_k; ++j) {
      const int64_t delta = i + s.q_offset - j;
      if (s.causal && delta < 0) continue;
      if (s.window > 0 && std::abs(delta) >= s.window) continue;
      ++n;
    }
  return n;
}

TEST(RopePlacement, VisitedCellsMatchACount) {
  for (bool causal : {false, true})
    for (int64_t window : {int64_t{0}, int64_t{37}, int64_t{500}})
      for (auto [nq, nk] : {std::pair<int64_t, int64_t>{300, 300}, {64, 1000}, {1, 777}, {1000, 130}}) {
        const RopeCallShape s{1, 8, 2, nq, nk, 128, nk - nq, causal, window};
        const double want = brute_cells(s), got = visited_cells(s);
        // 64 row groups evaluated at their middle row: within a few percent of the exact count.
        EXPECT_NEAR(got, want, 0.03 * want + 64.0) << "causal " << causal << " window " << window << " Nq " << nq
                                                   << " Nk " << nk;
      }
}

TEST(RopePlacement, DecodeFusesLongPrefillPrerotates) {
  const RopeCostModel m = rope_cost_model_h200();
  // One query row over a long cache: rotating inside the kernel costs nothing next to reading
  // K, while prerotating would read and write all of K once more.
  EXPECT_EQ(choose_rope_mode({1, 32, 8, 1, 131072, 128, 131071, true, 0}, m), RopeMode::Fused);
  EXPECT_EQ(choose_rope_mode({1, 32, 8, 256, 256, 128, 0, true, 0}, m), RopeMode::Fused);
  EXPECT_EQ(choose_rope_mode({1, 32, 8, 8192, 8192, 128, 0, true, 0}, m), RopeMode::Prerotate);
  EXPECT_EQ(choose_rope_mode({4, 12, 12, 4096, 4096, 64, 0, true, 0}, m), RopeMode::Prerotate);
}

TEST(RopePlacement, HopperPairingPrerotatesFromAFewHundredKeys) {
  // The prerotated prefill on the wgmma form against the fused rotation on mma.sync: the H200
  // measured prerotate ahead from N = 256 (Llama-3-8B) and 512 (GPT-2), the smallest measured.
  const RopeCostModel m = rope_cost_model_h200(true);
  EXPECT_EQ(choose_rope_mode({1, 32, 8, 256, 256, 128, 0, true, 0}, m), RopeMode::Prerotate);
  EXPECT_EQ(choose_rope_mode({4, 32, 8, 256, 256, 128, 0, true, 0}, m), RopeMode::Prerotate);
  EXPECT_EQ(choose_rope_mode({4, 12, 12, 512, 512, 64, 0, true, 0}, m), RopeMode::Prerotate);
  EXPECT_EQ(choose_rope_mode({1, 32, 8, 64, 64, 128, 0, true, 0}, m), RopeMode::Fused);
  EXPECT_NEAR(rope_crossover_length(32, 8, 128, 1, m), 200.0, 1.0);
  EXPECT_NEAR(rope_crossover_length(12, 12, 64, 4, m), 320.0, 1.0);
}

TEST(RopePlacement, ClosedFormCrossoverIsWhereTheChoiceFlips) {
  for (const RopeCostModel& m : {rope_cost_model_h200(), rope_cost_model_h200(true)})
  for (auto [b, hq, hkv, d] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 32, 8, 128}, {4, 12, 12, 64}, {8, 28, 4, 128}}) {
    const double n_star = rope_crossover_length(hq, hkv, d, b, m);
    ASSERT_GT(n_star, 16);
    const auto at = [&](double n) {
      const auto len = static_cast<int64_t>(n);
      return choose_rope_mode({b, hq, hkv, len, len, d, 0, true, 0}, m);
    };
    // The closed form assumes N^2/2 causal cells; the row-group sum differs by ~1/N.
    EXPECT_EQ(at(0.9 * n_star), RopeMode::Fused) << "N* = " << n_star;
    EXPECT_EQ(at(1.1 * n_star), RopeMode::Prerotate) << "N* = " << n_star;
  }
}

}  // namespace
}  // namespace attnfuse::passes
