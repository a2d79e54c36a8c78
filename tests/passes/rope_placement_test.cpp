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

// Decode calls price the fused rotation per visited key and KV head (the GQA-packed tile rotates
// each K tile once for the whole group), not as a share of the rows' MMA work. The terms against
// the H100 decode placements they were fitted to (bench/results/2026-12-05-h100-session40/
// call3/; extras over plain decode at 32k keys, us): fused 11 / 14 / 34, prerotate 52 / 65 / 376
// at Llama-3-8B B1, Llama-3-70B B1 and Llama-3-8B B8.
TEST(RopePlacement, DecodeTermsFollowKeysAndKvHeads) {
  const RopeCostModel m = rope_cost_model_h200();
  struct Cell {
    RopeCallShape shape;
    double fused_us, prerotate_us;
  };
  for (const Cell& c : {Cell{{1, 32, 8, 1, 32768, 128, 32767, true, 0, true}, 11, 52},
                        Cell{{1, 64, 8, 1, 32768, 128, 32767, true, 0, true}, 14, 65},
                        Cell{{8, 32, 8, 1, 32768, 128, 32767, true, 0, true}, 34, 376}}) {
    const RopeExtraCosts e = rope_extra_costs(c.shape, m);
    SCOPED_TRACE(::testing::Message() << "B" << c.shape.batch << " Hq " << c.shape.heads_q);
    // One sequence: within 25%. B8, where more blocks hide the rotation: an upper bound, 2.6x.
    if (c.shape.batch == 1) EXPECT_NEAR(e.fused_s * 1e6, c.fused_us, 0.25 * c.fused_us);
    else EXPECT_NEAR(e.fused_s * 1e6, 2.6 * c.fused_us, 0.1 * c.fused_us);
    EXPECT_NEAR(e.prerotate_s * 1e6, c.prerotate_us, 0.30 * c.prerotate_us);
    EXPECT_EQ(choose_rope_mode(c.shape, m), RopeMode::Fused);
  }
  // The fused term ignores the query heads and rows of a group (one rotation per KV head)...
  const RopeCallShape llama8b{1, 32, 8, 1, 32768, 128, 32767, true, 0, true};
  RopeCallShape more_heads = llama8b, more_rows = llama8b, windowed = llama8b;
  more_heads.heads_q = 64;
  more_rows.len_q = 4;
  more_rows.q_offset = 32764;
  EXPECT_DOUBLE_EQ(rope_extra_costs(more_heads, m).fused_s, rope_extra_costs(llama8b, m).fused_s);
  EXPECT_NEAR(rope_extra_costs(more_rows, m).fused_s, rope_extra_costs(llama8b, m).fused_s, 1e-9);
  // ... and follows the keys it visits (a 4096-key window reads an eighth of the cache).
  windowed.window = 4096;
  EXPECT_NEAR(rope_extra_costs(windowed, m).fused_s, rope_extra_costs(llama8b, m).fused_s / 8, 1e-9);
  // The prefill term prices one query row's MMA share: about a ninth of the decode tile's
  // measured cost, the error the decode term removes.
  RopeCallShape as_prefill = llama8b;
  as_prefill.decode = false;
  EXPECT_LT(rope_extra_costs(as_prefill, m).fused_s * 5, rope_extra_costs(llama8b, m).fused_s);
  // Any decode call stays fused on both models: per key and KV head the rotation costs a
  // quarter of prerotate's pass, which also pays a launch.
  for (const RopeCostModel& model : {rope_cost_model_h200(), rope_cost_model_h200(true)})
    for (int64_t nk : {int64_t{16}, int64_t{64}, int64_t{4096}, int64_t{131072}})
      for (int64_t rows : {int64_t{1}, int64_t{16}}) {
        const RopeCallShape s{4, 32, 8, rows, nk + rows, 128, nk, true, 0, true};
        EXPECT_EQ(choose_rope_mode(s, model), RopeMode::Fused) << nk << " keys, " << rows << " rows";
      }
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
