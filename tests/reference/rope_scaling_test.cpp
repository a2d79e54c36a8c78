// The float64 reference's RoPE with every Hugging Face scaling and rope_window (ATFlash), checked
// cell by cell against an independent computation that rotates each q and k row with the RoPE
// library's rotate() and applies the window per pair with pair_in_window; plus the naive
// same-precision form, the sequence length the frequencies are computed for, and the errors.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ref_helpers.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::testing {
namespace {

using reference::attention;
using reference::Precision;

struct Scaling {
  std::string name;
  RopeParams params;  // rotary_dim, style and window_k are set per case
};

// Parameters chosen so that each scaling changes the frequencies at test lengths (tens to a few
// hundred positions): short original contexts, factors well away from 1.
std::vector<Scaling> scalings(int pairs) {
  std::vector<Scaling> out;
  RopeParams p;
  out.push_back({"default", p});

  p = {};
  p.rope_type = RopeScaling::Linear;
  p.factor = 2.5;
  out.push_back({"linear", p});

  p = {};
  p.rope_type = RopeScaling::Dynamic;
  p.factor = 3.0;
  p.original_max_position_embeddings = 16;  // HF's max_position_embeddings: the base grows past it
  out.push_back({"dynamic", p});

  p = {};
  p.rope_type = RopeScaling::Yarn;
  p.factor = 4.0;
  p.original_max_position_embeddings = 32;
  out.push_back({"yarn", p});  // attention factor 0.1 ln 4 + 1

  p.mscale = 1.0;
  p.mscale_all_dim = 0.5;
  p.beta_fast = 16.0;
  p.beta_slow = 2.0;
  out.push_back({"yarn-deepseek", p});

  p = {};
  p.rope_type = RopeScaling::Yarn;
  p.factor = 8.0;
  p.original_max_position_embeddings = 20;
  p.attention_factor = 1.7;
  out.push_back({"yarn-explicit-factor", p});

  p = {};
  p.rope_type = RopeScaling::Llama3;
  p.factor = 8.0;
  p.low_freq_factor = 1.0;
  p.high_freq_factor = 4.0;
  p.original_max_position_embeddings = 64;  // wavelengths above 64 scaled, 16..64 blended
  out.push_back({"llama3", p});

  p = {};
  p.rope_type = RopeScaling::Longrope;
  p.factor = 4.0;
  p.original_max_position_embeddings = 24;
  for (int r = 0; r < pairs; ++r) {
    p.long_factor.push_back(1.0 + 0.7 * r);
    p.short_factor.push_back(1.0 + 0.05 * r);
  }
  out.push_back({"longrope", p});  // attention factor sqrt(1 + ln 4 / ln 24)
  return out;
}

// One problem: random Q/K/V (GQA), its positions and a spec.
struct Case {
  int64_t B, Hq, Hkv, Nq, Nk, D;
  std::optional<int64_t> q_offset;
  Tensor q, k, v;
  Case(int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nk, int64_t d, std::optional<int64_t> off,
       std::mt19937_64& rng)
      : B(b), Hq(hq), Hkv(hkv), Nq(nq), Nk(nk), D(d), q_offset(off), q({b, hq, nq, d}), k({b, hkv, nk, d}),
        v({b, hkv, nk, d}) {
    q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  }
  AttentionArgs args() const {
    AttentionArgs a = args_of(q, k, v);
    a.q_offset = q_offset;
    return a;
  }
  int64_t offset() const { return q_offset ? *q_offset : Nk - Nq; }
};

// The expected S of (b, hq): each row rotated on its own by the library's rotate() (q at pq(i),
// k at j), then every cell's dot product pair by pair, with the window rule per cell.
std::vector<double> expected_scores(const Case& c, const KernelSpec& spec, int64_t b, int64_t hq) {
  const RopeParams& rp = spec.scalars.rope;
  const int D = static_cast<int>(c.D);
  const int rd = rope::rotary_dim_of(rp, D);
  // Largest position in play + 1, as HF's max(position_ids) + 1.
  const int64_t seq = std::max(c.Nk, c.offset() + c.Nq);
  const rope::RopeFrequencies f = rope::rope_frequencies(rp, D, seq);
  const bool windowed = spec.score == ScoreKind::RopeWindow;
  const double scale = 1.0 / std::sqrt(double(D));
  const int64_t hkv = hq / (c.Hq / c.Hkv);
  auto rotated = [&](const Tensor& t, int64_t h, int64_t row, int64_t pos) {
    std::vector<double> x(static_cast<size_t>(D));
    for (int d = 0; d < D; ++d) x[size_t(d)] = t.get(b, h, row, d);
    rope::rotate(rp, f, pos, x.data(), D);
    return x;
  };
  std::vector<std::vector<double>> ks;
  for (int64_t j = 0; j < c.Nk; ++j) ks.push_back(rotated(c.k, hkv, j, j));
  std::vector<double> S(static_cast<size_t>(c.Nq * c.Nk));
  for (int64_t i = 0; i < c.Nq; ++i) {
    const int64_t pq = i + c.offset();
    const std::vector<double> qv = rotated(c.q, hq, i, pq);
    for (int64_t j = 0; j < c.Nk; ++j) {
      const std::vector<double>& kv = ks[size_t(j)];
      double s = 0;
      for (int x = rd; x < D; ++x) s += qv[size_t(x)] * kv[size_t(x)];
      for (int r = 0; r < rd / 2; ++r) {
        if (windowed && !rope::pair_in_window(rp.window_k, rope::wavelength(f.inv_freq[size_t(r)]), pq - j))
          continue;
        const rope::PairDims pd = rope::pair_dims(rp.style, rd, r);
        s += qv[size_t(pd.a)] * kv[size_t(pd.a)] + qv[size_t(pd.b)] * kv[size_t(pd.b)];
      }
      S[size_t(i * c.Nk + j)] = scale * s;
    }
  }
  return S;
}

// Softmax of the expected S of every (b, hq) (`S[b * Hq + h]`, causal or full), then O = P V and
// LSE, flattened like reference::Result.
reference::Result expected_attention(const Case& c, const KernelSpec& spec,
                                     const std::vector<std::vector<double>>& scores) {
  reference::Result r;
  const bool causal = spec.masks.has(MaskKind::Causal);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const std::vector<double>& S = scores[size_t(b * c.Hq + h)];
      const int64_t hkv = h / (c.Hq / c.Hkv);
      for (int64_t i = 0; i < c.Nq; ++i) {
        const int64_t last = causal ? std::min(c.Nk, i + c.offset() + 1) : c.Nk;
        double m = -INFINITY;
        for (int64_t j = 0; j < last; ++j) m = std::max(m, S[size_t(i * c.Nk + j)]);
        double sum = 0;
        std::vector<double> o(static_cast<size_t>(c.D), 0.0);
        for (int64_t j = 0; j < last; ++j) {
          const double p = std::exp(S[size_t(i * c.Nk + j)] - m);
          sum += p;
          for (int64_t x = 0; x < c.D; ++x) o[size_t(x)] += p * c.v.get(b, hkv, j, x);
        }
        for (double& x : o) r.out.push_back(last > 0 ? x / sum : 0.0);
        r.lse.push_back(last > 0 ? m + std::log(sum) : -INFINITY);
      }
    }
  return r;
}

