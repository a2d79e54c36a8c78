// The fused kernel's vectorizable exp2 and tanh against libm: a few ulp everywhere softmax and
// softcap use them, exact zeros/infinities at the ends, NaN in -> NaN out.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/dtype.hpp"

// The kernel's fast math is compiled per instruction-set level; this test builds its own copy
// (with the tests' flags) in a namespace of its own.
#define ATTNFUSE_CPU_ISA_NS isa_fastmath_test
#include "cpu/simd.hpp"

namespace attnfuse::cpu {
namespace {

using namespace isa_fastmath_test;

double rel_err(float got, double want) { return std::abs(double(got) - want) / std::max(std::abs(want), 1e-300); }

TEST(FastMath, Exp2IsAccurate) {
  double worst = 0.0;
  for (double x = -125.9; x < 127.4; x += 0.000731) worst = std::max(worst, rel_err(fastmath::exp2(float(x)), std::exp2(double(float(x)))));
  EXPECT_LT(worst, 3e-7);  // ~2.5 ulp
}

TEST(FastMath, Exp2Ends) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fastmath::exp2(-inf), 0.0f);
  EXPECT_EQ(fastmath::exp2(-127.0f), 0.0f);  // below the normal range: flushed to exactly 0
  EXPECT_EQ(fastmath::exp2(0.0f), 1.0f);
  EXPECT_EQ(fastmath::exp2(1.0f), 2.0f);
  EXPECT_EQ(fastmath::exp2(inf), inf);
  EXPECT_EQ(fastmath::exp2(200.0f), inf);
  EXPECT_TRUE(std::isnan(fastmath::exp2(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, Exp2NonPositiveIsAccurate) {
  double worst = 0.0;
  for (double x = -126.4; x <= 0.25; x += 0.000173)
    worst = std::max(worst, rel_err(fastmath::exp2_nonpositive(float(x)), std::exp2(double(float(x)))));
  EXPECT_LT(worst, 3e-7);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fastmath::exp2_nonpositive(-inf), 0.0f);
  EXPECT_EQ(fastmath::exp2_nonpositive(-127.0f), 0.0f);
  EXPECT_EQ(fastmath::exp2_nonpositive(-1e30f), 0.0f);
  EXPECT_EQ(fastmath::exp2_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(fastmath::exp2_nonpositive(-1.0f), 0.5f);
  EXPECT_TRUE(std::isnan(fastmath::exp2_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

// The vector form against the scalar one, within 1 ulp: the same operations, but the compiler may
// fuse a multiply-add (FMA) in one and not the other, or fold the scalar calls on these constants
// at compile time without fusing (-march=native decides; an AVX2 machine differs by 1 ulp at
// -0.49999). Values are non-negative, so their bit patterns order like them.
TEST(FastMath, Exp2NonPositiveVectorMatchesScalar) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float xs[16] = {0.0f, -0.3f, -1.0f, -2.5f, -10.75f, -60.0f, -125.9f, -126.6f,
                        -127.0f, -500.0f, -inf, nan, -3e-8f, 0.2f, -0.5f, -0.49999f};
  simd::Vec v;
  std::memcpy(&v, xs, sizeof v);
  const simd::Vec r = fastmath::exp2_nonpositive(v);
  for (int i = 0; i < 16; ++i) {
    const float want = fastmath::exp2_nonpositive(xs[i]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(r[i])) << xs[i];
    else
      EXPECT_LE(std::abs(std::bit_cast<int32_t>(r[i]) - std::bit_cast<int32_t>(want)), 1)
          << xs[i] << ": " << r[i] << " vs " << want;
  }
}

TEST(FastMath, TanhIsAccurate) {
  double worst = 0.0;
  for (double x = -20.0; x < 20.0; x += 0.000377) {
    const float xf = float(x);
    worst = std::max(worst, rel_err(fastmath::tanh(xf), std::tanh(double(xf))));
  }
  EXPECT_LT(worst, 5e-7);
  for (float tiny : {1e-30f, -3e-8f, 1e-4f}) EXPECT_NEAR(fastmath::tanh(tiny), tiny, std::abs(tiny) * 1e-6f);
}

TEST(FastMath, TanhEnds) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fastmath::tanh(inf), 1.0f);
  EXPECT_EQ(fastmath::tanh(-inf), -1.0f);
  EXPECT_EQ(fastmath::tanh(100.0f), 1.0f);
  EXPECT_EQ(fastmath::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fastmath::tanh(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, HalfToFloatIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float want = f16_to_f32(static_cast<uint16_t>(h));
    const float got = fastmath::half_to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << std::hex << h;
  }
}

// Every ordered chain of distinct modifiers (16) x 2 norms x masked or not has a specialization.
TEST(KernelTable, EveryChainIsInstantiated) {
  const ModifierKind kinds[] = {ModifierKind::Alibi, ModifierKind::AdditiveBias, ModifierKind::Softcap};
  std::vector<ModifierChain> chains(1);
  for (ModifierKind a : kinds) {
    ModifierChain c1;
    c1.push(a);
    chains.push_back(c1);
    for (ModifierKind b : kinds) {
      if (b == a) continue;
      ModifierChain c2 = c1;
      c2.push(b);
      chains.push_back(c2);
      for (ModifierKind c : kinds) {
        if (c == a || c == b) continue;
        ModifierChain c3 = c2;
        c3.push(c);
        chains.push_back(c3);
      }
    }
  }
  ASSERT_EQ(chains.size(), 16u);
  for (const ModifierChain& chain : chains)
    for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention})
      for (bool masked : {false, true}) EXPECT_NE(select_kernel(norm, chain, masked), nullptr) << chain.code();
}

}  // namespace
}  // namespace attnfuse::cpu
