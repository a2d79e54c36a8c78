// The float64 reference on hand-computed cases: softmax/relu, positions and masks, empty rows,
// NaN propagation, zero-sized shapes, GQA, strided views and argument errors.
#include <cmath>
#include <numbers>

#include "ref_helpers.hpp"

namespace attnfuse::testing {
namespace {

using reference::attention;
using reference::Precision;

constexpr double e = std::numbers::e;
constexpr double kTol = 1e-12;

// q0 = (1,0), q1 = (0,1); k0 = (1,0), k1 = (0,1), k2 = (1,1); v0 = (1,0), v1 = (0,1), v2 = (2,3).
// With scale 1: S = [[1,0,1],[0,1,1]].
struct Tiny {
  Tensor q{{1, 1, 2, 2}}, k{{1, 1, 3, 2}}, v{{1, 1, 3, 2}};
  Tiny() {
    q.fill({1, 0, 0, 1});
    k.fill({1, 0, 0, 1, 1, 1});
    v.fill({1, 0, 0, 1, 2, 3});
  }
};

TEST(ReferenceBasic, TinySoftmaxByHand) {
  Tiny t;
  KernelSpec s = spec_of();
  s.scalars.scale = 1.0;
  const auto r = attention(s, args_of(t.q, t.k, t.v));
  const double z = 2 * e + 1;
  ASSERT_EQ(r.out.size(), 4u);
  EXPECT_NEAR(r.out[0], 3 * e / z, kTol);
  EXPECT_NEAR(r.out[1], (1 + 3 * e) / z, kTol);
  EXPECT_NEAR(r.out[2], (1 + 2 * e) / z, kTol);
  EXPECT_NEAR(r.out[3], 4 * e / z, kTol);
  EXPECT_NEAR(r.lse[0], std::log(z), kTol);
  EXPECT_NEAR(r.lse[1], std::log(z), kTol);
}

TEST(ReferenceBasic, DefaultScaleIsOneOverSqrtD) {
  Tiny t;
  const auto r = attention(spec_of(), args_of(t.q, t.k, t.v));
  const double a = std::exp(1 / std::sqrt(2.0));  // exp(scale * 1)
  const double z = 2 * a + 1;
  EXPECT_NEAR(r.out[0], 3 * a / z, kTol);
  EXPECT_NEAR(r.lse[0], std::log(z), kTol);
}

TEST(ReferenceBasic, CausalBottomRightWithFewerQueries) {
  // Nq=2, Nk=3: q_offset = 1, so query 0 sits at position 1 and sees keys 0 and 1.
  Tiny t;
  KernelSpec s = spec_of();
  s.scalars.scale = 1.0;
  s.masks.add(MaskKind::Causal);
  const auto r = attention(s, args_of(t.q, t.k, t.v));
  EXPECT_NEAR(r.out[0], e / (e + 1), kTol);
  EXPECT_NEAR(r.out[1], 1 / (e + 1), kTol);
  EXPECT_NEAR(r.lse[0], std::log(e + 1), kTol);
  EXPECT_NEAR(r.out[2], (1 + 2 * e) / (2 * e + 1), kTol);  // last query sees every key
  EXPECT_NEAR(r.out[3], 4 * e / (2 * e + 1), kTol);
}

TEST(ReferenceBasic, CausalWithExplicitQOffset) {
  // q_offset = 0 (top-left alignment): query 0 sees key 0, query 1 sees keys 0..1.
  Tiny t;
  KernelSpec s = spec_of();
  s.scalars.scale = 1.0;
  s.masks.add(MaskKind::Causal);
  AttentionArgs a = args_of(t.q, t.k, t.v);
  a.q_offset = 0;
  const auto r = attention(s, a);
  EXPECT_NEAR(r.out[0], 1.0, kTol);
  EXPECT_NEAR(r.out[1], 0.0, kTol);
  EXPECT_NEAR(r.lse[0], 1.0, kTol);
  EXPECT_NEAR(r.out[2], 1 / (1 + e), kTol);  // S row 1 = (0, 1): p = (1, e)/(1+e)
  EXPECT_NEAR(r.out[3], e / (1 + e), kTol);
  EXPECT_TRUE(reference::keeps(s, a, 0, 0, 0, 0));
  EXPECT_FALSE(reference::keeps(s, a, 0, 0, 0, 1));
}

TEST(ReferenceBasic, CausalWithMoreQueriesThanKeysHasEmptyRows) {
  // Nq=3, Nk=2: q_offset = -1, so query 0 sits at position -1 and sees nothing.
  Tensor q({1, 1, 3, 2}), k({1, 1, 2, 2}), v({1, 1, 2, 2});
  q.fill({1, 0, 0, 1, 1, 1});
  k.fill({1, 0, 0, 1});
  v.fill({1, 2, 3, 4});
  KernelSpec s = spec_of();
  s.scalars.scale = 1.0;
  s.masks.add(MaskKind::Causal);
  const auto r = attention(s, args_of(q, k, v));
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_EQ(r.out[1], 0.0);
  EXPECT_EQ(r.lse[0], -INFINITY);
  EXPECT_NEAR(r.out[2], 1.0, kTol);  // query 1 at position 0: key 0 only
  EXPECT_NEAR(r.out[3], 2.0, kTol);
  EXPECT_NEAR(r.lse[1], 0.0, kTol);  // S = <(0,1),(1,0)> = 0
  EXPECT_NEAR(r.out[4], 2.0, kTol);  // query 2 at position 1: keys 0,1 with equal scores 1
  EXPECT_NEAR(r.out[5], 3.0, kTol);
  EXPECT_NEAR(r.lse[2], 1 + std::log(2.0), kTol);
}

TEST(ReferenceBasic, SlidingWindowKeepsAbsDeltaBelowW) {
  const int64_t N = 6;
  Tensor q({1, 1, N, 1}), k({1, 1, N, 1}), v({1, 1, N, 1});
  for (int64_t j = 0; j < N; ++j) {
    q.set(0, 0, j, 0, 0.0f);  // all scores 0: p is uniform over the kept keys
    v.set(0, 0, j, 0, float(j));
  }
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::SlidingWindow);
  s.scalars.window = 2;  // keeps j in {i-1, i, i+1}
  const auto r = attention(s, args_of(q, k, v));
  EXPECT_NEAR(r.out[0], 0.5, kTol);  // keys 0, 1
  for (int64_t i = 1; i < N - 1; ++i) EXPECT_NEAR(r.out[size_t(i)], double(i), kTol);
  EXPECT_NEAR(r.out[N - 1], N - 1.5, kTol);
  EXPECT_NEAR(r.lse[0], std::log(2.0), kTol);
  EXPECT_NEAR(r.lse[2], std::log(3.0), kTol);

