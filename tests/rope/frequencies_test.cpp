// Hand-derived checks of the RoPE frequency formulas (cited per test), parameter validation,
// the pair convention and the float64 rotation's algebra.
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnfuse/error.hpp"
#include "common/tensors.hpp"
#include "rope/frequencies.hpp"

namespace attnfuse::rope {
namespace {

RopeParams plain(double base = 10000.0) {
  RopeParams p;
  p.base = base;
  return p;
}

// RoFormer / HF default: θ_r = base^(-2r/d).
TEST(RopeFrequencies, DefaultIsBasePower) {
  const RopeFrequencies f = rope_frequencies(plain(), 64, 0);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  EXPECT_NEAR(f.inv_freq[16], 0.01, 1e-17);  // 10000^(-32/64)
  EXPECT_NEAR(f.inv_freq[31], std::pow(10000.0, -62.0 / 64), 1e-20);
  EXPECT_EQ(f.attention_factor, 1.0);
}

// Partial rotary: the exponent's denominator is rotary_dim, not head_dim.
TEST(RopeFrequencies, PartialRotaryUsesRotaryDim) {
  RopeParams p = plain();
  p.rotary_dim = 16;
  const RopeFrequencies f = rope_frequencies(p, 64, 0);
  ASSERT_EQ(f.inv_freq.size(), 8u);
  EXPECT_NEAR(f.inv_freq[4], 0.01, 1e-17);  // 10000^(-8/16)
}

// HF linear: inv_freq / factor.
TEST(RopeFrequencies, LinearDividesByFactor) {
  RopeParams p = plain();
  p.rope_type = RopeScaling::Linear;
  p.factor = 2;
  const RopeFrequencies d = rope_frequencies(plain(), 128, 0), f = rope_frequencies(p, 128, 0);
  for (size_t r = 0; r < 64; ++r) EXPECT_EQ(f.inv_freq[r], d.inv_freq[r] / 2) << r;
}

// HF dynamic NTK: base' = base * (factor * L / L0 - (factor - 1))^(d/(d-2)) with
// L = max(seq_len, L0); the default RoPE for L <= L0.
TEST(RopeFrequencies, DynamicNtkGrowsBaseBeyondOriginal) {
  RopeParams p = plain();
  p.rope_type = RopeScaling::Dynamic;
  p.factor = 2;
  p.original_max_position_embeddings = 4096;
  const RopeFrequencies d = rope_frequencies(plain(), 128, 0);
  for (int64_t seq : {int64_t{0}, int64_t{1}, int64_t{4096}})
    EXPECT_EQ(rope_frequencies(p, 128, seq).inv_freq, d.inv_freq) << seq;
  const double base = 10000.0 * std::pow(2.0 * 16384 / 4096 - 1.0, 128.0 / 126.0);
  const RopeFrequencies f = rope_frequencies(p, 128, 16384);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  for (int r = 1; r < 64; ++r) {
    EXPECT_NEAR(f.inv_freq[static_cast<size_t>(r)], std::pow(base, -2.0 * r / 128), 1e-15) << r;
    EXPECT_LT(f.inv_freq[static_cast<size_t>(r)], d.inv_freq[static_cast<size_t>(r)]);
  }
}

// HF llama3: wavelengths below L0/high kept, above L0/low divided by factor, between blended by
// s = (L0/λ - low)/(high - low): θ' = (1 - s) θ/factor + s θ.
TEST(RopeFrequencies, Llama3Bands) {
  RopeParams p = plain(500000);
  p.rope_type = RopeScaling::Llama3;
  p.factor = 8;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position_embeddings = 8192;
  const RopeFrequencies d = rope_frequencies(plain(500000), 128, 0), f = rope_frequencies(p, 128, 0);
  int kept = 0, divided = 0, blended = 0;
  for (size_t r = 0; r < 64; ++r) {
    const double lambda = wavelength(d.inv_freq[r]);
    if (lambda < 2048) {
      EXPECT_EQ(f.inv_freq[r], d.inv_freq[r]) << r;
      ++kept;
    } else if (lambda > 8192) {
      EXPECT_DOUBLE_EQ(f.inv_freq[r], d.inv_freq[r] / 8) << r;
      ++divided;
    } else {
      const double s = (8192 / lambda - 1) / 3;
      EXPECT_NEAR(f.inv_freq[r], (1 - s) * d.inv_freq[r] / 8 + s * d.inv_freq[r], 1e-18) << r;
      ++blended;
    }
  }
  // base 500000, d 128: λ_r = 2π 500000^(r/64) is below 2048 for r <= 28 (r < 28.22) and
  // above 8192 for r >= 35 (r > 34.98).
  EXPECT_EQ(kept, 29);
  EXPECT_EQ(blended, 6);
  EXPECT_EQ(divided, 29);
}

// HF yarn for Qwen2.5 (base 1e6, d 128, factor 4, L0 32768): the correction range is
// floor(d ln(L0/(32·2π)) / (2 ln base)) = 23 to ceil(d ln(L0/(1·2π)) / (2 ln base)) = 40;
// pairs <= 23 keep θ_r, pairs >= 40 get θ_r/4, between ramp = (r - 23)/17 blends them.
TEST(RopeFrequencies, YarnRampAndAttentionFactor) {
  RopeParams p = plain(1e6);
  p.rope_type = RopeScaling::Yarn;
  p.factor = 4;
  p.original_max_position_embeddings = 32768;
  const RopeFrequencies d = rope_frequencies(plain(1e6), 128, 0), f = rope_frequencies(p, 128, 0);
  for (int r = 0; r < 64; ++r) {
    const double th = d.inv_freq[static_cast<size_t>(r)];
    const double ramp = std::clamp((r - 23) / 17.0, 0.0, 1.0);
    EXPECT_NEAR(f.inv_freq[static_cast<size_t>(r)], th / 4 * ramp + th * (1 - ramp), 1e-14 * th) << r;
  }
  EXPECT_EQ(f.inv_freq[23], d.inv_freq[23]);
  EXPECT_DOUBLE_EQ(f.inv_freq[40], d.inv_freq[40] / 4);
  EXPECT_DOUBLE_EQ(f.attention_factor, 0.1 * std::log(4.0) + 1);  // YaRN's mscale
  p.attention_factor = 0.5;
  EXPECT_EQ(rope_frequencies(p, 128, 0).attention_factor, 0.5);  // explicit wins
  p.attention_factor.reset();
  p.mscale = 0.707;  // DeepSeek: mscale(factor, mscale) / mscale(factor, mscale_all_dim)
  p.mscale_all_dim = 1.0;
  EXPECT_DOUBLE_EQ(rope_frequencies(p, 128, 0).attention_factor,
                   (0.0707 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1));
  p.mscale_all_dim = 0;  // only one given: the plain default (HF: `if mscale and mscale_all_dim`)
  EXPECT_DOUBLE_EQ(rope_frequencies(p, 128, 0).attention_factor, 0.1 * std::log(4.0) + 1);
  p.factor = 1;  // no extension: no temperature
  EXPECT_EQ(rope_frequencies(p, 128, 0).attention_factor, 1.0);
}

// HF longrope: θ_r = 1/(ext_r base^(2r/d)), ext = long_factor iff seq_len > L0.
TEST(RopeFrequencies, LongropeSwitchesOnSeqLen) {
  RopeParams p = plain();
  p.rope_type = RopeScaling::Longrope;
  p.short_factor = {1, 2, 4, 8};
  p.long_factor = {3, 5, 7, 9};
  p.original_max_position_embeddings = 100;
  p.factor = 1;
  const RopeFrequencies d = rope_frequencies(plain(), 8, 0);
  for (int64_t seq : {int64_t{0}, int64_t{100}, int64_t{101}}) {
    const RopeFrequencies f = rope_frequencies(p, 8, seq);
    const std::vector<double>& ext = seq > 100 ? p.long_factor : p.short_factor;
    for (size_t r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(f.inv_freq[r], d.inv_freq[r] / ext[r]) << seq << " " << r;
    EXPECT_EQ(f.attention_factor, 1.0);  // factor <= 1
  }
  p.original_max_position_embeddings = 0;  // unknown original context: always the short factors
  EXPECT_DOUBLE_EQ(rope_frequencies(p, 8, 1 << 20).inv_freq[3], d.inv_freq[3] / 8);
}

void expect_verify(const RopeParams& p, int head_dim, const std::string& needle) {
  try {
    rope_frequencies(p, head_dim, 0);
    ADD_FAILURE() << "no error; wanted one mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RopeFrequencies, BadParametersAreVerifyErrors) {
  RopeParams p = plain();
  p.rotary_dim = 7;
  expect_verify(p, 64, "rotary_dim = 7");
  p.rotary_dim = 128;
  expect_verify(p, 64, "at most head_dim = 64");
  expect_verify(plain(1.0), 64, "base");
  expect_verify(plain(NAN), 64, "base");
  RopeParams l = plain();
  l.rope_type = RopeScaling::Llama3;
  l.factor = 8;
  l.low_freq_factor = 4;
  l.high_freq_factor = 4;
  l.original_max_position_embeddings = 8192;
  expect_verify(l, 64, "high_freq_factor");
  l.high_freq_factor = 5;
  l.original_max_position_embeddings = 0;
  expect_verify(l, 64, "original_max_position_embeddings");
  RopeParams y = plain();
  y.rope_type = RopeScaling::Yarn;
  y.factor = 4;
  expect_verify(y, 64, "original_max_position_embeddings");
  y.original_max_position_embeddings = 4096;
  y.factor = 0;
  expect_verify(y, 64, "factor");
  RopeParams lr = plain();
  lr.rope_type = RopeScaling::Longrope;
  lr.long_factor = {1, 1};
  lr.short_factor = {1, 1, 1};
  expect_verify(lr, 4, "one long_factor and one short_factor per rotated pair");
  lr.long_factor = {1, -1};
  lr.short_factor = {1, 1};
  expect_verify(lr, 4, "long_factor[1]");
  RopeParams dy = plain();
  dy.rope_type = RopeScaling::Dynamic;
  dy.factor = 2;
  dy.original_max_position_embeddings = 16;
  dy.rotary_dim = 2;
  expect_verify(dy, 64, "rotary_dim > 2");
}

TEST(RopeFrequencies, PairConvention) {
  EXPECT_EQ(pair_dims(RopeStyle::Neox, 128, 0).a, 0);
  EXPECT_EQ(pair_dims(RopeStyle::Neox, 128, 0).b, 64);
  EXPECT_EQ(pair_dims(RopeStyle::Neox, 16, 7).b, 15);
  EXPECT_EQ(pair_dims(RopeStyle::Gptj, 128, 5).a, 10);
  EXPECT_EQ(pair_dims(RopeStyle::Gptj, 128, 5).b, 11);
}

// A unit vector on a pair's first dim turns to (cos pθ, sin pθ): the rotation is +angle.
TEST(RopeRotate, UnitVectorTurnsByPositionTimesTheta) {
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj}) {
    RopeParams p = plain();
    p.style = style;
    const RopeFrequencies f = rope_frequencies(p, 8, 0);
    for (int r = 0; r < 4; ++r) {
      std::vector<double> v(8, 0.0);
      const PairDims d = pair_dims(style, 8, r);
      v[static_cast<size_t>(d.a)] = 1;
      rotate(p, f, 37, v.data(), 8);
      const double angle = 37 * f.inv_freq[static_cast<size_t>(r)];
      EXPECT_NEAR(v[static_cast<size_t>(d.a)], std::cos(angle), 1e-15);
      EXPECT_NEAR(v[static_cast<size_t>(d.b)], std::sin(angle), 1e-15);
    }
  }
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// <R(m) q, R(n) k> depends only on m - n (for attention factor 1); the rotated part's norm
// scales by the attention factor and unrotated dims stay put.
TEST(RopeRotate, RelativePositionAndNorm) {
  for (uint64_t seed : {uint64_t{1}, uint64_t{2}, test::fresh_seed()}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    std::uniform_int_distribution<int64_t> pos(0, 200000);
    for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj}) {
      RopeParams p = plain(500000);
      p.style = style;
      p.rotary_dim = 48;
      const RopeFrequencies f = rope_frequencies(p, 64, 0);
      std::vector<double> q(64), k(64);
      for (double& x : q) x = normal(rng);
      for (double& x : k) x = normal(rng);
      const int64_t m = pos(rng), n = pos(rng), t = pos(rng);
      auto rot = [&](std::vector<double> v, int64_t at) { rotate(p, f, at, v.data(), 64); return v; };
      const double s1 = dot(rot(q, m), rot(k, n)), s2 = dot(rot(q, m + t), rot(k, n + t));
      EXPECT_NEAR(s1, s2, 1e-9 * (1 + std::fabs(s1)));
      EXPECT_NEAR(dot(rot(q, m), rot(q, m)), dot(q, q), 1e-10 * dot(q, q));
      const std::vector<double> rq = rot(q, m);
      for (size_t i = 48; i < 64; ++i) EXPECT_EQ(rq[i], q[i]);

      RopeParams y = p;  // attention factor 1.5: rotated dims scale by 1.5, the rest do not
      y.rope_type = RopeScaling::Yarn;
      y.factor = 4;
      y.original_max_position_embeddings = 4096;
      y.attention_factor = 1.5;
      const RopeFrequencies fy = rope_frequencies(y, 64, 0);
      std::vector<double> yq = q;
      rotate(y, fy, m, yq.data(), 64);
      double rot_norm = 0, q_norm = 0;
      for (size_t i = 0; i < 48; ++i) rot_norm += yq[i] * yq[i], q_norm += q[i] * q[i];
      EXPECT_NEAR(rot_norm, 2.25 * q_norm, 1e-10 * q_norm);
      for (size_t i = 48; i < 64; ++i) EXPECT_EQ(yq[i], q[i]);
    }
  }
}

}  // namespace
}  // namespace attnfuse::rope
