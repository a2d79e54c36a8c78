// The fused CPU kernel's rope and rope_window (ATFlash) against the float64 reference: both
// styles, partial rotary dims, every Hugging Face scaling, q_offset and decode at large
// positions, GQA, odd lengths, three dtypes, and per-cell windows composed with masks and ALiBi.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"
#include "cpu/unfused.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

KernelSpec rope_spec(std::initializer_list<MaskKind> masks, std::initializer_list<ModifierKind> mods,
                     const RopeParams& rp, ScoreKind score = ScoreKind::Rope, int64_t window = 0) {
  ScalarArgs s;
  s.rope = rp;
  s.window = window;
  KernelSpec spec = make_spec(masks, mods, NormKind::Softmax, s);
  spec.score = score;
  return spec;
}

RopeParams params(double base = 10000.0, RopeStyle style = RopeStyle::Neox, int rotary_dim = 0) {
  RopeParams p;
  p.base = base;
  p.style = style;
  p.rotary_dim = rotary_dim;
  return p;
}

void check(const KernelSpec& spec, const Shape& shape, CaseOptions opt, uint64_t seed,
           int block_k = 0) {
  SCOPED_TRACE(describe(spec) + " seed " + std::to_string(seed) + " block_k " + std::to_string(block_k));
  KernelSpec s = spec;
  if (block_k > 0) s.tile.block_k = block_k;
  AttentionCase c(shape, opt, seed);
  run_cpu(s, c.args());
  expect_matches_reference(s, c.args());
}

const char* dtype_label(DType t) { return t == DType::F32 ? "f32" : t == DType::BF16 ? "bf16" : "f16"; }

// ---- rope ------------------------------------------------------------------------------------

TEST(CpuRope, StylesAndDtypes) {
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj})
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(rope_style_name(style)) + " " + dtype_label(dt));
      CaseOptions opt;
      opt.dtype = dt;
      check(rope_spec({MK::Causal}, {}, params(10000.0, style)), {1, 4, 2, 129, 129, 64}, opt, 11);
      check(rope_spec({}, {}, params(500000.0, style)), {2, 2, 1, 17, 129, 32}, opt, 12);
    }
}

TEST(CpuRope, PartialRotaryDim) {
  for (RopeStyle style : {RopeStyle::Neox, RopeStyle::Gptj}) {
    check(rope_spec({MK::Causal}, {}, params(10000.0, style, 32)), {1, 2, 1, 129, 129, 64}, {}, 21);
    check(rope_spec({}, {}, params(10000.0, style, 24)), {1, 2, 2, 17, 33, 80}, {}, 22);
    check(rope_spec({}, {}, params(10000.0, style, 2)), {1, 1, 1, 40, 40, 32}, {}, 23);
  }
}

std::vector<std::pair<std::string, RopeParams>> scalings() {
  std::vector<std::pair<std::string, RopeParams>> out;
  out.push_back({"default", params()});
  RopeParams lin = params();
  lin.rope_type = RopeScaling::Linear, lin.factor = 4.0;
  out.push_back({"linear", lin});
  RopeParams dyn = params();
  dyn.rope_type = RopeScaling::Dynamic, dyn.factor = 2.0, dyn.original_max_position_embeddings = 64;
  out.push_back({"dynamic", dyn});  // 129 positions > 64: the base grows
  RopeParams yarn = params();
  yarn.rope_type = RopeScaling::Yarn, yarn.factor = 8.0, yarn.original_max_position_embeddings = 64;
  out.push_back({"yarn", yarn});  // attention factor 0.1 ln 8 + 1
  RopeParams l3 = params(500000.0);
  l3.rope_type = RopeScaling::Llama3, l3.factor = 8.0, l3.low_freq_factor = 1.0;
  l3.high_freq_factor = 4.0, l3.original_max_position_embeddings = 64;
  out.push_back({"llama3", l3});
  RopeParams lr = params();
  lr.rope_type = RopeScaling::Longrope, lr.original_max_position_embeddings = 64, lr.factor = 4.0;
  for (int r = 0; r < 16; ++r) {
    lr.long_factor.push_back(1.0 + 0.5 * r);
    lr.short_factor.push_back(1.0 + 0.05 * r);
  }
  out.push_back({"longrope", lr});
  return out;
}

TEST(CpuRope, EveryScaling) {
  for (const auto& [name, rp] : scalings()) {
    SCOPED_TRACE(name);
    check(rope_spec({MK::Causal}, {}, rp), {1, 2, 1, 129, 129, 32}, {}, 31);
    check(rope_spec({}, {}, rp), {1, 2, 2, 17, 40, 32}, {}, 32);  // longrope: short factors
    CaseOptions bf;
    bf.dtype = DType::BF16;
    check(rope_spec({MK::Causal}, {}, rp), {1, 2, 1, 129, 129, 32}, bf, 33);
  }
}