double max_rel_diff(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t x = 0; x < got.size() && x < want.size(); ++x) {
    if (std::isinf(want[x]) && got[x] == want[x]) continue;
    worst = std::max(worst, std::abs(got[x] - want[x]) / std::max(1.0, std::abs(want[x])));
  }
  return worst;
}

std::vector<double> reference_scores(const Case& c, const KernelSpec& spec, int64_t b, int64_t hq) {
  std::vector<double> S(static_cast<size_t>(c.Nq * c.Nk));
  reference::scores<double>(spec, c.args(), b, hq, S.data());
  return S;
}

// Checks the reference's S of every head, and its O and LSE, against the per-cell expectation.
void expect_matches(const Case& c, const KernelSpec& spec) {
  std::vector<std::vector<double>> want_s;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      want_s.push_back(expected_scores(c, spec, b, h));
      ASSERT_LT(max_rel_diff(reference_scores(c, spec, b, h), want_s.back()), 1e-12) << "b=" << b << " h=" << h;
    }
  const reference::Result got = attention(spec, c.args());
  const reference::Result want = expected_attention(c, spec, want_s);
  EXPECT_LT(max_rel_diff(got.out, want.out), 1e-12);
  EXPECT_LT(max_rel_diff(got.lse, want.lse), 1e-12);
}

