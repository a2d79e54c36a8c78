// The quality dial's computation (bench/rope_window_quality.hpp): checked against the float64
// reference's rope and rope_window scores with a naive softmax/KL/argmax, plus the properties a
// dial must have (a k that keeps everything changes nothing, k = 0 moves position-driven rows,
// KL >= 0, agreement and retained share growing with k) and the row sample.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "attnfuse/attention.hpp"
#include "common/tensors.hpp"
#include "reference/reference.hpp"
#include "rope/hf_config.hpp"
#include "rope_window_quality.hpp"

namespace attnfuse::quality {
namespace {

Problem small_problem(int64_t n, int d = 32) {
  Problem pb;
  pb.head_dim = d;
  pb.seq_len = n;
  return pb;
}

// The dial of one kind on every row of `pb` (1 or more heads).
std::vector<DialPoint> dial(InputKind kind, const Problem& pb, const std::vector<double>& ks, int heads = 1,
                            uint64_t seed = 7) {
  return measure(kind, pb, ks, heads, sample_rows(pb.seq_len, 2, pb.seq_len, seed), seed);
}

TEST(QualityDial, KeepingEveryTermChangesNothing) {
  const Problem pb = small_problem(200);
  // k = N / λ_0 + 1 already keeps every causal cell at this length; 1e9 and infinity saturate.
  const double enough = 200.0 / (2 * std::numbers::pi) + 1.0;
  for (InputKind kind : kAllInputKinds) {
    SCOPED_TRACE(input_kind_name(kind));
    for (const DialPoint& p : dial(kind, pb, {enough, 1e9, std::numeric_limits<double>::infinity()}, 2)) {
      SCOPED_TRACE(p.k);
      EXPECT_EQ(p.rows, 400);
      EXPECT_EQ(p.top1(), 1.0);
      EXPECT_LE(p.mean_kl(), 1e-12);
      EXPECT_LE(p.max_kl, 1e-12);
      EXPECT_EQ(p.retained_share, 1.0);
      EXPECT_EQ(p.retained_evaluated(), 1.0);
    }
  }
}

TEST(QualityDial, ZeroKMovesPositionDrivenRows) {
  // k = 0 keeps the rotated pairs on the diagonal only: a row whose scores are mostly a
  // function of Δ loses its shape, so its argmax moves in most rows.
  const std::vector<DialPoint> p = dial(InputKind::Positional, small_problem(256, 64), {0.0}, 2);
  EXPECT_LT(p[0].top1(), 0.5);
  EXPECT_GT(p[0].mean_kl(), 0.1);
  EXPECT_NEAR(p[0].retained_share, 1.0 / 128.5, 1e-15);  // N diagonal cells of N(N+1)/2
}

TEST(QualityDial, KlNonNegativeAgreementAndRetainedGrowWithK) {
  const Problem pb = small_problem(384);
  const std::vector<double> ks = {0.0, 0.25, 0.5, 1.0, 2.0, 8.0};
  for (InputKind kind : kAllInputKinds) {
    SCOPED_TRACE(input_kind_name(kind));
    const std::vector<DialPoint> points = dial(kind, pb, ks, 2);
    for (size_t i = 0; i < points.size(); ++i) {
      SCOPED_TRACE(points[i].k);
      EXPECT_GE(points[i].mean_kl(), 0.0);
      EXPECT_GE(points[i].max_kl, points[i].mean_kl());
      EXPECT_GE(points[i].top1(), 0.0);
      EXPECT_LE(points[i].top1(), 1.0);
      // Every row evaluated: the kept terms counted cell by cell are the closed form's.
      EXPECT_NEAR(points[i].retained_evaluated(), points[i].retained_share, 1e-12);
      if (i > 0) {
        EXPECT_GE(points[i].retained_share, points[i - 1].retained_share);
      }
    }
    EXPECT_GE(points.back().top1(), points[1].top1());        // k = 8 vs k = 0.25
    EXPECT_LE(points.back().mean_kl(), points[1].mean_kl());
    EXPECT_GT(points[1].mean_kl(), 0.0);                      // k = 0.25 does prune at N = 384
  }
}

TEST(QualityDial, KlTermIsNonNegativeAndExact) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> lp(-40.0, 0.0), step(-1.0, 1.0), tiny(-1e-4, 1e-4);
  for (int it = 0; it < 200000; ++it) {
    const double log_p = lp(rng);
    const double d = it % 3 == 0 ? tiny(rng) : it % 3 == 1 ? step(rng) : 60.0 * step(rng);
    const double log_w = log_p - d;
    const double t = kl_term(log_p, log_w);
    ASSERT_GE(t, 0.0) << "log_p " << log_p << " log_w " << log_w;
    // The direct form in long double, where it does not cancel badly.
    if (std::abs(d) > 1e-2 && std::abs(d) < 20.0) {
      const long double p = std::exp((long double)log_p), w = std::exp((long double)log_w);
      const long double want = p * ((long double)log_p - (long double)log_w) - p + w;
      ASSERT_NEAR(t, (double)want, 1e-12 * (double)(p + w)) << "log_p " << log_p << " log_w " << log_w;
    }
  }
  EXPECT_EQ(kl_term(-2.0, -2.0), 0.0);
}

// The same rows through the float64 reference (reference::scores with rope and rope_window),
// then a naive softmax, KL and argmax: the dial must agree.
void expect_matches_reference(const RopeParams& rope, int d, int64_t n, const std::vector<double>& ks) {
  Problem pb;
  pb.rope = rope;
  pb.head_dim = d;
  pb.seq_len = n;
  test::HostTensor q(DType::F32, {1, 1, n, d}), k(DType::F32, {1, 1, n, d}), v(DType::F32, {1, 1, n, d}),
      out(DType::F32, {1, 1, n, d});
  std::mt19937_64 rng(11);
  q.fill_random(rng, 1.5f);
  k.fill_random(rng, 1.5f);
  HeadInputs in;
  for (int64_t i = 0; i < n; ++i)
    for (int x = 0; x < d; ++x) {
      in.q.push_back(q.get(0, 0, i, x));
      in.k.push_back(k.get(0, 0, i, x));
    }
  AttentionArgs args;
  args.q = q.view(), args.k = k.view(), args.v = v.view(), args.out = out.view();

  std::vector<DialPoint> points = make_points(pb, ks);
  measure_head(pb, in, sample_rows(n, 2, n, 1), points);

  ScalarArgs scalars;
  scalars.rope = rope;
  KernelSpec plain = test::make_spec({MaskKind::Causal}, {}, NormKind::Softmax, scalars);
  plain.score = ScoreKind::Rope;
  std::vector<double> s(static_cast<size_t>(n * n)), w(s.size());
  reference::scores<double>(plain, args, 0, 0, s.data());
  for (const DialPoint& p : points) {
    SCOPED_TRACE(p.k);
    KernelSpec windowed = plain;
    windowed.score = ScoreKind::RopeWindow;
    windowed.scalars.rope.window_k = p.k;
    reference::scores<double>(windowed, args, 0, 0, w.data());
    double agree = 0, kl_sum = 0, kl_max = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double* si = s.data() + i * n;
      const double* wi = w.data() + i * n;
      auto softmax = [&](const double* x, std::vector<double>& prob) -> int64_t {
        int64_t am = 0;
        for (int64_t j = 1; j <= i; ++j)
          if (x[j] > x[am]) am = j;
        double z = 0;
        prob.assign(static_cast<size_t>(i + 1), 0.0);
        for (int64_t j = 0; j <= i; ++j) z += prob[size_t(j)] = std::exp(x[j] - x[am]);
        for (double& pj : prob) pj /= z;
        return am;
      };
      std::vector<double> pp, pw;
      const int64_t ap = softmax(si, pp), aw = softmax(wi, pw);
      double kl = 0;
      for (int64_t j = 0; j <= i; ++j)
        if (pp[size_t(j)] > 0) kl += pp[size_t(j)] * std::log(pp[size_t(j)] / pw[size_t(j)]);
      agree += ap == aw;
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
    }
    EXPECT_EQ(p.rows, n);
    EXPECT_EQ(p.agree, agree);
    EXPECT_NEAR(p.mean_kl(), kl_sum / double(n), 1e-9 * (kl_sum / double(n)) + 1e-14);
    EXPECT_NEAR(p.max_kl, kl_max, 1e-9 * kl_max + 1e-14);
    EXPECT_NEAR(p.retained_evaluated(), p.retained_share, 1e-12);
  }
}