  s.masks.add(MaskKind::Causal);  // causal local window: 0 <= delta < 2
  const auto c = attention(s, args_of(q, k, v));
  EXPECT_NEAR(c.out[0], 0.0, kTol);
  for (int64_t i = 1; i < N; ++i) EXPECT_NEAR(c.out[size_t(i)], i - 0.5, kTol);
}

TEST(ReferenceBasic, FullyMaskedRowsGiveZeroAndMinusInfNeverNaN) {
  std::mt19937_64 rng(5);
  Tensor q({2, 3, 9, 8}), k({2, 3, 4, 8}), v({2, 3, 4, 5});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention}) {
    KernelSpec s = spec_of(norm);
    s.masks.add(MaskKind::Causal);  // q_offset = -5: queries 0..4 see nothing
    const auto r = attention(s, args_of(q, k, v));
    for (int64_t bh = 0; bh < 6; ++bh)
      for (int64_t i = 0; i < 9; ++i) {
        const double lse = r.lse[size_t(bh * 9 + i)];
        if (i < 5) {
          EXPECT_EQ(lse, -INFINITY);
          for (int64_t x = 0; x < 5; ++x) EXPECT_EQ(r.out[size_t((bh * 9 + i) * 5 + x)], 0.0);
        } else {
          EXPECT_TRUE(std::isfinite(lse));
        }
        for (int64_t x = 0; x < 5; ++x) EXPECT_FALSE(std::isnan(r.out[size_t((bh * 9 + i) * 5 + x)]));
      }
  }
}

TEST(ReferenceBasic, MinusInfBiasOnEveryKeptKeyIsAnEmptyRow) {
  Tiny t;
  Tensor bias({1, 1, 2, 3});
  bias.fill({-INFINITY, -INFINITY, -INFINITY, 0, 0, 0});
  KernelSpec s = spec_of();
  s.modifiers.push(ModifierKind::AdditiveBias);
  AttentionArgs a = args_of(t.q, t.k, t.v);
  a.bias = bias.view;
  const auto r = attention(s, a);
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_EQ(r.out[1], 0.0);
  EXPECT_EQ(r.lse[0], -INFINITY);
  EXPECT_TRUE(std::isfinite(r.lse[1]));
}