KernelSpec rope_spec(const RopeParams& p, RopeStyle style, int rotary_dim, double window_k = 0) {
  KernelSpec s = spec_of();
  s.score = window_k > 0 ? ScoreKind::RopeWindow : ScoreKind::Rope;
  s.scalars.rope = p;
  s.scalars.rope.style = style;
  s.scalars.rope.rotary_dim = rotary_dim;
  s.scalars.rope.window_k = window_k;
  return s;
}

TEST(RopeScaling, EveryScalingMatchesPerCellRotation) {
  const int64_t D = 16;
  for (uint64_t seed : seeds()) {
    std::mt19937_64 rng(seed);
    // Prefill-like (default q_offset), decode (Nq = 1) and chunked prefill with queries whose
    // positions run past Nk (q_offset given), all with GQA.
    std::vector<Case> cases;
    cases.emplace_back(1, 4, 2, 9, 37, D, std::nullopt, rng);
    cases.emplace_back(2, 4, 1, 1, 45, D, std::nullopt, rng);
    cases.emplace_back(1, 2, 2, 5, 23, D, int64_t{40}, rng);
    for (const Case& c : cases)
      for (int rd : {0, 8})
        for (const Scaling& sc : scalings(rd ? rd / 2 : int(D) / 2))
          for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj}) {
            SCOPED_TRACE(::testing::Message() << "seed=" << seed << " " << sc.name << " style="
                                              << rope_style_name(style) << " rd=" << rd << " Nq=" << c.Nq
                                              << " Nk=" << c.Nk << " q_offset=" << c.offset());
            KernelSpec spec = rope_spec(sc.params, style, rd);
            spec.masks.add(MaskKind::Causal);
            expect_matches(c, spec);
          }
  }
}

TEST(RopeScaling, ScalingsChangeTheScores) {
  // Guards the test above against a reference (and an expectation) that ignore the scaling:
  // each scaling must move the scores away from plain RoPE at these lengths.
  std::mt19937_64 rng(5);
  const Case c(1, 1, 1, 4, 60, 16, std::nullopt, rng);
  const KernelSpec plain = rope_spec(RopeParams{}, RopeStyle::Neox, 0);
  const std::vector<double> base = reference_scores(c, plain, 0, 0);
  for (const Scaling& sc : scalings(8)) {
    if (sc.params.rope_type == RopeScaling::None) continue;
    SCOPED_TRACE(sc.name);
    EXPECT_GT(max_rel_diff(reference_scores(c, rope_spec(sc.params, RopeStyle::Neox, 0), 0, 0), base), 1e-3);
  }
}

