// The rope_window rule (per cell and per tile, checked against brute force over cells) and the
// window table's closed-form pruned share (checked against counting every cell of a causal
// square), its retained share / ceiling speedup and its printed form.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnfuse/error.hpp"
#include "common/tensors.hpp"
#include "rope/frequencies.hpp"
#include "rope/window_table.hpp"

namespace attnfuse::rope {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(WindowRule, LimitIsFloorOfKLambda) {
  EXPECT_EQ(window_limit(1.0, 2 * std::numbers::pi), 6);
  EXPECT_EQ(window_limit(0.5, 8.0), 4);  // an exact product is kept: |Δ| <= 4
  EXPECT_EQ(window_limit(0.0, 8.0), 0);  // only the diagonal
  EXPECT_EQ(window_limit(1e300, 1.0), kInt64Max);
  EXPECT_EQ(window_limit(INFINITY, 1.0), kInt64Max);
  EXPECT_EQ(window_limit(NAN, 1.0), -1);
  EXPECT_EQ(window_limit(-1.0, 1.0), -1);
  EXPECT_TRUE(pair_in_window(0.5, 8.0, 4));
  EXPECT_TRUE(pair_in_window(0.5, 8.0, -4));
  EXPECT_FALSE(pair_in_window(0.5, 8.0, 5));
  EXPECT_FALSE(pair_in_window(0.5, 8.0, -5));
  EXPECT_TRUE(pair_in_window(INFINITY, 1.0, std::numeric_limits<int64_t>::min() + 1));
  EXPECT_FALSE(pair_in_window(1e300, 1.0, std::numeric_limits<int64_t>::min()));
  EXPECT_FALSE(pair_in_window(NAN, 1.0, 0));
  const RopeFrequencies f{{1.0, 0.01}, 1.0};
  EXPECT_EQ(window_limits(f, 2.0), (std::vector<int64_t>{12, 1256}));  // 2·2π, 2·200π
}

bool brute_live(double k, double lambda, int64_t qlo, int64_t qhi, int64_t klo, int64_t khi) {
  for (int64_t q = qlo; q <= qhi; ++q)
    for (int64_t j = klo; j <= khi; ++j)
      if (pair_in_window(k, lambda, q - j)) return true;
  return false;
}

TEST(WindowRule, TileLivenessEqualsBruteForce) {
  for (uint64_t seed : {uint64_t{11}, uint64_t{12}, test::fresh_seed()}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> start(0, 80), size(1, 9);
    std::uniform_real_distribution<double> kd(0.02, 2.0), ld(1.0, 50.0);
    int live = 0, dead = 0, straddling = 0;
    for (int it = 0; it < 20000; ++it) {
      const int64_t qlo = start(rng), qhi = qlo + size(rng) - 1;
      const int64_t klo = start(rng), khi = klo + size(rng) - 1;
      const double k = kd(rng), lambda = ld(rng);
      int64_t brute_min = kInt64Max;
      for (int64_t q = qlo; q <= qhi; ++q)
        for (int64_t j = klo; j <= khi; ++j) brute_min = std::min(brute_min, q > j ? q - j : j - q);
      ASSERT_EQ(min_abs_delta_in_tile(qlo, qhi, klo, khi), brute_min)
          << "q [" << qlo << ", " << qhi << "] k [" << klo << ", " << khi << "]";
      const bool want = brute_live(k, lambda, qlo, qhi, klo, khi);
      ASSERT_EQ(pair_live_in_tile(k, lambda, qlo, qhi, klo, khi), want)
          << "k " << k << " lambda " << lambda << " q [" << qlo << ", " << qhi << "] k [" << klo
          << ", " << khi << "]";
      (want ? live : dead)++;
      straddling += brute_min == 0;
    }
    EXPECT_GT(live, 1000);  // the sample exercises both answers and the diagonal
    EXPECT_GT(dead, 1000);
    EXPECT_GT(straddling, 500);
  }
  EXPECT_FALSE(pair_live_in_tile(1e9, 1.0, 5, 4, 0, 10));  // empty query range
  EXPECT_FALSE(pair_live_in_tile(1e9, 1.0, 0, 10, 3, 2));  // empty key range
  // Keys entirely after the queries (non-causal tile): min |Δ| = k_lo - q_hi.
  EXPECT_EQ(min_abs_delta_in_tile(0, 63, 100, 163), 37);
  EXPECT_TRUE(pair_live_in_tile(1.0, 37.0, 0, 63, 100, 163));
  EXPECT_FALSE(pair_live_in_tile(1.0, 36.9, 0, 63, 100, 163));
}

TEST(WindowTable, ClosedFormCellCountEqualsBruteForce) {
  const int64_t n = 300;
  for (int64_t limit = -1; limit <= n + 2; ++limit) {
    int64_t brute = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) brute += (i - j) > limit;
    ASSERT_EQ(pruned_causal_cells(limit, n), brute) << "limit " << limit;
  }
  const int64_t big = int64_t{1} << 31;  // no overflow at the largest supported N
  EXPECT_EQ(pruned_causal_cells(-1, big), (big / 2) * (big + 1));
  EXPECT_EQ(pruned_causal_cells(big - 2, big), 1);
}

