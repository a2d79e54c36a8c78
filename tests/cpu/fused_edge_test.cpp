// The fused CPU backend on the edges: zero sizes, fully masked rows, extreme q_offset, NaN
// propagation, dtypes x layouts, broadcast biases, custom slopes, and writes outside the view.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

ScalarArgs window(int64_t w) {
  ScalarArgs s;
  s.window = w;
  return s;
}

void run_and_check(const KernelSpec& spec, AttentionCase& c) {
  run_cpu(spec, c.args());
  expect_matches_reference(spec, c.args());
}

TEST(CpuEdge, ZeroSizedDimensionsDoNoWork) {
  const KernelSpec spec = make_spec({MK::Causal}, {MD::Alibi});
  for (const Shape& s : {Shape{0, 2, 1, 17, 17, 64}, Shape{1, 2, 1, 0, 17, 64}, Shape{1, 0, 0, 17, 17, 64},
                         Shape{2, 2, 2, 0, 0, 32}}) {
    AttentionCase c(s, {}, 1);
    EXPECT_NO_THROW(run_cpu(spec, c.args()));
    expect_matches_reference(spec, c.args());
  }
}

TEST(CpuEdge, NoKeysGivesZeroRowsAndMinusInfLse) {
  for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention}) {
    const KernelSpec spec = make_spec({}, {}, norm);
    AttentionCase c({1, 2, 1, 17, 0, 64}, {}, 2);
    run_cpu(spec, c.args());
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 17; ++i) {
        EXPECT_EQ(c.lse->get(0, h, i), -kInf);
        for (int64_t d = 0; d < 64; ++d) ASSERT_EQ(c.out.get(0, h, i, d), 0.0f);
      }
  }
}

TEST(CpuEdge, EmptyHeadDims) {
  const KernelSpec spec = make_spec({MK::Causal}, {});
  AttentionCase d0({1, 1, 1, 33, 33, 0, 16}, {}, 3);  // D = 0: every score is 0
  run_and_check(spec, d0);
  AttentionCase dv0({1, 1, 1, 33, 33, 16, 0}, {}, 4);  // Dv = 0: only the LSE is written
  run_and_check(spec, dv0);
}

// Sliding window with a q_offset that puts the first rows out of every key's reach.
TEST(CpuEdge, FullyMaskedRowsFromSlidingWindowAndOffset) {
  for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention}) {
    const KernelSpec spec = make_spec({MK::SlidingWindow}, {MD::Alibi}, norm, window(8));
    CaseOptions opt;
    opt.q_offset = -40;  // rows 0..32 have delta <= -8 for every key
    AttentionCase c({1, 2, 2, 100, 70, 32}, opt, 5);
    run_and_check(spec, c);
    for (int64_t i = 0; i <= 32; ++i) {
      EXPECT_EQ(c.lse->get(0, 1, i), -kInf) << "row " << i;
      EXPECT_EQ(c.out.get(0, 1, i, 7), 0.0f) << "row " << i;
    }
    EXPECT_TRUE(std::isfinite(c.lse->get(0, 1, 33)));
  }
}

// Bottom-right alignment with Nq > Nk: the first Nq - Nk rows see no key under causal.
TEST(CpuEdge, CausalWithMoreQueriesThanKeys) {
  const KernelSpec spec = make_spec({MK::Causal}, {});
  AttentionCase c({1, 4, 2, 200, 70, 64}, {}, 6);
  run_and_check(spec, c);
  EXPECT_EQ(c.lse->get(0, 3, 129), -kInf);
  EXPECT_TRUE(std::isfinite(c.lse->get(0, 3, 130)));
}

TEST(CpuEdge, BlockSparseRowsWithoutActiveBlocks) {
  const KernelSpec spec = make_spec({MK::BlockSparse}, {});
  AttentionCase c({1, 2, 1, 96, 96, 32}, {}, 7);
  // Query block 1 (rows 32..63) keeps nothing; block 2 keeps one partial block.
  c.set_block_mask(BlockMask::from_predicate(
      [](int64_t, int64_t, int64_t q, int64_t kv) { return q / 32 != 1 && (q / 32 != 2 || (kv < 32 && kv % 3 == 0)); },
      1, 1, 96, 96, 32, 32));
  run_and_check(spec, c);
  EXPECT_EQ(c.lse->get(0, 0, 40), -kInf);
}

TEST(CpuEdge, ExtremeQueryOffsets) {
  const KernelSpec causal = make_spec({MK::Causal}, {});
  const KernelSpec band = make_spec({MK::Causal, MK::SlidingWindow}, {}, NormKind::Softmax, window(5));
  for (int64_t off : {int64_t{1} << 61, -(int64_t{1} << 61), int64_t{-129}, int64_t{1000}}) {
    SCOPED_TRACE("q_offset " + std::to_string(off));
    CaseOptions opt;
    opt.q_offset = off;
    AttentionCase a({1, 1, 1, 70, 129, 32}, opt, 8);
    run_and_check(causal, a);
    AttentionCase b({1, 1, 1, 70, 129, 32}, opt, 9);
    run_and_check(band, b);
  }
}

