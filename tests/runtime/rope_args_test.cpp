// The RoPE kernel arguments: the fixed-point turn fractions reduce angles exactly where fp32
// position * θ does not, and the per-call arguments follow the RoPE library.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attnfuse/error.hpp"
#include "rope/frequencies.hpp"
#include "runtime/rope_args.hpp"

namespace attnfuse::runtime {
namespace {

// The device's angle of position p for turn fraction t (rope.cuh rope_cos_sin): the top 32 bits
// of p * t mod 2^64 as a signed fraction of a turn.
double device_angle(int64_t p, uint64_t t) {
  const uint64_t turns = static_cast<uint64_t>(p) * t;
  return static_cast<double>(static_cast<int32_t>(turns >> 32)) * (2.0 * M_PI / 4294967296.0);
}

// p * θ reduced to [-π, π) in long double (64-bit mantissa: exact enough for p < 2^31).
double exact_angle(int64_t p, double theta) {
  const long double two_pi = 6.283185307179586476925286766559L;
  long double a = std::fmod(static_cast<long double>(p) * theta, two_pi);
  if (a >= two_pi / 2) a -= two_pi;
  if (a < -two_pi / 2) a += two_pi;
  return static_cast<double>(a);
}

TEST(RopeArgs, TurnFractionsReduceAnglesExactly) {
  std::mt19937_64 rng(7);
  const RopeParams params{.base = 500000.0};
  const auto f = rope::rope_frequencies(params, 128, 0);
  double worst = 0, worst_fp32 = 0;
  for (int r = 0; r < 64; r += 3)
    for (int i = 0; i < 200; ++i) {
      const int64_t p = static_cast<int64_t>(rng() % (int64_t{1} << 31)) - (i % 7 == 0 ? (int64_t{1} << 30) : 0);
      const double theta = f.inv_freq[static_cast<size_t>(r)];
      double err = std::abs(device_angle(p, turn_fraction(theta)) - exact_angle(p, theta));
      err = std::min(err, 2 * M_PI - err);  // both ends of [-π, π) are the same angle
      worst = std::max(worst, err);
      // What fp32 position * θ (Hugging Face's rotary embedding) gives, for comparison.
      double e32 = std::abs(std::remainder(static_cast<double>(static_cast<float>(p) * static_cast<float>(theta)) -
                                               static_cast<double>(static_cast<long double>(p) * theta),
                                           2 * M_PI));
      worst_fp32 = std::max(worst_fp32, e32);
    }
  EXPECT_LT(worst, 5e-9) << "fixed-point turns must be exact to ~2^-32 turns";
  EXPECT_GT(worst_fp32, 1e-3) << "sanity: fp32 angles at 2^31 positions are far off";
}

TEST(RopeArgs, FollowTheRopeLibraryAndCacheByValue) {
  RopeParams p{.base = 10000.0};
  const auto& a = rope_args(p, false, 64, 100);
  EXPECT_EQ(a.half, 32);
  EXPECT_FLOAT_EQ(a.factor, 1.f);
  EXPECT_EQ(a.turn[0], turn_fraction(1.0));
  // yarn: the attention factor multiplies cos and sin.
  p.rope_type = RopeScaling::Yarn;
  p.factor = 4;
  p.original_max_position_embeddings = 128;
  const auto& y = rope_args(p, false, 64, 100);
  EXPECT_NEAR(y.factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  // dynamic reads the sequence length: a longer one changes the frequencies.
  p = RopeParams{.base = 10000.0, .rope_type = RopeScaling::Dynamic, .factor = 2, .original_max_position_embeddings = 128};
  const uint64_t short_turn = rope_args(p, false, 64, 100).turn[20];
  const uint64_t long_turn = rope_args(p, false, 64, 4096).turn[20];
  EXPECT_NE(short_turn, long_turn);
  // rope_window limits: floor(k * λ_r), and -1 keeps nothing at k = 0+.
  p = RopeParams{.base = 10000.0, .window_k = 1.0};
  const auto& w = rope_args(p, true, 64, 100);
  EXPECT_EQ(w.limit[0], 6);  // λ_0 = 2π
  EXPECT_GT(w.limit[31], w.limit[0]);
}

// Calls over device lengths (paged caches, documents on CUDA): the frequencies of lengths up to
// the original context, and the rule past it. Static scalings need none; dynamic carries its base
// and factor; longrope carries its long set, the turns and limits of rope_args past the original
// context (ints two per word after the turns).
TEST(RopeArgs, DeviceLengthsCarryTheRulePastTheOriginalContext) {
  using attnfuse_kernels::kRopeLenDynamic, attnfuse_kernels::kRopeLenFixed, attnfuse_kernels::kRopeLenLongrope;
  RopeParams p{.base = 10000.0, .rope_type = RopeScaling::Llama3, .factor = 8, .original_max_position_embeddings = 64};
  const DeviceLengthRope& fixed = device_length_rope_args(p, false, 64);
  EXPECT_EQ(fixed.rule.rule, kRopeLenFixed);
  EXPECT_TRUE(fixed.long_set.empty());
  EXPECT_EQ(fixed.args.turn[5], rope_args(p, false, 64, 100000).turn[5]);

  p = RopeParams{.base = 20000.0, .rope_type = RopeScaling::Dynamic, .factor = 3, .original_max_position_embeddings = 64};
  const DeviceLengthRope dyn = device_length_rope_args(p, false, 64);
  EXPECT_EQ(dyn.rule.rule, kRopeLenDynamic);
  EXPECT_EQ(dyn.rule.orig, 64);
  EXPECT_EQ(dyn.rule.dyn_base, 20000.0);
  EXPECT_EQ(dyn.rule.dyn_factor, 3.0);
  EXPECT_EQ(dyn.args.turn[20], rope_args(p, false, 64, 64).turn[20]) << "within the original context: the default set";
  EXPECT_NE(dyn.args.turn[20], rope_args(p, false, 64, 65).turn[20]);

  p = RopeParams{.base = 10000.0, .rope_type = RopeScaling::Longrope, .factor = 4, .original_max_position_embeddings = 64,
                 .window_k = 2.0};
  for (int r = 0; r < 32; ++r) p.short_factor.push_back(1.0 + 0.01 * r), p.long_factor.push_back(1.0 + 0.5 * r);
  const DeviceLengthRope lr = device_length_rope_args(p, true, 64);
  EXPECT_EQ(lr.rule.rule, kRopeLenLongrope);
  EXPECT_EQ(lr.rule.window_k, 2.0);
  const attnfuse_kernels::RopeArgs short_set = rope_args(p, true, 64, 64);  // (a copy: the cache moves on)
  for (int r = 0; r < 32; ++r) EXPECT_EQ(lr.args.turn[r], short_set.turn[r]) << "pair " << r;
  const attnfuse_kernels::RopeArgs& long_set = rope_args(p, true, 64, 65);
  ASSERT_EQ(lr.long_set.size(), size_t{32 + 16});
  const auto* limits = reinterpret_cast<const int*>(lr.long_set.data() + 32);
  for (int r = 0; r < 32; ++r) {
    EXPECT_EQ(lr.long_set[size_t(r)], long_set.turn[r]) << "pair " << r;
    EXPECT_EQ(limits[r], long_set.limit[r]) << "pair " << r;
  }
  EXPECT_NE(lr.long_set[20], short_set.turn[20]);
  // Without an original context longrope never switches (rope::rope_frequencies).
  p.original_max_position_embeddings = 0;
  p.factor = 1;
  EXPECT_EQ(device_length_rope_args(p, true, 64).rule.rule, kRopeLenFixed);
}

TEST(RopeArgs, RotaryDimMustBeAMultipleOfFour) {
  RopeParams p;
  p.rotary_dim = 6;
  try {
    rope_args(p, false, 64, 10);
    FAIL() << "expected Error(Unsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos);
  }
}

}  // namespace
}  // namespace attnfuse::runtime