TEST(RopeScaling, FrequenciesAreComputedForTheLargestPositionPlusOne) {
  std::mt19937_64 rng(6);
  RopeParams dyn;
  dyn.rope_type = RopeScaling::Dynamic;
  dyn.factor = 4.0;
  dyn.original_max_position_embeddings = 16;
  const KernelSpec plain = rope_spec(RopeParams{}, RopeStyle::Neox, 0);
  const KernelSpec dynamic = rope_spec(dyn, RopeStyle::Neox, 0);
  // Keys 0..15 and the query at 15: 16 positions, within the original context: dynamic NTK is
  // the default RoPE, bit for bit.
  Case within(1, 1, 1, 1, 16, 8, std::nullopt, rng);
  EXPECT_EQ(reference_scores(within, dynamic, 0, 0), reference_scores(within, plain, 0, 0));
  EXPECT_EQ(reference::rope_seq_len(within.args()), 16);
  // The same keys with the query at position 16: 17 positions, so the base grows.
  within.q_offset = 16;
  EXPECT_EQ(reference::rope_seq_len(within.args()), 17);
  EXPECT_GT(max_rel_diff(reference_scores(within, dynamic, 0, 0), reference_scores(within, plain, 0, 0)), 1e-6);

  // longrope: short factors up to the original context, long ones past it.
  RopeParams lr;
  lr.rope_type = RopeScaling::Longrope;
  lr.factor = 1.0;  // attention factor 1: only the factor lists differ
  lr.original_max_position_embeddings = 16;
  lr.short_factor.assign(4, 1.0);
  lr.long_factor.assign(4, 3.0);
  const KernelSpec longrope = rope_spec(lr, RopeStyle::Neox, 0);
  Case c(1, 1, 1, 3, 16, 8, std::nullopt, rng);
  EXPECT_LT(max_rel_diff(reference_scores(c, longrope, 0, 0), reference_scores(c, plain, 0, 0)), 1e-12);
  RopeParams lin;
  lin.rope_type = RopeScaling::Linear;
  lin.factor = 3.0;
  const KernelSpec linear = rope_spec(lin, RopeStyle::Neox, 0);
  Case longer(1, 1, 1, 3, 17, 8, std::nullopt, rng);
  EXPECT_LT(max_rel_diff(reference_scores(longer, longrope, 0, 0), reference_scores(longer, linear, 0, 0)), 1e-12);

  // Nq > Nk (default q_offset negative) and Nq = 0 fall back to Nk.
  Case more_q(1, 1, 1, 9, 4, 8, std::nullopt, rng);
  EXPECT_EQ(reference::rope_seq_len(more_q.args()), 4);
  Case no_q(1, 1, 1, 0, 7, 8, int64_t{100}, rng);
  EXPECT_EQ(reference::rope_seq_len(no_q.args()), 7);
}

TEST(RopeWindow, EveryKAndScalingMatchesPerCellWindows) {
  const int64_t D = 16;
  for (uint64_t seed : seeds()) {
    std::mt19937_64 rng(seed);
    // Every cell of S is materialized (both signs of Δ); queries at 40..63 against keys 0..159.
    const Case c(1, 2, 1, 24, 160, D, int64_t{40}, rng);
    int64_t boundary_cells = 0;
    for (int rd : {0, 8})
      for (const Scaling& sc : scalings(rd ? rd / 2 : int(D) / 2))
        for (double k : {0.25, 0.5, 1.0, 2.0, 4.0, 8.0})
          for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj}) {
            SCOPED_TRACE(::testing::Message() << "seed=" << seed << " " << sc.name << " k=" << k
                                              << " style=" << rope_style_name(style) << " rd=" << rd);
            const KernelSpec spec = rope_spec(sc.params, style, rd, k);
            expect_matches(c, spec);
            // Count the cells exactly on a pair's window edge (kept) and one past it (dropped).
            const rope::RopeFrequencies f =
                rope::rope_frequencies(spec.scalars.rope, int(D), reference::rope_seq_len(c.args()));
            for (int64_t w : rope::window_limits(f, k))
              for (int64_t i = 0; i < c.Nq; ++i)
                for (int64_t j = 0; j < c.Nk; ++j) {
                  const int64_t a = std::abs(i + c.offset() - j);
                  boundary_cells += a == w || a == w + 1;
                }
          }
    EXPECT_GT(boundary_cells, 1000);
  }
}

TEST(RopeWindow, WindowDropsExactlyThePairsTerm) {
  // One rotated pair (D = 2), θ = 1 (base irrelevant for r = 0): λ = 2π, and k = 1 keeps
  // |Δ| <= 6. The window drops the whole score beyond that, so S = 0 there exactly.
  Tensor q({1, 1, 1, 2}), k({1, 1, 20, 2}), v({1, 1, 20, 2});
  q.fill({1, 0});
  for (int j = 0; j < 20; ++j) k.set(0, 0, j, 0, 1), k.set(0, 0, j, 1, 0);
  KernelSpec s = rope_spec(RopeParams{}, RopeStyle::Neox, 0, 1.0);
  AttentionArgs a = args_of(q, k, v);
  a.q_offset = 10;
  std::vector<double> S(20);
  reference::scores<double>(s, a, 0, 0, S.data());
  for (int j = 0; j < 20; ++j) {
    const int delta = 10 - j;
    if (std::abs(delta) <= 6)
      EXPECT_NEAR(S[size_t(j)], std::cos(double(delta)) / std::sqrt(2.0), 1e-14) << j;
    else
      EXPECT_EQ(S[size_t(j)], 0.0) << j;
  }
}