RopeParams llama32_3b() {
  RopeParams p;
  p.base = 500000;
  p.rope_type = RopeScaling::Llama3;
  p.factor = 32;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position_embeddings = 8192;
  return p;
}

// Every number of the table against counting each cell of the causal 300×300 square, for a
// full-rotary and a partial-rotary model: pruned rotated-pair terms, and the QK multiply-adds
// (D - rotary_dim unrotated + 2 per kept pair) for the retained share.
TEST(WindowTable, SharesEqualBruteForceCount) {
  RopeParams partial;
  partial.rotary_dim = 16;
  struct Case { RopeParams p; int head_dim; double k; };
  for (const Case& c : {Case{llama32_3b(), 128, 1.0}, Case{llama32_3b(), 128, 0.25},
                        Case{partial, 64, 2.0}}) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + " k " + std::to_string(c.k));
    const int64_t n = 300;
    const WindowTable t = window_table(c.p, c.head_dim, c.k, n);
    const RopeFrequencies f = rope_frequencies(c.p, c.head_dim, n);
    const int pairs = static_cast<int>(f.inv_freq.size());
    ASSERT_EQ(static_cast<int>(t.rows.size()), pairs);
    int64_t pruned_terms = 0, qk_work = 0, cells = 0;
    std::vector<int64_t> per_pair(static_cast<size_t>(pairs), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        ++cells;
        qk_work += c.head_dim - 2 * pairs;
        for (int r = 0; r < pairs; ++r) {
          if (pair_in_window(c.k, wavelength(f.inv_freq[static_cast<size_t>(r)]), i - j)) {
            qk_work += 2;
          } else {
            ++pruned_terms;
            ++per_pair[static_cast<size_t>(r)];
          }
        }
      }
    for (int r = 0; r < pairs; ++r) {
      EXPECT_EQ(t.rows[static_cast<size_t>(r)].pruned_cells, per_pair[static_cast<size_t>(r)]) << r;
      EXPECT_EQ(t.rows[static_cast<size_t>(r)].theta, f.inv_freq[static_cast<size_t>(r)]);
    }
    const double pruned = static_cast<double>(pruned_terms) / static_cast<double>(cells * pairs);
    const double s = static_cast<double>(qk_work) / static_cast<double>(cells * c.head_dim);
    EXPECT_GT(pruned, 0.0);
    EXPECT_NEAR(t.pruned_share, pruned, 1e-15);
    EXPECT_NEAR(t.retained_share, s, 1e-15);
    EXPECT_NEAR(t.ceiling_speedup, 2 / (1 + s), 1e-15);
  }
}

TEST(WindowTable, HugeKPrunesNothing) {
  const WindowTable t = window_table(llama32_3b(), 128, 1e12, 131072);
  for (const WindowRow& r : t.rows) EXPECT_EQ(r.pruned_cells, 0) << r.pair;
  EXPECT_EQ(t.pruned_share, 0.0);
  EXPECT_EQ(t.retained_share, 1.0);
  EXPECT_EQ(t.ceiling_speedup, 1.0);
}

