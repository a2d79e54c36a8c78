// The CPU backend through the whole front end: program text -> Program::parse -> compile for the
// CPU -> run_cpu, against the float64 reference.
#include <gtest/gtest.h>

#include <string>

#include "attnfuse/attention.hpp"
#include "attnfuse/program.hpp"
#include "common/check.hpp"
#include "common/tensors.hpp"

namespace attnfuse::test {
namespace {

struct TextCase {
  const char* text;
  int block_q = 0, block_k = 0;  // BlockMask blocks when the program is block_sparse
};

class FromText : public ::testing::TestWithParam<TextCase> {};

TEST_P(FromText, MatchesReference) {
  const TextCase& tc = GetParam();
  SCOPED_TRACE(tc.text);
  for (DType t : {DType::F32, DType::BF16}) {
    const KernelSpec spec = Program::parse(tc.text).compile({Target::Cpu, t, 0});
    CaseOptions opt;
    opt.dtype = t;
    opt.bias = spec.needs_bias();
    opt.stddev = spec.modifiers.has(ModifierKind::Softcap) ? 2.0f : 1.0f;
    AttentionCase c({1, 4, 2, 100, 180, 64}, opt, 77);
    if (spec.needs_block_mask()) c.set_block_mask(random_block_mask(c.shape, tc.block_q, tc.block_k, 77));
    run_cpu(spec, c.args());
    expect_matches_reference(spec, c.args());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, FromText,
    ::testing::Values(TextCase{"softmax(scaled_dot_product(Q, K)) @ V"},
                      TextCase{"softmax(causal(scaled_dot_product(Q, K))) @ V"},
                      TextCase{"softmax(sliding_window(causal(scaled_dot_product(Q, K)), 33)) @ V"},
                      TextCase{"s = scaled_dot_product(Q, K, scale=0.2)\ns = alibi(s)\ns = causal(s)\nreturn softmax(s) @ V"},
                      TextCase{"softmax(softcap(additive_bias(sliding_window(scaled_dot_product(Q, K), 50)), 5)) @ V"},
                      TextCase{"relu_attention(causal(scaled_dot_product(Q, K))) @ V"},
                      TextCase{"softmax(block_sparse(causal(scaled_dot_product(Q, K)))) @ V", 32, 64},
                      TextCase{"softmax(alibi(softcap(block_sparse(scaled_dot_product(Q, K)), 3))) @ V", 128, 16}));

// The CPU spec takes D at run time: one compiled program serves every head dim.
TEST(FromTextHeadDims, OneSpecManyHeadDims) {
  const KernelSpec spec = Program::parse("softmax(causal(alibi(scaled_dot_product(Q, K)))) @ V").compile({});
  for (int64_t d : {32, 64, 80, 96, 128, 256}) {
    SCOPED_TRACE("D=" + std::to_string(d));
    AttentionCase c({1, 2, 1, 70, 70, d}, {}, uint64_t(d));
    run_cpu(spec, c.args());
    expect_matches_reference(spec, c.args());
  }
}

}  // namespace
}  // namespace attnfuse::test
