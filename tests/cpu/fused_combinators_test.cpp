// The fused CPU backend against the float64 reference: every combinator and the usual
// compositions, over DESIGN §3's shapes (lengths off the tile multiples, Nq != Nk both ways,
// Nq = 1, Nk = 1, GQA groups 1/4/8, head dims 32..256).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnfuse/attention.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

struct Variant {
  std::string name;
  KernelSpec spec;
};

ScalarArgs window(int64_t w) {
  ScalarArgs s;
  s.window = w;
  return s;
}
ScalarArgs cap(double c, int64_t w = 0) {
  ScalarArgs s;
  s.softcap = c;
  s.window = w;
  return s;
}

std::vector<Variant> variants() {
  const NormKind relu = NormKind::ReluAttention, sm = NormKind::Softmax;
  return {
      {"full", make_spec({}, {})},
      {"causal", make_spec({MK::Causal}, {})},
      {"sliding_window", make_spec({MK::SlidingWindow}, {}, sm, window(37))},
      {"block_sparse", make_spec({MK::BlockSparse}, {})},
      {"alibi", make_spec({}, {MD::Alibi})},
      {"additive_bias", make_spec({}, {MD::AdditiveBias})},
      {"softcap", make_spec({}, {MD::Softcap}, sm, cap(2.5))},
      {"relu_attention", make_spec({}, {}, relu)},
      {"causal_sliding", make_spec({MK::Causal, MK::SlidingWindow}, {}, sm, window(20))},
      {"causal_alibi", make_spec({MK::Causal}, {MD::Alibi})},
      {"sliding_softcap_bias", make_spec({MK::SlidingWindow}, {MD::Softcap, MD::AdditiveBias}, sm, cap(3.0, 50))},
      {"sliding_bias_softcap", make_spec({MK::SlidingWindow}, {MD::AdditiveBias, MD::Softcap}, sm, cap(3.0, 50))},
      {"block_sparse_causal", make_spec({MK::BlockSparse, MK::Causal}, {})},
      {"relu_causal", make_spec({MK::Causal}, {}, relu)},
      {"alibi_bias_softcap", make_spec({}, {MD::Alibi, MD::AdditiveBias, MD::Softcap}, sm, cap(4.0))},
      {"softcap_alibi_causal", make_spec({MK::Causal}, {MD::Softcap, MD::Alibi}, sm, cap(2.0))},
      {"relu_sliding_alibi", make_spec({MK::SlidingWindow}, {MD::Alibi}, relu, window(9))},
      {"relu_block_sparse_bias", make_spec({MK::BlockSparse}, {MD::AdditiveBias}, relu)},
      {"block_sparse_sliding_bias", make_spec({MK::BlockSparse, MK::SlidingWindow}, {MD::AdditiveBias}, sm, window(70))},
  };
}

struct ShapeCase {
  std::string name;
  Shape shape;
  int block_q, block_k;  // BlockMask blocks for block_sparse variants
};

std::vector<ShapeCase> shapes() {
  //        name                    B  Hq Hkv  Nq   Nk    D   Dv    block_q block_k
  return {
      {"n17_d64", {1, 2, 1, 17, 17, 64}, 16, 16},
      {"n113_d32_gqa4", {1, 4, 1, 113, 113, 32}, 32, 16},
      {"n127_d80_b2", {2, 2, 2, 127, 127, 80}, 64, 64},
      {"n129_d96_gqa4", {1, 8, 2, 129, 129, 96}, 48, 40},
      {"nq1_nk129_d128", {2, 2, 2, 1, 129, 128}, 128, 128},
      {"nq129_nk1_d64", {1, 2, 1, 129, 1, 64}, 64, 64},
      {"nq17_nk129_d256", {1, 2, 2, 17, 129, 256}, 16, 32},
      {"nq129_nk17_gqa8", {1, 8, 1, 129, 17, 64}, 100, 8},
      {"n1_d32", {1, 1, 1, 1, 1, 32}, 1, 1},
      {"nq65_nk200_dv48", {1, 2, 1, 65, 200, 32, 48}, 64, 128},
      {"n1023_d64", {1, 1, 1, 1023, 1023, 64}, 128, 64},
  };
}

class Combinators : public ::testing::TestWithParam<std::tuple<Variant, ShapeCase>> {};

TEST_P(Combinators, MatchesReference) {
  const auto& [variant, sc] = GetParam();
  const uint64_t seed = std::hash<std::string>{}(variant.name + sc.name);
  SCOPED_TRACE(describe(variant.spec) + " seed " + std::to_string(seed));
  CaseOptions opt;
  opt.bias = variant.spec.needs_bias();
  opt.stddev = variant.spec.modifiers.has(MD::Softcap) ? 2.0f : 1.0f;  // let the cap bite
  AttentionCase c(sc.shape, opt, seed);
  if (variant.spec.needs_block_mask())
    c.set_block_mask(random_block_mask(c.shape, sc.block_q, sc.block_k, seed));
  run_cpu(variant.spec, c.args());
  expect_matches_reference(variant.spec, c.args());
}

INSTANTIATE_TEST_SUITE_P(Cpu, Combinators, ::testing::Combine(::testing::ValuesIn(variants()), ::testing::ValuesIn(shapes())),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
                         });

// Long sequences: few heads, so the O(N^2) reference stays cheap.
TEST(CpuLong, Causal1023) {
  const KernelSpec spec = make_spec({MK::Causal}, {});
  AttentionCase c({1, 2, 1, 1023, 1023, 64}, {}, 1023);
  run_cpu(spec, c.args());
  expect_matches_reference(spec, c.args());
}

TEST(CpuLong, SlidingAlibi1023) {
  const KernelSpec spec = make_spec({MK::SlidingWindow}, {MD::Alibi}, NormKind::Softmax, window(300));
  AttentionCase c({1, 1, 1, 1023, 1023, 128}, {}, 7);
  run_cpu(spec, c.args());
  expect_matches_reference(spec, c.args());
}

TEST(CpuLong, BlockSparse1023) {
  const KernelSpec spec = make_spec({MK::BlockSparse, MK::Causal}, {});
  AttentionCase c({1, 2, 2, 1023, 1023, 64}, {}, 11);
  c.set_block_mask(random_block_mask(c.shape, 128, 64, 11, /*broadcast=*/true));
  run_cpu(spec, c.args());
  expect_matches_reference(spec, c.args());
}

TEST(CpuLong, Full4097) {
  const KernelSpec spec = make_spec({}, {});
  AttentionCase c({1, 1, 1, 4097, 4097, 32}, {}, 4097);
  run_cpu(spec, c.args());
  expect_matches_reference(spec, c.args());
}

}  // namespace
}  // namespace attnfuse::test