TEST(QualityDial, MatchesReferenceNeoxPartialRotary) {
  RopeParams rope;
  rope.rotary_dim = 12;  // dims 12..15 are not rotated: they count in every cell
  expect_matches_reference(rope, 16, 96, {0.0, 0.05, 0.3, 1.0, 4.0});
}

TEST(QualityDial, MatchesReferenceGptjYarn) {
  RopeParams rope;
  rope.style = RopeStyle::Gptj;
  rope.base = 500.0;
  rope.rope_type = RopeScaling::Yarn;
  rope.factor = 4.0;
  rope.original_max_position_embeddings = 32;  // attention factor != 1, ramp inside the pairs
  expect_matches_reference(rope, 16, 96, {0.0, 0.1, 0.5, 2.0});
}

TEST(QualityDial, LlamaConfigSampledRows) {
  const rope::HfRopeConfig cfg = rope::load_hf_config(ATTNFUSE_SOURCE_DIR "/examples/llama-3.2-3b-config.json");
  Problem pb;
  pb.rope = cfg.rope;
  pb.head_dim = cfg.head_dim;
  pb.seq_len = 3000;
  const RowSample rows = sample_rows(pb.seq_len, 48, 2048, 5);
  ASSERT_FALSE(rows.all);
  for (InputKind kind : {InputKind::Random, InputKind::Positional}) {
    SCOPED_TRACE(input_kind_name(kind));
    const std::vector<DialPoint> p = measure(kind, pb, {0.25, 1e9}, 1, rows, 5);
    EXPECT_EQ(p[0].rows, 48);
    EXPECT_DOUBLE_EQ(p[0].weight, 3000.0);
    EXPECT_LT(p[0].retained_share, 0.9);  // llama3 at N = 3000 prunes a good share at k = 0.25
    EXPECT_GT(p[0].mean_kl(), 0.0);
    EXPECT_EQ(p[1].top1(), 1.0);
    EXPECT_LE(p[1].max_kl, 1e-12);
  }
}