TEST(CpuRope, QueryOffsetsAndDecode) {
  const RopeParams rp = params(500000.0);
  CaseOptions opt;
  opt.q_offset = 1000;  // chunked prefill past the keys
  check(rope_spec({MK::Causal}, {}, rp), {1, 4, 1, 17, 129, 64}, opt, 41);
  opt.q_offset = -5;  // queries before the first key: their first rows keep nothing
  check(rope_spec({MK::Causal}, {}, rp), {1, 2, 1, 17, 129, 64}, opt, 42);
  // Decode at ~100k: the angle is reduced in float64, so large positions stay accurate.
  CaseOptions dec;
  dec.q_offset = 100000;
  check(rope_spec({}, {}, params(10000.0)), {2, 8, 2, 1, 129, 64}, dec, 43);
  for (DType dt : {DType::F32, DType::BF16}) {
    CaseOptions kv;
    kv.dtype = dt;
    check(rope_spec({MK::Causal}, {}, rp), {1, 4, 1, 1, 100003, 64}, kv, 44);
  }
}

TEST(CpuRope, GqaOddLengthsAndTiles) {
  const RopeParams rp = params(10000.0, RopeStyle::Gptj);
  for (int64_t n : {1, 17, 129})
    for (int block_k : {0, 16, 256})
      check(rope_spec({MK::Causal}, {}, rp), {1, 8, 2, n, n, 64}, {}, 50 + uint64_t(n), block_k);
  check(rope_spec({MK::SlidingWindow}, {MD::Alibi}, rp, ScoreKind::Rope, 33), {1, 8, 1, 129, 129, 128}, {}, 51);
  CaseOptions bshd;
  bshd.layout = Layout::Bshd;
  KernelSpec capped = rope_spec({MK::Causal}, {MD::Softcap}, rp);
  capped.scalars.softcap = 3.0;
  check(capped, {2, 4, 4, 65, 65, 96}, bshd, 52);
}

TEST(CpuRope, FreshSeed) {
  const uint64_t seed = fresh_seed();
  for (DType dt : {DType::F32, DType::F16}) {
    CaseOptions opt;
    opt.dtype = dt;
    check(rope_spec({MK::Causal}, {}, params(500000.0)), {1, 4, 2, 200, 200, 64}, opt, seed);
  }
}

// ---- rope_window -----------------------------------------------------------------------------

RopeParams windowed(double k, double base = 10000.0, RopeStyle style = RopeStyle::Neox, int rotary_dim = 0) {
  RopeParams p = params(base, style, rotary_dim);
  p.window_k = k;
  return p;
}

// With base 100 and 32 pairs, λ_r spans 6.3 .. 550: at N = 300 every k of the sweep has pairs
// pruned for whole tiles, boundary pairs and pairs kept everywhere.
TEST(CpuRopeWindow, EveryKAgainstTheReference) {
  for (double k : {0.25, 0.5, 1.0, 2.0, 8.0})
    for (int block_k : {0, 16}) {
      SCOPED_TRACE("k " + std::to_string(k));
      check(rope_spec({MK::Causal}, {}, windowed(k, 100.0), ScoreKind::RopeWindow),
            {1, 2, 1, 300, 300, 64}, {}, 60, block_k);
      check(rope_spec({}, {}, windowed(k, 100.0, RopeStyle::Gptj), ScoreKind::RopeWindow),
            {1, 4, 2, 129, 129, 32}, {}, 61, block_k);
    }
}

TEST(CpuRopeWindow, DtypesPartialAndCompositions) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_label(dt));
    CaseOptions opt;
    opt.dtype = dt;
    check(rope_spec({MK::Causal}, {}, windowed(0.5, 100.0, RopeStyle::Neox, 48), ScoreKind::RopeWindow),
          {1, 4, 1, 129, 129, 64}, opt, 70);
    check(rope_spec({MK::Causal, MK::SlidingWindow}, {}, windowed(1.0, 50.0), ScoreKind::RopeWindow, 60),
          {1, 2, 1, 200, 200, 64}, opt, 71);
    check(rope_spec({MK::Causal}, {MD::Alibi}, windowed(2.0, 100.0, RopeStyle::Gptj), ScoreKind::RopeWindow),
          {1, 4, 4, 129, 129, 64}, opt, 72);
    check(rope_spec({MK::SlidingWindow}, {MD::Alibi}, windowed(0.25, 100.0), ScoreKind::RopeWindow, 90),
          {1, 2, 1, 17, 129, 64}, opt, 73);
  }
  // Scaled frequencies prune by the scaled wavelengths (llama3 stretches the long ones).
  RopeParams l3 = windowed(1.0, 500.0);
  l3.rope_type = RopeScaling::Llama3, l3.factor = 8.0, l3.original_max_position_embeddings = 64;
  check(rope_spec({MK::Causal}, {}, l3, ScoreKind::RopeWindow), {1, 2, 1, 257, 257, 64}, {}, 74);
}