TEST(CpuEdge, NaNInQueryPoisonsOnlyItsRow) {
  const KernelSpec spec = make_spec({MK::Causal}, {});
  AttentionCase c({1, 1, 1, 80, 80, 32}, {}, 10);
  c.q.set(0, 0, 70, 3, kNaN);
  run_and_check(spec, c);
  EXPECT_TRUE(std::isnan(c.out.get(0, 0, 70, 0)));
  EXPECT_FALSE(std::isnan(c.out.get(0, 0, 69, 0)));
}

TEST(CpuEdge, NaNInKeyReachesOnlyRowsThatKeepIt) {
  for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention}) {
    const KernelSpec spec = make_spec({MK::Causal}, {}, norm);
    AttentionCase c({1, 1, 1, 80, 80, 32}, {}, 11);
    c.k.set(0, 0, 50, 0, kNaN);
    run_and_check(spec, c);
    EXPECT_FALSE(std::isnan(c.out.get(0, 0, 49, 0)));
    EXPECT_TRUE(std::isnan(c.out.get(0, 0, 50, 0)));
  }
}

// Masked keys (inside a boundary tile) and zero weights select nothing: NaN or Inf in their V rows
// must not leak through 0 * NaN.
TEST(CpuEdge, NonFiniteValuesAtMaskedKeysDoNotLeak) {
  for (NormKind norm : {NormKind::Softmax, NormKind::ReluAttention}) {
    const KernelSpec spec = make_spec({MK::Causal}, {MD::AdditiveBias}, norm);
    CaseOptions opt;
    opt.bias = true;
    AttentionCase c({1, 1, 1, 80, 80, 32}, opt, 12);
    c.v.set(0, 0, 60, 5, kNaN);
    c.v.set(0, 0, 61, 5, kInf);
    c.bias->set(0, 0, 75, 60, -kInf);  // row 75 keeps key 60 with weight exactly 0
    c.bias->set(0, 0, 75, 61, -kInf);
    run_and_check(spec, c);
    EXPECT_FALSE(std::isnan(c.out.get(0, 0, 59, 5)));
    EXPECT_FALSE(std::isnan(c.out.get(0, 0, 75, 5)));
  }
}

TEST(CpuEdge, InfInQueryPropagatesLikeTheReference) {
  const KernelSpec spec = make_spec({}, {});
  AttentionCase c({1, 1, 1, 20, 40, 16}, {}, 13);
  c.q.set(0, 0, 3, 0, kInf);
  run_and_check(spec, c);
}

TEST(CpuEdge, DtypesAndLayouts) {
  const std::vector<std::pair<std::string, KernelSpec>> specs = {
      {"causal_alibi", make_spec({MK::Causal}, {MD::Alibi})},
      {"sliding_bias", make_spec({MK::SlidingWindow}, {MD::AdditiveBias}, NormKind::Softmax, window(40))},
      {"relu_causal", make_spec({MK::Causal}, {}, NormKind::ReluAttention)},
  };
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (Layout l : {Layout::Bhsd, Layout::Bshd, Layout::Padded})
      for (const auto& [name, spec] : specs) {
        SCOPED_TRACE(name + " " + dtype_name(t) + " " + layout_name(l));
        CaseOptions opt;
        opt.dtype = t;
        opt.layout = l;
        opt.bias = spec.needs_bias();
        opt.bias_dtype = t;
        AttentionCase c({2, 4, 2, 97, 131, 80}, opt, 14);
        run_and_check(spec, c);
      }
}

// Arbitrary strides: heads interleaved with a gap, K and V sharing one buffer-like layout with
// broadcast-style zero batch stride (B = 1), a transposed-heads Q.
TEST(CpuEdge, ArbitraryStrides) {
  const KernelSpec spec = make_spec({MK::Causal}, {MD::Alibi});
  AttentionCase c({1, 4, 2, 90, 90, 32}, {}, 27);
  std::mt19937_64 rng(27);
  HostTensor q(DType::F32, {1, 4, 90, 32}, {0, 32, 4 * 32 + 8, 1});   // [S][H] rows, padded
  HostTensor k(DType::F32, {1, 2, 90, 32}, {0, 90 * 40, 40, 1});      // row stride 40
  HostTensor v(DType::F32, {1, 2, 90, 32}, {0, 32, 2 * 32, 1});       // BSHD
  HostTensor o(DType::F32, {1, 4, 90, 32}, {5, 90 * 33, 33, 1});      // odd row stride
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  o.poison();
  AttentionArgs a = c.args();
  a.q = q.view(), a.k = k.view(), a.v = v.view(), a.out = o.view();
  run_cpu(spec, a);
  expect_matches_reference(spec, a);
}