TEST(RopeNaive, NaiveFormUsesTheSameScalingAndWindow) {
  const int64_t D = 16;
  for (uint64_t seed : seeds()) {
    std::mt19937_64 rng(seed);
    const Case c(1, 2, 1, 12, 96, D, std::nullopt, rng);
    for (const Scaling& sc : scalings(int(D) / 2))
      for (double k : {0.0, 0.5, 2.0}) {
        SCOPED_TRACE(::testing::Message() << "seed=" << seed << " " << sc.name << " k=" << k);
        KernelSpec spec = rope_spec(sc.params, RopeStyle::Neox, 0, k);
        spec.masks.add(MaskKind::Causal);
        const reference::Result exact = attention(spec, c.args());
        const reference::Result naive = attention(spec, c.args(), Precision::Naive);
        // fp32 arithmetic with positions < 100: angles good to ~1e-5. A different scaling,
        // attention factor or pruned cell would be off by ~0.1.
        EXPECT_LT(max_abs_diff(naive.out, exact.out), 2e-4);
        EXPECT_LT(max_abs_diff(naive.lse, exact.lse), 2e-4);
        // The naive scores keep exactly the cells the oracle keeps.
        std::vector<float> Sf(static_cast<size_t>(c.Nq * c.Nk));
        reference::scores<float>(spec, c.args(), 0, 1, Sf.data());
        const std::vector<double> Sd = reference_scores(c, spec, 0, 1);
        for (size_t x = 0; x < Sf.size(); ++x) ASSERT_NEAR(Sf[x], Sd[x], 1e-4) << x;
      }
    // bf16 / fp16 inputs: rounded after each op, so visibly different, yet bounded.
    for (DType dt : {DType::BF16, DType::F16}) {
      Tensor qh({1, 1, 8, D}, dt), kh({1, 1, 40, D}, dt), vh({1, 1, 40, D}, dt);
      qh.fill_random(rng), kh.fill_random(rng), vh.fill_random(rng);
      const KernelSpec spec = rope_spec(scalings(8)[3].params, RopeStyle::Gptj, 0, 1.0);  // yarn
      const double err = max_abs_diff(attention(spec, args_of(qh, kh, vh), Precision::Naive).out,
                                      attention(spec, args_of(qh, kh, vh)).out);
      EXPECT_GT(err, 0.0) << dtype_name(dt);
      EXPECT_LT(err, dt == DType::BF16 ? 0.05 : 0.01) << dtype_name(dt);
    }
  }
}

TEST(RopeErrors, BadParametersAreTypedErrors) {
  std::mt19937_64 rng(7);
  const Case c(1, 1, 1, 2, 5, 8, std::nullopt, rng);
  RopeParams yarn;
  yarn.rope_type = RopeScaling::Yarn;
  yarn.factor = 4;  // no original_max_position_embeddings
  EXPECT_EQ(code_of([&] { attention(rope_spec(yarn, RopeStyle::Neox, 0), c.args()); }), ErrorCode::Verify);
  RopeParams lr;
  lr.rope_type = RopeScaling::Longrope;
  lr.long_factor = lr.short_factor = {1, 1, 1};  // 4 pairs rotate at D = 8
  EXPECT_EQ(code_of([&] { attention(rope_spec(lr, RopeStyle::Neox, 0), c.args()); }), ErrorCode::Verify);
  RopeParams base;
  base.base = 1.0;
  EXPECT_EQ(code_of([&] { attention(rope_spec(base, RopeStyle::Neox, 0), c.args()); }), ErrorCode::Verify);
  EXPECT_EQ(code_of([&] { attention(rope_spec(RopeParams{}, RopeStyle::Neox, 6), c.args()); }),
            ErrorCode::Internal) << "rotary_dim 6 of 8 is valid";
  EXPECT_EQ(code_of([&] { attention(rope_spec(RopeParams{}, RopeStyle::Neox, 10), c.args()); }), ErrorCode::Shape);
  EXPECT_EQ(code_of([&] { attention(rope_spec(RopeParams{}, RopeStyle::Neox, 5), c.args()); }), ErrorCode::Shape);
}

}  // namespace
}  // namespace attnfuse::testing