TEST(RowSample, EveryRowOrStratifiedWithTheLastRows) {
  const RowSample all = sample_rows(100, 256, 2048, 1);
  EXPECT_TRUE(all.all);
  ASSERT_EQ(all.rows.size(), 100u);
  EXPECT_EQ(all.rows.back(), 99);

  for (uint64_t seed : {uint64_t{1}, uint64_t{2}, test::fresh_seed()}) {
    SCOPED_TRACE(seed);
    const RowSample r = sample_rows(16384, 256, 2048, seed);
    EXPECT_FALSE(r.all);
    ASSERT_EQ(r.rows.size(), 256u);
    ASSERT_EQ(r.weights.size(), 256u);
    double total = 0;
    for (size_t i = 0; i < r.rows.size(); ++i) {
      total += r.weights[i];
      ASSERT_GE(r.rows[i], 0);
      ASSERT_LT(r.rows[i], 16384);
      if (i > 0) {
        ASSERT_LT(r.rows[i - 1], r.rows[i]);
      }
    }
    EXPECT_EQ(total, 16384.0);
    for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(r.rows[size_t(224 + i)], 16384 - 32 + i);  // the last 256/8 rows
    const RowSample again = sample_rows(16384, 256, 2048, seed);
    EXPECT_EQ(again.rows, r.rows);
  }
}

}  // namespace
}  // namespace attnfuse::quality
