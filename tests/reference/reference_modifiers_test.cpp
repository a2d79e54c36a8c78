// The float64 reference's score modifiers (ALiBi, bias, softcap, order), block_sparse, RoPE,
// the naive same-precision form, and its speed at a test-sized length.
#include <chrono>
#include <cmath>
#include <numbers>

#include "attnfuse/block_mask.hpp"
#include "ref_helpers.hpp"

namespace attnfuse::testing {
namespace {

using reference::attention;
using reference::Precision;

TEST(ReferenceAlibi, StandardSlopesForEightHeads) {
  ScalarArgs sc;
  for (int64_t h = 0; h < 8; ++h)
    EXPECT_DOUBLE_EQ(reference::alibi_slope(sc, h, 8), std::ldexp(1.0, -int(h + 1)));  // 1/2 ... 1/256
}

TEST(ReferenceAlibi, StandardSlopesForTwelveHeadsFollowThePaper) {
  // The ALiBi paper's get_slopes(12): the 8 slopes of n=8, then slopes 0, 2, 4, 6 of n=16.
  const double want[12] = {0.5,        0.25,       0.125,      0.0625,
                           0.03125,    0.015625,   0.0078125,  0.00390625,
                           0.70710678118654757, 0.35355339059327379, 0.17677669529663689,
                           0.088388347648318447};
  ScalarArgs sc;
  for (int64_t h = 0; h < 12; ++h) EXPECT_NEAR(reference::alibi_slope(sc, h, 12), want[h], 1e-15) << h;
  EXPECT_DOUBLE_EQ(reference::alibi_slope(sc, 0, 1), 1.0 / 256);  // n = 1: 2^-8
}

TEST(ReferenceAlibi, CustomSlopes) {
  ScalarArgs sc;
  sc.alibi = AlibiSlopes::Custom;
  sc.alibi_slopes = {0.3};
  EXPECT_EQ(reference::alibi_slope(sc, 5, 8), 0.3);
  sc.alibi_slopes = {0.1, 0.2};
  EXPECT_EQ(reference::alibi_slope(sc, 1, 2), 0.2);
  EXPECT_EQ(code_of([&] { reference::alibi_slope(sc, 1, 4); }), ErrorCode::Shape);
}

// Scores of (0, h) computed by the reference, for comparing with a hand formula.
std::vector<double> scores_of(const KernelSpec& s, const AttentionArgs& a, int64_t h) {
  std::vector<double> S(size_t(a.q.shape[2] * a.k.shape[2]));
  reference::scores(s, a, 0, h, S.data());
  return S;
}

TEST(ReferenceModifiers, AlibiSoftcapAndTheirOrder) {
  std::mt19937_64 rng(4);
  const int64_t H = 4, Nq = 5, Nk = 7, D = 8;
  Tensor q({1, H, Nq, D}), k({1, H, Nk, D}), v({1, H, Nk, D});
  q.fill_random(rng, -3, 3), k.fill_random(rng, -3, 3), v.fill_random(rng);
  const AttentionArgs a = args_of(q, k, v);
  const double cap = 2.5;
  KernelSpec plain = spec_of();
  KernelSpec as = spec_of(), sa = spec_of();
  as.modifiers.push(ModifierKind::Alibi), as.modifiers.push(ModifierKind::Softcap);
  sa.modifiers.push(ModifierKind::Softcap), sa.modifiers.push(ModifierKind::Alibi);
  as.scalars.softcap = sa.scalars.softcap = cap;
  for (int64_t h = 0; h < H; ++h) {
    const auto S0 = scores_of(plain, a, h), S1 = scores_of(as, a, h), S2 = scores_of(sa, a, h);
    const double slope = std::exp2(-8.0 * double(h + 1) / 4.0);
    for (int64_t i = 0; i < Nq; ++i)
      for (int64_t j = 0; j < Nk; ++j) {
        const double s = S0[size_t(i * Nk + j)];
        const double dist = std::abs(double(i + (Nk - Nq) - j));
        EXPECT_NEAR(S1[size_t(i * Nk + j)], cap * std::tanh((s - slope * dist) / cap), 1e-12);
        EXPECT_NEAR(S2[size_t(i * Nk + j)], cap * std::tanh(s / cap) - slope * dist, 1e-12);
      }
  }
}

TEST(ReferenceModifiers, BiasBroadcastsOverBatchAndHeads) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const int64_t B = 2, H = 3, Nq = 4, Nk = 6, D = 8;
    Tensor q({B, H, Nq, D}), k({B, H, Nk, D}), v({B, H, Nk, D});
    q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
    KernelSpec s = spec_of();
    s.modifiers.push(ModifierKind::AdditiveBias);
    for (auto bshape : {std::array<int64_t, 4>{1, 1, Nq, Nk}, {B, 1, Nq, Nk}, {1, H, Nq, Nk}}) {
      Tensor small(bshape), full({B, H, Nq, Nk});
      small.fill_random(rng, -2, 2);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < Nq; ++i)
            for (int64_t j = 0; j < Nk; ++j)
              full.set(b, h, i, j, small.get(bshape[0] == 1 ? 0 : b, bshape[1] == 1 ? 0 : h, i, j));
      AttentionArgs a1 = args_of(q, k, v), a2 = args_of(q, k, v);
      a1.bias = small.view, a2.bias = full.view;
      const auto r1 = attention(s, a1), r2 = attention(s, a2);
      EXPECT_EQ(max_abs_diff(r1.out, r2.out), 0.0);
      EXPECT_EQ(max_abs_diff(r1.lse, r2.lse), 0.0);
      // And the bias really enters the scores: S = S0 + bias.
      const auto S0 = scores_of(spec_of(), a1, 1), S1 = scores_of(s, a1, 1);
      for (int64_t i = 0; i < Nq; ++i)
        for (int64_t j = 0; j < Nk; ++j)
          EXPECT_NEAR(S1[size_t(i * Nk + j)] - S0[size_t(i * Nk + j)],
                      small.get(0, bshape[1] == 1 ? 0 : 1, i, j), 1e-12);
    }
    Tensor wrong({B, 2, Nq, Nk});
    AttentionArgs a = args_of(q, k, v);
    a.bias = wrong.view;
    EXPECT_EQ(code_of([&] { attention(s, a); }), ErrorCode::Shape);
  }
}