TEST(ReferenceBasic, ReluAttentionDividesByKeptKeys) {
  Tiny t;
  t.q.set(0, 0, 1, 1, -1.0f);  // q1 = (0,-1): S row 1 = (0, -1, -1)
  KernelSpec s = spec_of(NormKind::ReluAttention);
  s.scalars.scale = 1.0;
  const auto r = attention(s, args_of(t.q, t.k, t.v));
  EXPECT_NEAR(r.out[0], (1 + 2) / 3.0, kTol);  // p = (1, 0, 1)/3
  EXPECT_NEAR(r.out[1], 3 / 3.0, kTol);
  EXPECT_NEAR(r.lse[0], std::log(3.0), kTol);
  EXPECT_EQ(r.out[2], 0.0);  // every score <= 0
  EXPECT_EQ(r.out[3], 0.0);
  EXPECT_NEAR(r.lse[1], std::log(3.0), kTol);

  s.masks.add(MaskKind::Causal);  // row 0 keeps 2 keys: p = (1, 0)/2
  const auto c = attention(s, args_of(t.q, t.k, t.v));
  EXPECT_NEAR(c.out[0], 0.5, kTol);
  EXPECT_NEAR(c.out[1], 0.0, kTol);
  EXPECT_NEAR(c.lse[0], std::log(2.0), kTol);
}

TEST(ReferenceBasic, NaNPropagatesFromKeptInputsOnly) {
  std::mt19937_64 rng(9);
  Tensor q({1, 1, 4, 4}), k({1, 1, 4, 4}), v({1, 1, 4, 3});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  q.set(0, 0, 1, 2, NAN);  // query row 1
  v.set(0, 0, 3, 0, NAN);  // key 3: only query 3 sees it under causal
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::Causal);
  const auto r = attention(s, args_of(q, k, v));
  for (int64_t x = 0; x < 3; ++x) {
    EXPECT_FALSE(std::isnan(r.out[size_t(0 * 3 + x)]));
    EXPECT_TRUE(std::isnan(r.out[size_t(1 * 3 + x)]));
    EXPECT_FALSE(std::isnan(r.out[size_t(2 * 3 + x)]));
  }
  EXPECT_TRUE(std::isnan(r.lse[1]));
  EXPECT_FALSE(std::isnan(r.lse[3]));
  EXPECT_TRUE(std::isnan(r.out[3 * 3 + 0]));
  EXPECT_FALSE(std::isnan(r.out[3 * 3 + 1]));

  KernelSpec relu = spec_of(NormKind::ReluAttention);
  const auto rr = attention(relu, args_of(q, k, v));
  EXPECT_TRUE(std::isnan(rr.out[3]));  // relu(NaN) is NaN, not 0
}

TEST(ReferenceBasic, ZeroSizedShapes) {
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::Causal);
  {
    Tensor q({0, 2, 5, 4}), k({0, 2, 5, 4}), v({0, 2, 5, 4});
    const auto r = attention(s, args_of(q, k, v));
    EXPECT_TRUE(r.out.empty());
    EXPECT_TRUE(r.lse.empty());
  }
  {
    Tensor q({1, 2, 0, 4}), k({1, 2, 5, 4}), v({1, 2, 5, 4});
    EXPECT_TRUE(attention(s, args_of(q, k, v)).out.empty());
  }
  {
    Tensor q({1, 2, 3, 4}), k({1, 2, 0, 4}), v({1, 2, 0, 6});
    const auto r = attention(spec_of(), args_of(q, k, v));  // no keys at all
    ASSERT_EQ(r.out.size(), 36u);
    for (double x : r.out) EXPECT_EQ(x, 0.0);
    for (double l : r.lse) EXPECT_EQ(l, -INFINITY);
  }
  {
    Tensor q({1, 1, 3, 4}), k({1, 1, 3, 4}), v({1, 1, 3, 0});
    const auto r = attention(spec_of(), args_of(q, k, v));
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.lse.size(), 3u);
  }
}

TEST(ReferenceBasic, GqaReadsKvHeadHOverGroup) {
  for (uint64_t seed : seeds()) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937_64 rng(seed);
    const int64_t B = 2, Hq = 8, Hkv = 2, Nq = 7, Nk = 11, D = 16;
    Tensor q({B, Hq, Nq, D}), k({B, Hkv, Nk, D}), v({B, Hkv, Nk, D});
    q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
    Tensor k2({B, Hq, Nk, D}), v2({B, Hq, Nk, D});  // K/V repeated per query head
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t j = 0; j < Nk; ++j)
          for (int64_t x = 0; x < D; ++x) {
            k2.set(b, h, j, x, k.get(b, h / 4, j, x));
            v2.set(b, h, j, x, v.get(b, h / 4, j, x));
          }
    KernelSpec s = spec_of();
    s.masks.add(MaskKind::Causal);
    const auto a = attention(s, args_of(q, k, v));
    const auto r = attention(s, args_of(q, k2, v2));
    EXPECT_EQ(max_abs_diff(a.out, r.out), 0.0);
    EXPECT_EQ(max_abs_diff(a.lse, r.lse), 0.0);
  }
}

