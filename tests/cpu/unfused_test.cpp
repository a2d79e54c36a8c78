// The ablation's decomposition variants (three unfused ops; scores+softmax fused with P
// materialized) compute the same attention as the fused kernel, within DESIGN §3's tolerance.
#include <gtest/gtest.h>

#include "attnfuse/attention.hpp"
#include "attnfuse/error.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"
#include "cpu/unfused.hpp"

namespace attnfuse::test {
namespace {

using MK = MaskKind;
using MD = ModifierKind;

std::vector<KernelSpec> specs() {
  ScalarArgs w;
  w.window = 30;
  w.softcap = 3.0;
  return {make_spec({}, {}),
          make_spec({MK::Causal}, {MD::Alibi}),
          make_spec({MK::SlidingWindow}, {MD::AdditiveBias, MD::Softcap}, NormKind::Softmax, w),
          make_spec({MK::BlockSparse, MK::Causal}, {}),
          make_spec({MK::Causal}, {MD::Softcap}, NormKind::ReluAttention, w)};
}

using Variant = void (*)(const KernelSpec&, const AttentionArgs&);

void check_variant(Variant run, const char* name) {
  for (const KernelSpec& spec : specs())
    for (DType t : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(name) + " " + describe(spec) + " " + dtype_name(t));
      CaseOptions opt;
      opt.dtype = t;
      opt.bias = spec.needs_bias();
      opt.layout = Layout::Bshd;
      AttentionCase c({2, 4, 2, 77, 130, 48}, opt, 31);
      if (spec.needs_block_mask()) c.set_block_mask(random_block_mask(c.shape, 32, 16, 31));
      run(spec, c.args());
      expect_matches_reference(spec, c.args());
    }
}

TEST(Ablation, ThreeUnfusedOps) { check_variant(&cpu::run_unfused, "unfused"); }

TEST(Ablation, ScoresSoftmaxFused) { check_variant(&cpu::run_scores_softmax_fused, "scores+softmax"); }

TEST(Ablation, VariantsValidateFirst) {
  const KernelSpec spec = make_spec({}, {MD::AdditiveBias});  // no bias tensor given
  AttentionCase c({1, 1, 1, 8, 8, 16}, {}, 1);
  EXPECT_THROW(cpu::run_unfused(spec, c.args()), Error);
  EXPECT_THROW(cpu::run_scores_softmax_fused(spec, c.args()), Error);
}

}  // namespace
}  // namespace attnfuse::test