TEST(ReferenceBlockSparse, CausalPredicateMaskEqualsCausal) {
  std::mt19937_64 rng(8);
  const int64_t B = 1, H = 2, Nq = 37, Nk = 53, D = 8;
  Tensor q({B, H, Nq, D}), k({B, H, Nk, D}), v({B, H, Nk, D});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  const int64_t off = Nk - Nq;
  const BlockMask bm = BlockMask::from_predicate(
      [&](int64_t, int64_t, int64_t i, int64_t j) { return j <= i + off; }, 1, 1, Nq, Nk, 16, 8);
  KernelSpec causal = spec_of(), sparse = spec_of();
  causal.masks.add(MaskKind::Causal);
  sparse.masks.add(MaskKind::BlockSparse);
  AttentionArgs a = args_of(q, k, v);
  a.block_mask = &bm;
  const auto r1 = attention(causal, a), r2 = attention(sparse, a);
  EXPECT_EQ(max_abs_diff(r1.out, r2.out), 0.0);
  EXPECT_EQ(max_abs_diff(r1.lse, r2.lse), 0.0);
  for (int64_t i = 0; i < Nq; ++i)
    for (int64_t j = 0; j < Nk; ++j) EXPECT_EQ(reference::keeps(sparse, a, 0, 1, i, j), j <= i + off);

  // A dense-grid mask keeps whole blocks; combined with causal only the intersection stays.
  const int64_t nqb = 3, nkb = 7;
  std::vector<uint8_t> grid(size_t(nqb * nkb), 0);
  grid[0 * nkb + 6] = 1, grid[1 * nkb + 0] = 1, grid[2 * nkb + 3] = 1;
  const BlockMask dm = BlockMask::from_dense(grid.data(), 1, 1, Nq, Nk, 16, 8);
  a.block_mask = &dm;
  sparse.masks.add(MaskKind::Causal);
  for (int64_t i = 0; i < Nq; ++i)
    for (int64_t j = 0; j < Nk; ++j)
      EXPECT_EQ(reference::keeps(sparse, a, 0, 0, i, j), grid[size_t(i / 16 * nkb + j / 8)] && j <= i + off);
  const auto r3 = attention(sparse, a);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(r3.lse[size_t(i)], -INFINITY) << "block (0,6) is above the diagonal";

  const BlockMask other = BlockMask::from_predicate([](int64_t, int64_t, int64_t, int64_t) { return true; },
                                                    1, 1, Nq + 1, Nk, 16, 8);
  a.block_mask = &other;
  EXPECT_EQ(code_of([&] { attention(sparse, a); }), ErrorCode::Shape);
}

TEST(ReferenceRope, TwoDimsByHand) {
  // D = 2, one pair with θ_0 = 1: s = scale * <R(p) q, R(0) k> = cos(p)/sqrt(2) for q = k = e1.
  Tensor q({1, 1, 1, 2}), k({1, 1, 1, 2}), v({1, 1, 1, 2});
  q.fill({1, 0}), k.fill({1, 0});
  KernelSpec s = spec_of();
  s.score = ScoreKind::Rope;
  AttentionArgs a = args_of(q, k, v);
  for (int64_t p : {0, 1, 5, 1000}) {
    a.q_offset = p;
    EXPECT_NEAR(scores_of(s, a, 0)[0], std::cos(double(p)) / std::sqrt(2.0), 1e-12) << p;
  }
}