TEST(ReferenceBasic, StridedViewsReadLikeContiguous) {
  std::mt19937_64 rng(3);
  const int64_t B = 2, H = 3, N = 5, D = 4;
  Tensor q({B, H, N, D}), k({B, H, N, D}), v({B, H, N, D});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  // The same tensors stored BSHD with a padded row (stride 2*D per head step ... see below).
  auto to_bshd = [&](const Tensor& t, std::vector<float>& store) {
    const int64_t pad = 3;  // extra elements after each token to make strides irregular
    store.assign(size_t(B * N * (H * D + pad)), 999.0f);
    TensorView vw;
    vw.data = store.data();
    vw.dtype = DType::F32;
    vw.shape = {B, H, N, D};
    vw.strides = {N * (H * D + pad), D, H * D + pad, 1};
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t s = 0; s < N; ++s)
          for (int64_t d = 0; d < D; ++d) store[size_t(vw.offset(b, h, s, d))] = t.get(b, h, s, d);
    return vw;
  };
  std::vector<float> qs, ks, vs;
  AttentionArgs st;
  st.q = to_bshd(q, qs), st.k = to_bshd(k, ks), st.v = to_bshd(v, vs);
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::SlidingWindow);
  s.scalars.window = 3;
  const auto a = attention(s, args_of(q, k, v));
  const auto b = attention(s, st);
  EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0);
  EXPECT_EQ(max_abs_diff(a.lse, b.lse), 0.0);
}

TEST(ReferenceBasic, DecompositionMatchesAttention) {
  std::mt19937_64 rng(17);
  const int64_t B = 1, Hq = 4, Hkv = 2, Nq = 9, Nk = 13, D = 8;
  Tensor q({B, Hq, Nq, D}), k({B, Hkv, Nk, D}), v({B, Hkv, Nk, D});
  q.fill_random(rng), k.fill_random(rng), v.fill_random(rng);
  KernelSpec s = spec_of();
  s.masks.add(MaskKind::Causal);
  s.modifiers.push(ModifierKind::Alibi);
  const AttentionArgs a = args_of(q, k, v);
  const auto full = attention(s, a);
  for (int64_t h = 0; h < Hq; ++h) {
    std::vector<double> S(static_cast<size_t>(Nq * Nk)), lse(static_cast<size_t>(Nq)), O(static_cast<size_t>(Nq * D));
    reference::scores(s, a, 0, h, S.data());
    reference::normalize(s, a, 0, h, S.data(), lse.data());
    reference::pv(a, 0, h, S.data(), O.data());
    for (int64_t i = 0; i < Nq; ++i) {
      EXPECT_EQ(lse[size_t(i)], full.lse[size_t(h * Nq + i)]);
      for (int64_t x = 0; x < D; ++x) EXPECT_EQ(O[size_t(i * D + x)], full.out[size_t((h * Nq + i) * D + x)]);
    }
  }
}

TEST(ReferenceBasic, BadArgumentsRaiseTypedErrors) {
  Tensor q({1, 3, 4, 8}), k({1, 2, 4, 8}), v({1, 2, 4, 8});
  EXPECT_EQ(code_of([&] { attention(spec_of(), args_of(q, k, v)); }), ErrorCode::Shape)
      << "3 query heads over 2 KV heads";
  Tensor q2({1, 2, 4, 8}), kd({1, 2, 4, 6});
  EXPECT_EQ(code_of([&] { attention(spec_of(), args_of(q2, kd, v)); }), ErrorCode::Shape);
  Tensor vb({1, 2, 5, 8});
  EXPECT_EQ(code_of([&] { attention(spec_of(), args_of(q2, k, vb)); }), ErrorCode::Shape);
  KernelSpec hd = spec_of();
  hd.head_dim = 64;
  EXPECT_EQ(code_of([&] { attention(hd, args_of(q2, k, v)); }), ErrorCode::Shape);

  KernelSpec bias = spec_of();
  bias.modifiers.push(ModifierKind::AdditiveBias);
  EXPECT_EQ(code_of([&] { attention(bias, args_of(q2, k, v)); }), ErrorCode::MissingTensor);
  KernelSpec bs = spec_of();
  bs.masks.add(MaskKind::BlockSparse);
  EXPECT_EQ(code_of([&] { attention(bs, args_of(q2, k, v)); }), ErrorCode::MissingTensor);
  try {
    attention(bias, args_of(q2, k, v));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("additive_bias"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnfuse::testing