TEST(CpuEdge, NothingWrittenOutsideTheView) {
  const KernelSpec spec = make_spec({MK::Causal}, {});
  CaseOptions opt;
  opt.layout = Layout::Padded;
  for (DType t : {DType::F32, DType::BF16}) {
    opt.dtype = t;
    AttentionCase c({2, 2, 1, 70, 70, 40}, opt, 15);
    run_cpu(spec, c.args());
    // Count the poison left in the whole buffer: exactly the padding must remain.
    const auto& raw = c.out.storage();
    const int unit = dtype_size(t);
    int64_t poisoned = 0;
    for (size_t i = 0; i + size_t(unit) <= raw.size(); i += size_t(unit)) {
      uint32_t bits = 0;
      std::memcpy(&bits, &raw[i], size_t(unit));
      poisoned += bits == (t == DType::F32 ? kPoisonF32 : kPoison16);
    }
    EXPECT_EQ(poisoned, int64_t(raw.size()) / unit - c.out.numel());
  }
}

TEST(CpuEdge, BroadcastBiasShapesAndDtypes) {
  const KernelSpec spec = make_spec({MK::Causal}, {MD::AdditiveBias, MD::Alibi});
  for (int pattern = 0; pattern < 4; ++pattern)
    for (DType t : {DType::F32, DType::BF16}) {
      SCOPED_TRACE("pattern " + std::to_string(pattern) + " " + dtype_name(t));
      CaseOptions opt;
      opt.dtype = t;
      opt.bias = true;
      opt.bias_dtype = pattern % 2 ? DType::F32 : t;
      opt.bias_broadcast_batch = pattern & 1;
      opt.bias_broadcast_heads = pattern & 2;
      AttentionCase c({2, 4, 1, 65, 90, 32}, opt, 16 + pattern);
      run_and_check(spec, c);
    }
}

TEST(CpuEdge, AlibiSlopes) {
  // Non-power-of-two heads take the ALiBi paper's interleaved rule; custom slopes per head or one.
  KernelSpec spec = make_spec({MK::Causal}, {MD::Alibi});
  AttentionCase six({1, 6, 3, 50, 50, 32}, {}, 20);
  run_and_check(spec, six);
  spec.scalars.alibi = AlibiSlopes::Custom;
  spec.scalars.alibi_slopes = {0.5, 0.25, 0.125, 2.0};
  AttentionCase four({1, 4, 4, 50, 50, 32}, {}, 21);
  run_and_check(spec, four);
  spec.scalars.alibi_slopes = {0.3};
  AttentionCase one({1, 4, 2, 50, 50, 32}, {}, 22);
  run_and_check(spec, one);
}

TEST(CpuEdge, ExplicitScaleAndLargeScores) {
  KernelSpec spec = make_spec({MK::Causal}, {});
  // Scores with std ~10: the online max moves a lot between tiles. (Much larger scores make the
  // fp32 rel 1e-5 bound unreachable for any fp32 implementation: their rounding alone is ~1e-5.)
  spec.scalars.scale = 0.5;
  CaseOptions opt;
  opt.stddev = 1.5f;
  AttentionCase c({1, 2, 2, 150, 150, 64}, opt, 23);
  run_and_check(spec, c);
}

// The kernel takes the tile pass's shape (KernelSpec::tile) within its limits: odd shapes too.
TEST(CpuEdge, TileShapes) {
  const std::vector<KernelSpec> specs = {
      make_spec({MK::Causal, MK::SlidingWindow}, {MD::Alibi}, NormKind::Softmax, window(45)),
      make_spec({MK::BlockSparse, MK::Causal}, {}),
      make_spec({MK::Causal}, {}, NormKind::ReluAttention)};
  for (TileConfig tile : {TileConfig{1, 1}, TileConfig{16, 8}, TileConfig{37, 13}, TileConfig{64, 256},
                          TileConfig{128, 512}, TileConfig{0, 0}})
    for (KernelSpec spec : specs) {
      spec.tile = tile;
      SCOPED_TRACE(describe(spec) + " tile " + std::to_string(tile.block_q) + "x" + std::to_string(tile.block_k));
      AttentionCase c({1, 2, 1, 150, 300, 32}, {}, 25);
      if (spec.needs_block_mask()) c.set_block_mask(random_block_mask(c.shape, 48, 24, 25));
      run_and_check(spec, c);
    }
}

// One thread or many, and run after run: every tile is computed by one thread in a fixed order, so
// the output is bitwise identical.
TEST(CpuEdge, DeterministicAcrossThreadCounts) {
  const KernelSpec spec = make_spec({MK::Causal}, {MD::Softcap}, NormKind::Softmax, [] {
    ScalarArgs s;
    s.softcap = 5.0;
    return s;
  }());
  AttentionCase a({2, 4, 2, 300, 300, 64}, {}, 26), b({2, 4, 2, 300, 300, 64}, {}, 26);
  run_cpu(spec, a.args());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  run_cpu(spec, b.args());
  omp_set_num_threads(threads);
  EXPECT_EQ(a.out.storage(), b.out.storage());
  b.poison_outputs();
  run_cpu(spec, b.args());
  EXPECT_EQ(a.out.storage(), b.out.storage());
}

TEST(CpuEdge, WithoutLse) {
  const KernelSpec spec = make_spec({MK::SlidingWindow}, {}, NormKind::Softmax, window(3));
  CaseOptions opt;
  opt.lse = false;
  AttentionCase c({1, 2, 2, 64, 64, 64}, opt, 24);
  run_and_check(spec, c);
}

}  // namespace
}  // namespace attnfuse::test