// Direct per-cell RoPE score, independent of the reference's layout.
double rope_score(const Tensor& q, const Tensor& k, int64_t i, int64_t j, int64_t pq, const RopeParams& rp,
                  int rd, double window_k) {
  const int64_t D = q.view.shape[3];
  double s = 0;
  for (int64_t x = rd; x < D; ++x) s += double(q.get(0, 0, i, x)) * k.get(0, 0, j, x);
  for (int r = 0; r < rd / 2; ++r) {
    const int ia = rp.style == RopeStyle::Neox ? r : 2 * r, ib = rp.style == RopeStyle::Neox ? r + rd / 2 : 2 * r + 1;
    const double th = std::pow(rp.base, -2.0 * r / rd);
    if (window_k > 0 && std::abs(double(pq - j)) > window_k * 2 * std::numbers::pi / th) continue;
    const double aq = pq * th, ak = j * th;
    const double qa = q.get(0, 0, i, ia), qb = q.get(0, 0, i, ib), ka = k.get(0, 0, j, ia), kb = k.get(0, 0, j, ib);
    const double rqa = qa * std::cos(aq) - qb * std::sin(aq), rqb = qb * std::cos(aq) + qa * std::sin(aq);
    const double rka = ka * std::cos(ak) - kb * std::sin(ak), rkb = kb * std::cos(ak) + ka * std::sin(ak);
    s += rqa * rka + rqb * rkb;
  }
  return s / std::sqrt(double(D));
}

TEST(ReferenceRope, NeoxGptjRotaryDimAndWindowMatchADirectFormula) {
  std::mt19937_64 rng(21);
  const int64_t Nq = 6, Nk = 40, D = 12;
  Tensor q({1, 1, Nq, D}), k({1, 1, Nk, D}), v({1, 1, Nk, D});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj})
    for (int rd : {0, 8})
      for (double wk : {0.0, 0.05, 0.5}) {
        SCOPED_TRACE(::testing::Message() << "style=" << rope_style_name(style) << " rd=" << rd << " k=" << wk);
        KernelSpec s = spec_of();
        s.score = wk > 0 ? ScoreKind::RopeWindow : ScoreKind::Rope;
        s.scalars.rope.style = style;
        s.scalars.rope.rotary_dim = rd;
        s.scalars.rope.base = 100.0;  // short wavelengths, so the window matters at these lengths
        s.scalars.rope.window_k = wk;
        const AttentionArgs a = args_of(q, k, v);
        const auto S = scores_of(s, a, 0);
        for (int64_t i = 0; i < Nq; ++i)
          for (int64_t j = 0; j < Nk; ++j)
            EXPECT_NEAR(S[size_t(i * Nk + j)],
                        rope_score(q, k, i, j, i + Nk - Nq, s.scalars.rope, rd ? rd : int(D), wk), 1e-12);
      }
  KernelSpec bad = spec_of();
  bad.score = ScoreKind::Rope;
  bad.scalars.rope.rope_type = RopeScaling::Yarn;  // without original_max_position_embeddings
  EXPECT_EQ(code_of([&] { attention(bad, args_of(q, k, v)); }), ErrorCode::Verify);
  bad.scalars.rope.rope_type = RopeScaling::None;
  bad.scalars.rope.rotary_dim = 7;
  EXPECT_EQ(code_of([&] { attention(bad, args_of(q, k, v)); }), ErrorCode::Shape);
}

TEST(ReferenceNaive, Fp32IsCloseAndBf16IsRoundedButBounded) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const int64_t B = 1, H = 2, Nq = 33, Nk = 65, D = 32;
    KernelSpec s = spec_of();
    s.masks.add(MaskKind::Causal);
    s.modifiers.push(ModifierKind::Softcap);
    s.scalars.softcap = 20;
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(dtype_name(dt));
      Tensor q({B, H, Nq, D}, dt), k({B, H, Nk, D}, dt), v({B, H, Nk, D}, dt);
      q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
      const auto exact = attention(s, args_of(q, k, v), Precision::F64);
      const auto naive = attention(s, args_of(q, k, v), Precision::Naive);
      const double err = max_abs_diff(exact.out, naive.out);
      if (dt == DType::F32) {
        EXPECT_LT(err, 1e-5);
      } else {
        EXPECT_GT(err, 0.0) << "the naive form rounds S, P and O";
        EXPECT_LT(err, dt == DType::BF16 ? 3e-2 : 4e-3);
        for (double o : naive.out) EXPECT_EQ(o, double(round_to(dt, float(o)))) << "O is rounded to the dtype";
      }
      EXPECT_LT(max_abs_diff(exact.lse, naive.lse), dt == DType::F32 ? 1e-5 : 5e-2);
    }
  }
}

TEST(ReferenceSpeed, OneHeadAt2kRunsInAboutASecond) {
  // The oracle is used up to ~4k in tests: a 2k x 2k head must be quick in Release builds.
  std::mt19937_64 rng(1);
  const int64_t N = 2048, D = 64;
  Tensor q({1, 1, N, D}), k({1, 1, N, D}), v({1, 1, N, D});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::Causal);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = attention(s, args_of(q, k, v));
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("seconds", std::to_string(sec));
  EXPECT_EQ(r.out.size(), size_t(N * D));
  EXPECT_LT(sec, 10.0) << "generous bound for a loaded 2-core machine";
}

}  // namespace
}  // namespace attnfuse::testing