TEST(WindowTable, TinyKPrunesEveryOffDiagonalTerm) {
  const int64_t n = 8192;
  const WindowTable t = window_table(llama32_3b(), 128, 1e-12, n);
  // Every pair keeps only Δ = 0: N(N-1)/2 of N(N+1)/2 cells pruned, for every pair.
  const double share = static_cast<double>(n - 1) / static_cast<double>(n + 1);
  for (const WindowRow& r : t.rows) {
    EXPECT_EQ(r.limit, 0);
    EXPECT_NEAR(r.pruned_share, share, 1e-15) << r.pair;
  }
  EXPECT_NEAR(t.pruned_share, share, 1e-15);
}

// With a moderate k the high-frequency pairs (short wavelengths) are pruned almost everywhere
// and the low-frequency ones not at all: the share falls with r.
TEST(WindowTable, HighFrequencyPairsArePrunedFirst) {
  const WindowTable t = window_table(llama32_3b(), 128, 1.0, 32768);
  EXPECT_GT(t.rows.front().pruned_share, 0.999);
  EXPECT_EQ(t.rows.back().pruned_cells, 0);
  for (size_t r = 1; r < t.rows.size(); ++r) EXPECT_LE(t.rows[r].pruned_share, t.rows[r - 1].pruned_share);
  EXPECT_GT(t.ceiling_speedup, 1.0);
  EXPECT_LT(t.ceiling_speedup, 2.0);
  // The share grows with N (ATFlash: logarithmic in the sequence length).
  EXPECT_GT(window_table(llama32_3b(), 128, 1.0, 131072).pruned_share, t.pruned_share);
}

// The table's frequencies are those at the causal length (longrope switches beyond L0).
TEST(WindowTable, UsesFrequenciesAtSeqLen) {
  RopeParams p;
  p.rope_type = RopeScaling::Longrope;
  p.short_factor = {1, 1, 1, 1};
  p.long_factor = {2, 2, 2, 2};
  p.original_max_position_embeddings = 100;
  EXPECT_DOUBLE_EQ(window_table(p, 8, 1.0, 100).rows[2].theta, 0.01);
  EXPECT_DOUBLE_EQ(window_table(p, 8, 1.0, 101).rows[2].theta, 0.005);
}

TEST(WindowTable, FormatEndsWithPrunedShare) {
  const WindowTable t = window_table(llama32_3b(), 128, 0.5, 8192);
  const std::string s = format_window_table(t);
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.back(), '\n');
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2 + t.rows.size() + 3);
  const std::string& last = lines.back();
  ASSERT_EQ(last.rfind("pruned_share=", 0), 0u) << last;
  char* end = nullptr;
  const double v = std::strtod(last.c_str() + 13, &end);
  EXPECT_EQ(*end, '\0') << last;
  EXPECT_NEAR(v, t.pruned_share, 5e-7);
  EXPECT_EQ(lines[lines.size() - 2].rfind("ceiling_speedup=", 0), 0u);
  EXPECT_EQ(lines[lines.size() - 3].rfind("retained_share=", 0), 0u);
  // Each row: r, θ_r, λ_r, w_r, share.
  std::istringstream row(lines[2]);
  int r = -1;
  double theta = 0, lambda = 0, window = 0, share = -1;
  row >> r >> theta >> lambda >> window >> share;
  EXPECT_EQ(r, 0);
  EXPECT_EQ(theta, 1.0);
  EXPECT_NEAR(lambda, 2 * std::numbers::pi, 1e-5);
  EXPECT_NEAR(window, std::numbers::pi, 1e-5);
  EXPECT_NEAR(share, t.rows[0].pruned_share, 1e-6);
}

TEST(WindowTable, BadArgumentsAreVerifyErrors) {
  for (double k : {0.0, -1.0, static_cast<double>(NAN)}) {
    try {
      window_table(llama32_3b(), 128, k, 100);
      ADD_FAILURE() << "k " << k;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Verify);
    }
  }
  try {
    window_table(llama32_3b(), 128, 1.0, 0);
    ADD_FAILURE() << "seq_len 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("seq_len"), std::string::npos);
  }
}

}  // namespace
}  // namespace attnfuse::rope