TEST(CpuRopeWindow, DecodeAndOffsets) {
  CaseOptions dec;
  dec.q_offset = 100000;  // every key is far: only the low-frequency pairs remain
  check(rope_spec({}, {}, windowed(1.0), ScoreKind::RopeWindow), {1, 4, 1, 1, 4000, 64}, dec, 80);
  check(rope_spec({MK::Causal}, {}, windowed(0.5, 1000.0), ScoreKind::RopeWindow), {1, 4, 1, 1, 5000, 64}, {}, 81);
  CaseOptions chunk;
  chunk.q_offset = 700;
  check(rope_spec({MK::Causal}, {}, windowed(2.0, 300.0), ScoreKind::RopeWindow), {1, 2, 1, 65, 800, 64}, chunk, 82);
}

// The other roles around the score op: block_sparse chunks, relu_attention, zero sizes.
TEST(CpuRopeWindow, BlockSparseReluAndEmpty) {
  KernelSpec sparse = rope_spec({MK::BlockSparse, MK::Causal}, {}, windowed(0.5, 100.0), ScoreKind::RopeWindow);
  AttentionCase c({1, 4, 2, 200, 200, 64}, {}, 85);
  c.set_block_mask(random_block_mask(c.shape, 48, 40, 85));
  run_cpu(sparse, c.args());
  expect_matches_reference(sparse, c.args());
  KernelSpec relu = rope_spec({MK::Causal}, {}, windowed(1.0, 100.0, RopeStyle::Gptj), ScoreKind::RopeWindow);
  relu.norm = NormKind::ReluAttention;
  check(relu, {1, 2, 1, 129, 129, 64}, {}, 86);
  check(rope_spec({MK::Causal}, {}, params()), {1, 2, 1, 0, 17, 64}, {}, 87);
  check(rope_spec({}, {}, windowed(1.0), ScoreKind::RopeWindow), {1, 2, 1, 17, 0, 64}, {}, 88);
  check(rope_spec({}, {}, params()), {0, 2, 1, 17, 17, 64}, {}, 89);
}

// A pair's term is kept at |Δ| = limit and pruned at limit + 1: with base 4 and D = 4 the two
// pairs have λ = 2π and 4π, so at k = 1 the limits are 6 and 12 and every query row of a
// 40-key causal run has cells on both sides of both limits.
TEST(CpuRopeWindow, BoundaryCellsExactly) {
  for (int block_k : {0, 1, 3, 7}) {
    check(rope_spec({MK::Causal}, {}, windowed(1.0, 4.0), ScoreKind::RopeWindow), {1, 1, 1, 40, 40, 4},
          {}, 90, block_k);
    check(rope_spec({}, {}, windowed(1.0, 4.0, RopeStyle::Gptj), ScoreKind::RopeWindow), {1, 1, 1, 40, 40, 4},
          {}, 91, block_k);
  }
}

// Windows wider than every distance prune nothing: the result is bit-identical to rope, and a
// tight window really changes it.
TEST(CpuRopeWindow, WideWindowIsRopeAndTightWindowIsNot) {
  const Shape shape{1, 2, 1, 129, 129, 64};
  AttentionCase a(shape, {}, 95), b(shape, {}, 95), c(shape, {}, 95);
  run_cpu(rope_spec({MK::Causal}, {}, params()), a.args());
  run_cpu(rope_spec({MK::Causal}, {}, windowed(1e12), ScoreKind::RopeWindow), b.args());
  run_cpu(rope_spec({MK::Causal}, {}, windowed(0.25), ScoreKind::RopeWindow), c.args());
  const auto& sa = a.out.storage();
  EXPECT_EQ(0, std::memcmp(sa.data(), b.out.storage().data(), sa.size()));
  EXPECT_NE(0, std::memcmp(sa.data(), c.out.storage().data(), sa.size()));
}

// The ablation's scores+softmax variant rotates (and prunes) with the fused kernel's code.
TEST(CpuRopeAblation, ScoresSoftmaxFusedVariant) {
  const KernelSpec specs[] = {
      rope_spec({MK::Causal}, {}, params(10000.0, RopeStyle::Gptj, 48)),
      rope_spec({MK::Causal}, {MD::Alibi}, windowed(0.5, 100.0), ScoreKind::RopeWindow),
      rope_spec({}, {}, windowed(2.0, 100.0, RopeStyle::Gptj), ScoreKind::RopeWindow),
  };
  for (const KernelSpec& spec : specs)
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(describe(spec) + " " + dtype_label(dt));
      CaseOptions opt;
      opt.dtype = dt;
      AttentionCase c({1, 4, 2, 129, 150, 64}, opt, 97);
      cpu::run_scores_softmax_fused(spec, c.args());
      expect_matches_reference(spec, c.args());
    }
}

}  // namespace
}  // namespace attnfuse::test
