// Every program the verifier rejects, one test each (Halide test/error style): the message's
// key phrase AND where the caret points. Texts go through Program::parse, so the message is
// the user's; C++ DSL graphs at the end check the caret in the rendered text.
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include "attnfuse/dsl.hpp"
#include "attnfuse/program.hpp"
#include "common/source_pos.hpp"
#include "ir/graph.hpp"
#include "ir/verifier.hpp"

namespace attnfuse {
namespace {

using test::Pos;
using test::pos_of;

struct Rejection {
  bool thrown = false;
  ErrorCode code{};
  std::string message;
  Pos header;     // from "line L, column C:"
  int caret = 0;  // column of the first '^' under the source line
};

Rejection parse_message(const Error& e) {
  Rejection r;
  r.thrown = true;
  r.code = e.code();
  r.message = e.what();
  std::sscanf(r.message.c_str(), "line %d, column %d:", &r.header.line, &r.header.col);
  const size_t nl = r.message.rfind('\n');
  if (nl != std::string::npos) {
    const std::string last = r.message.substr(nl + 1);
    const size_t c = last.find('^');
    if (c != std::string::npos && last.rfind("  ", 0) == 0) r.caret = static_cast<int>(c) - 2 + 1;
  }
  return r;
}

void expect_rejected(std::string_view text, std::initializer_list<std::string_view> phrases, Pos at,
                     ErrorCode code = ErrorCode::Verify) {
  SCOPED_TRACE(std::string("program: ") + std::string(text));
  Rejection r;
  try {
    Program::parse(text);
  } catch (const Error& e) {
    r = parse_message(e);
  }
  ASSERT_TRUE(r.thrown) << "the program was accepted";
  EXPECT_EQ(r.code, code) << r.message;
  for (std::string_view p : phrases)
    EXPECT_NE(r.message.find(p), std::string::npos) << "missing '" << p << "' in:\n" << r.message;
  EXPECT_EQ(r.header.line, at.line) << r.message;
  EXPECT_EQ(r.header.col, at.col) << r.message;
  EXPECT_EQ(r.caret, at.col) << r.message;
}

// ---- Structure ------------------------------------------------------------------------------

TEST(VerifierErrors, MaskAfterNormalization) {
  const char* t = "causal(softmax(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"mask causal is applied after the normalization softmax",
                      "change the normalization, not the selection", "Move the mask inside",
                      "softmax(causal(...)) @ V"},
                  pos_of(t, "causal"));
}

TEST(VerifierErrors, MaskAfterNormalizationInStatements) {
  const char* t = "s = rope(Q, K)\np = relu_attention(s)\np = sliding_window(p, 64)\nreturn p @ V";
  expect_rejected(t, {"mask sliding_window is applied after the normalization relu_attention",
                      "relu_attention(sliding_window(..., window)) @ V"},
                  pos_of(t, "sliding_window"));
}

TEST(VerifierErrors, ModifierAfterNormalization) {
  const char* t = "alibi(softmax(causal(scaled_dot_product(Q, K)))) @ V";
  expect_rejected(t, {"score modifier alibi is applied after the normalization softmax",
                      "no longer normalized", "Move it inside"},
                  pos_of(t, "alibi"));
}

TEST(VerifierErrors, TwoNormalizations) {
  const char* t = "softmax(relu_attention(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"two normalizations", "softmax is applied to the output of relu_attention",
                      "exactly one normalization"},
                  pos_of(t, "softmax"));
}

TEST(VerifierErrors, TwoNormalizationsOneUnused) {
  const char* t = "s = scaled_dot_product(Q, K)\np = softmax(s)\nq = relu_attention(s)\nreturn p @ V";
  expect_rejected(t, {"two normalizations: softmax (line 2, column 5) and relu_attention"},
                  pos_of(t, "relu_attention"));
}

TEST(VerifierErrors, NoNormalization) {
  const char* t = "causal(scaled_dot_product(Q, K)) @ V";
  expect_rejected(t, {"no normalization", "scores (the result of causal)", "softmax(causal(...)) @ V"},
                  pos_of(t, "@"));
}

TEST(VerifierErrors, MissingAtV) {
  const char* t = "softmax(causal(rope(Q, K)))";
  expect_rejected(t, {"missing `@ V`", "ends with softmax(...)", "write softmax(...) @ V"},
                  pos_of(t, "softmax"));
}

TEST(VerifierErrors, MissingAtVInStatements) {
  const char* t = "s = rope(Q, K)\ns = causal(s)\nreturn relu_attention(s)";
  expect_rejected(t, {"missing `@ V`", "ends with relu_attention(...)"}, pos_of(t, "relu_attention"));
}

TEST(VerifierErrors, EndsWithScores) {
  const char* t = "causal(rope(Q, K))";
  expect_rejected(t, {"ends with scores", "no normalization and no `@ V`"}, pos_of(t, "causal"));
}

TEST(VerifierErrors, ProgramIsJustAnInput) {
  const char* t = "Q";
  expect_rejected(t, {"the program is just the query tensor Q"}, pos_of(t, "Q"));
}

TEST(VerifierErrors, AtWithKeyOnTheRight) {
  const char* t = "softmax(scaled_dot_product(Q, K)) @ K";
  expect_rejected(t, {"the right side of `@` must be the value tensor V", "the key tensor K"},
                  pos_of(t, "@"));
}

TEST(VerifierErrors, AtWithScoresOnTheRight) {
  const char* t = "s = scaled_dot_product(Q, K)\nreturn softmax(s) @ s";
  expect_rejected(t, {"the right side of `@` must be the value tensor V",
                      "scores (the result of scaled_dot_product)"},
                  pos_of(t, "@"));
}

TEST(VerifierErrors, AtWithTensorOnTheLeft) {
  const char* t = "Q @ V";
  expect_rejected(t, {"the left side of `@` must be attention probabilities", "the query tensor Q"},
                  pos_of(t, "@"));
}

TEST(VerifierErrors, AtAppliedTwice) {
  const char* t = "(softmax(scaled_dot_product(Q, K)) @ V) @ V";
  expect_rejected(t, {"already an attention output"}, pos_of(t, "@", 2));
}

TEST(VerifierErrors, NoScoreOp) {
  const char* t = "softmax(Q) @ V";
  expect_rejected(t, {"softmax expects attention scores", "the query tensor Q", "no score op",
                      "softmax(scaled_dot_product(Q, K)) @ V"},
                  pos_of(t, "softmax"));
}

TEST(VerifierErrors, TwoScoreOpsNested) {
  const char* t = "softmax(scaled_dot_product(rope(Q, K), K)) @ V";
  expect_rejected(t, {"two score ops", "scores (the result of rope)", "exactly one score op"},
                  pos_of(t, "scaled_dot_product"));
}

TEST(VerifierErrors, TwoScoreOpsOneUnused) {
  const char* t = "a = rope(Q, K)\ns = scaled_dot_product(Q, K)\nreturn softmax(s) @ V";
  expect_rejected(t, {"two score ops: rope (line 1, column 5) and scaled_dot_product"},
                  pos_of(t, "scaled_dot_product"));
}

TEST(VerifierErrors, CausalOfQ) {
  const char* t = "softmax(causal(Q)) @ V";
  expect_rejected(t, {"causal expects attention scores, but its operand is the query tensor Q",
                      "causal(scaled_dot_product(Q, K))"},
                  pos_of(t, "causal"));
}

TEST(VerifierErrors, SlidingWindowOfK) {
  const char* t = "softmax(sliding_window(K, 8)) @ V";
  expect_rejected(t, {"sliding_window expects attention scores", "the key tensor K",
                      "sliding_window(scaled_dot_product(Q, K), window)"},
                  pos_of(t, "sliding_window"));
}

TEST(VerifierErrors, ModifierOfV) {
  const char* t = "softmax(alibi(V)) @ V";
  expect_rejected(t, {"alibi expects attention scores", "value tensor V", "only through `@ V`"},
                  pos_of(t, "alibi"));
}

TEST(VerifierErrors, MaskOfAttentionOutput) {
  const char* t = "causal(softmax(scaled_dot_product(Q, K)) @ V)";
  expect_rejected(t, {"causal is applied to the attention output", "`@ V` is the last step"},
                  pos_of(t, "causal"));
}

TEST(VerifierErrors, SoftmaxOfAttentionOutput) {
  const char* t = "softmax(softmax(scaled_dot_product(Q, K)) @ V)";
  expect_rejected(t, {"softmax is applied to the attention output"}, pos_of(t, "softmax"));
}

TEST(VerifierErrors, ScaledDotProductOfScores) {
  const char* t = "s = scaled_dot_product(Q, K)\nreturn softmax(scaled_dot_product(s, K)) @ V";
  expect_rejected(t, {"scaled_dot_product's first operand must be the query tensor Q",
                      "scores (the result of scaled_dot_product)", "two score ops"},
                  pos_of(t, "scaled_dot_product", 2));
}

TEST(VerifierErrors, RopeOperandsSwapped) {
  const char* t = "softmax(rope(K, Q)) @ V";
  expect_rejected(t, {"rope has its operands swapped", "rope(Q, K)", "got rope(K, Q)"},
                  pos_of(t, "rope"));
}

TEST(VerifierErrors, ScaledDotProductWithV) {
  const char* t = "softmax(scaled_dot_product(Q, V)) @ V";
  expect_rejected(t, {"second operand must be the key tensor K", "V is the value tensor",
                      "only through `@ V`"},
                  pos_of(t, "scaled_dot_product"));
}

TEST(VerifierErrors, ScaledDotProductOfQQ) {
  const char* t = "softmax(scaled_dot_product(Q, Q)) @ V";
  expect_rejected(t, {"second operand must be the key tensor K, but it is the query tensor Q"},
                  pos_of(t, "scaled_dot_product"));
}

TEST(VerifierErrors, RopeWindowWithVFirst) {
  const char* t = "softmax(rope_window(V, K, k=2)) @ V";
  expect_rejected(t, {"rope_window's first operand must be the query tensor Q", "value tensor V"},
                  pos_of(t, "rope_window"));
}

TEST(VerifierErrors, ScoreOpWithOneOperand) {
  const char* t = "softmax(scaled_dot_product(Q)) @ V";
  expect_rejected(t, {"scaled_dot_product takes two operands, the query Q and the key K, but got 1"},
                  pos_of(t, "scaled_dot_product"));
}

TEST(VerifierErrors, MaskWithNoOperand) {
  const char* t = "softmax(causal()) @ V";
  expect_rejected(t, {"causal takes one operand, the scores, but got 0"}, pos_of(t, "causal"));
}

TEST(VerifierErrors, SameMaskTwice) {
  const char* t = "softmax(causal(causal(scaled_dot_product(Q, K)))) @ V";
  expect_rejected(t, {"causal is applied twice (first at line 1, column 16)",
                      "keeps the same cells however often it is applied"},
                  pos_of(t, "causal"));
}

TEST(VerifierErrors, SameMaskTwiceWithAModifierBetween) {
  const char* t = "s = scaled_dot_product(Q, K)\ns = causal(s)\ns = alibi(s)\ns = causal(s)\n"
                  "return softmax(s) @ V";
  expect_rejected(t, {"causal is applied twice (first at line 2, column 5)"}, pos_of(t, "causal", 2));
}

TEST(VerifierErrors, TwoSlidingWindows) {
  const char* t = "softmax(sliding_window(sliding_window(rope(Q, K), 128), 64)) @ V";
  expect_rejected(t, {"sliding_window is applied twice", "use one sliding_window with the smaller window"},
                  pos_of(t, "sliding_window"));
}

TEST(VerifierErrors, SameModifierTwice) {
  const char* t = "softmax(alibi(causal(alibi(scaled_dot_product(Q, K))))) @ V";
  expect_rejected(t, {"alibi is applied twice", "each score modifier may appear at most once"},
                  pos_of(t, "alibi"));
}

TEST(VerifierErrors, SoftcapTwice) {
  const char* t = "softmax(softcap(softcap(scaled_dot_product(Q, K), 30), 50)) @ V";
  expect_rejected(t, {"softcap is applied twice"}, pos_of(t, "softcap"));
}

// Decision (documented in verifier.hpp): `full` keeps every cell, so with another mask it is
// redundant and rejected, like a mask applied twice; `full` alone is fine.
TEST(VerifierErrors, FullWithAnotherMask) {
  const char* t = "softmax(causal(full(scaled_dot_product(Q, K)))) @ V";
  expect_rejected(t, {"full keeps every cell, so combining it with causal is redundant",
                      "remove full(...)"},
                  pos_of(t, "full"));
}

TEST(VerifierErrors, ResultNeverUsed) {
  const char* t = "s = scaled_dot_product(Q, K)\nt = causal(s)\nreturn softmax(s) @ V";
  expect_rejected(t, {"the result of causal is never used", "s = causal(s)"}, pos_of(t, "causal"));
}

// ---- Parameters -----------------------------------------------------------------------------

TEST(VerifierErrors, SlidingWindowZero) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), 0)) @ V";
  expect_rejected(t, {"sliding_window: parameter 'window' must be an integer >= 1, got 0",
                      "keeps keys with |delta| < window"},
                  pos_of(t, "0"));
}

TEST(VerifierErrors, SlidingWindowNegative) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), window=-4)) @ V";
  expect_rejected(t, {"'window' must be an integer >= 1, got -4"}, pos_of(t, "window=-4"));
}

TEST(VerifierErrors, SlidingWindowNotAnInteger) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), 2.5)) @ V";
  expect_rejected(t, {"'window' must be an integer, got 2.5"}, pos_of(t, "2.5"));
}

TEST(VerifierErrors, SlidingWindowWord) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), wide)) @ V";
  expect_rejected(t, {"'window' must be an integer, got 'wide'"}, pos_of(t, "wide"));
}

TEST(VerifierErrors, SoftcapZero) {
  const char* t = "softmax(softcap(scaled_dot_product(Q, K), 0)) @ V";
  expect_rejected(t, {"softcap: parameter 'cap' must be a finite number > 0, got 0",
                      "cap * tanh(s / cap)"},
                  pos_of(t, "0"));
}

TEST(VerifierErrors, SoftcapNegative) {
  const char* t = "softmax(softcap(scaled_dot_product(Q, K), cap=-30)) @ V";
  expect_rejected(t, {"'cap' must be a finite number > 0, got -30"}, pos_of(t, "cap=-30"));
}

TEST(VerifierErrors, ScaleZero) {
  const char* t = "softmax(scaled_dot_product(Q, K, scale=0)) @ V";
  expect_rejected(t, {"scaled_dot_product: parameter 'scale' must be a finite number > 0, got 0"},
                  pos_of(t, "scale=0"));
}

TEST(VerifierErrors, ScaleNegative) {
  const char* t = "softmax(scaled_dot_product(Q, K, -0.125)) @ V";
  expect_rejected(t, {"'scale' must be a finite number > 0, got -0.125"}, pos_of(t, "-0.125"));
}

TEST(VerifierErrors, ScaleInfinite) {
  const char* t = "softmax(rope(Q, K, scale=1e999)) @ V";
  expect_rejected(t, {"rope: parameter 'scale' must be a finite number > 0, got inf"},
                  pos_of(t, "scale=1e999"));
}

TEST(VerifierErrors, ScaleList) {
  const char* t = "softmax(scaled_dot_product(Q, K, scale=[1, 2])) @ V";
  expect_rejected(t, {"'scale' must be a number, got the list [1, 2]"}, pos_of(t, "scale="));
}

TEST(VerifierErrors, RopeBaseOne) {
  const char* t = "softmax(rope(Q, K, base=1)) @ V";
  expect_rejected(t, {"rope: parameter 'base' must be a finite number > 1, got 1", "theta_r"},
                  pos_of(t, "base=1"));
}

TEST(VerifierErrors, RotaryDimOdd) {
  const char* t = "softmax(rope(Q, K, rotary_dim=63)) @ V";
  expect_rejected(t, {"'rotary_dim' must be a positive even integer, got 63", "in pairs"},
                  pos_of(t, "rotary_dim"));
}

TEST(VerifierErrors, RopeWindowKZero) {
  const char* t = "softmax(causal(rope_window(Q, K, k=0))) @ V";
  expect_rejected(t, {"rope_window: parameter 'k' must be a finite number > 0, got 0"},
                  pos_of(t, "k=0"));
}

TEST(VerifierErrors, RopeWindowKNegativePositional) {
  const char* t = "softmax(rope_window(Q, K, -1)) @ V";
  expect_rejected(t, {"'k' must be a finite number > 0, got -1"}, pos_of(t, "-1"));
}

TEST(VerifierErrors, RopeWindowMissingK) {
  const char* t = "softmax(causal(rope_window(Q, K, base=500000))) @ V";
  expect_rejected(t, {"rope_window is missing its required parameter 'k'", "rope_window(Q, K, k"},
                  pos_of(t, "rope_window"));
}

TEST(VerifierErrors, UnknownStyle) {
  const char* t = "softmax(rope(Q, K, style=neo)) @ V";
  expect_rejected(t, {"rope: parameter 'style' is 'neo', which is not one of neox, gptj (did you mean 'neox'?)"},
                  pos_of(t, "style"));
}

TEST(VerifierErrors, StyleNumber) {
  const char* t = "softmax(rope(Q, K, style=2)) @ V";
  expect_rejected(t, {"'style' must be one of neox, gptj, got 2"}, pos_of(t, "style"));
}

TEST(VerifierErrors, UnknownRopeType) {
  const char* t = "softmax(rope(Q, K, rope_type=lama3, factor=8)) @ V";
  expect_rejected(t, {"parameter 'rope_type' is 'lama3', which is not one of default, linear, dynamic, yarn, "
                      "llama3, longrope (did you mean 'llama3'?)"},
                  pos_of(t, "rope_type"));
}

TEST(VerifierErrors, Llama3MissingParameters) {
  const char* t = "softmax(rope(Q, K, rope_type=llama3, factor=8)) @ V";
  expect_rejected(t, {"rope_type=llama3 needs factor, low_freq_factor, high_freq_factor and "
                      "original_max_position_embeddings",
                      "missing: low_freq_factor, high_freq_factor and original_max_position_embeddings"},
                  pos_of(t, "rope"));
}

TEST(VerifierErrors, YarnMissingFactor) {
  const char* t = "softmax(rope(Q, K, rope_type=yarn, original_max_position_embeddings=4096)) @ V";
  expect_rejected(t, {"rope_type=yarn needs factor and original_max_position_embeddings",
                      "missing: factor"},
                  pos_of(t, "rope"));
}

TEST(VerifierErrors, LinearMissingFactor) {
  const char* t = "softmax(rope_window(Q, K, 2, rope_type=linear)) @ V";
  expect_rejected(t, {"rope_window: rope_type=linear needs factor; missing: factor"},
                  pos_of(t, "rope_window"));
}

TEST(VerifierErrors, LongropeMissingShortFactor) {
  const char* t = "softmax(rope(Q, K, rope_type=longrope, long_factor=[1, 2])) @ V";
  expect_rejected(t, {"rope_type=longrope needs long_factor and short_factor", "missing: short_factor"},
                  pos_of(t, "rope"));
}

TEST(VerifierErrors, LongropeLengthsDiffer) {
  const char* t =
      "softmax(rope(Q, K, rope_type=longrope, long_factor=[1, 2], short_factor=[1, 1, 1])) @ V";
  expect_rejected(t, {"long_factor has 2 entries but short_factor has 3"}, pos_of(t, "short_factor"));
}

TEST(VerifierErrors, LongropeLengthNotRotaryDimOver2) {
  const char* t = "softmax(rope(Q, K, rotary_dim=8, rope_type=longrope, long_factor=[1, 2], "
                  "short_factor=[1, 1])) @ V";
  expect_rejected(t, {"have 2 entries, but rotary_dim=8 rotates 4 pairs"}, pos_of(t, "long_factor"));
}

TEST(VerifierErrors, LongFactorNotPositive) {
  const char* t = "softmax(rope(Q, K, rope_type=longrope, long_factor=[1, 0], short_factor=[1, 1])) @ V";
  expect_rejected(t, {"'long_factor' must hold only finite numbers > 0, got the list [1, 0]"},
                  pos_of(t, "long_factor"));
}

TEST(VerifierErrors, Llama3HighNotAboveLow) {
  const char* t = "softmax(rope(Q, K, rope_type=llama3, factor=8, low_freq_factor=4, "
                  "high_freq_factor=1, original_max_position_embeddings=8192)) @ V";
  expect_rejected(t, {"high_freq_factor (1) must be greater than low_freq_factor (4)"},
                  pos_of(t, "high_freq_factor"));
}

TEST(VerifierErrors, ScalingParameterWithoutRopeType) {
  const char* t = "softmax(rope(Q, K, factor=8)) @ V";
  expect_rejected(t, {"parameter 'factor' has no effect with rope_type=default",
                      "read only by rope_type=linear, dynamic, yarn, llama3 or longrope"},
                  pos_of(t, "factor"));
}

TEST(VerifierErrors, ParameterOfAnotherRopeType) {
  const char* t = "softmax(rope(Q, K, rope_type=linear, factor=2, beta_fast=16)) @ V";
  expect_rejected(t, {"'beta_fast' has no effect with rope_type=linear; it is read only by rope_type=yarn"},
                  pos_of(t, "beta_fast"));
}

TEST(VerifierErrors, AlibiSlopesNumber) {
  const char* t = "softmax(alibi(scaled_dot_product(Q, K), slopes=0.5)) @ V";
  expect_rejected(t, {"'slopes' must be standard or a list of numbers"}, pos_of(t, "slopes"));
}

TEST(VerifierErrors, AlibiSlopesEmpty) {
  const char* t = "softmax(alibi(scaled_dot_product(Q, K), [])) @ V";
  expect_rejected(t, {"'slopes' must be a non-empty list of numbers"}, pos_of(t, "[]"));
}

TEST(VerifierErrors, AlibiSlopesMisspelled) {
  const char* t = "softmax(alibi(scaled_dot_product(Q, K), slopes=standrad)) @ V";
  expect_rejected(t, {"parameter 'slopes' is 'standrad', which is not standard (did you mean 'standard'?)"},
                  pos_of(t, "slopes"));
}

TEST(VerifierErrors, UnknownKeyword) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), windw=4)) @ V";
  expect_rejected(t, {"unknown parameter 'windw' of sliding_window (did you mean 'window'?)",
                      "its parameters are window"},
                  pos_of(t, "windw"));
}

TEST(VerifierErrors, UnknownRopeKeyword) {
  const char* t = "softmax(rope(Q, K, bsae=500000)) @ V";
  expect_rejected(t, {"unknown parameter 'bsae' of rope (did you mean 'base'?)",
                      "base, style, rotary_dim, scale, rope_type"},
                  pos_of(t, "bsae"));
}

TEST(VerifierErrors, KeywordOnCombinatorWithoutParameters) {
  const char* t = "softmax(causal(scaled_dot_product(Q, K), window=4)) @ V";
  expect_rejected(t, {"causal takes no parameters, but got 'window'"}, pos_of(t, "window"));
}

TEST(VerifierErrors, DuplicateKeyword) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), window=4, window=8)) @ V";
  expect_rejected(t, {"parameter 'window' of sliding_window is given twice"}, pos_of(t, "window=8"));
}

TEST(VerifierErrors, PositionalAndKeywordForOneParameter) {
  const char* t = "softmax(softcap(scaled_dot_product(Q, K), 30, cap=50)) @ V";
  expect_rejected(t, {"parameter 'cap' of softcap is given twice"}, pos_of(t, "cap=50"));
}

TEST(VerifierErrors, MissingRequiredParameter) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"sliding_window is missing its required parameter 'window'",
                      "sliding_window(s, window)"},
                  pos_of(t, "sliding_window"));
}

TEST(VerifierErrors, SoftcapMissingCap) {
  const char* t = "softmax(softcap(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"softcap is missing its required parameter 'cap'"}, pos_of(t, "softcap"));
}

TEST(VerifierErrors, TooManyArguments) {
  const char* t = "softmax(causal(scaled_dot_product(Q, K), 4)) @ V";
  expect_rejected(t, {"too many arguments: causal takes 1 operand and no parameters (causal(s))"},
                  pos_of(t, "4"));
}

TEST(VerifierErrors, TooManyPositionalParameters) {
  const char* t = "softmax(softcap(scaled_dot_product(Q, K), 30, 40)) @ V";
  expect_rejected(t, {"too many arguments: softcap takes at most 2 positional arguments"},
                  pos_of(t, "40"));
}

TEST(VerifierErrors, NumberWhereAnOperandBelongs) {
  const char* t = "softmax(scaled_dot_product(Q, 0.125)) @ V";
  expect_rejected(t, {"operand 2 of scaled_dot_product must be the key tensor K, but it is a number",
                      "parameters come after the operands"},
                  pos_of(t, "0.125"));
}

TEST(VerifierErrors, ExpressionWhereAParameterBelongs) {
  const char* t = "s = scaled_dot_product(Q, K)\nreturn softmax(sliding_window(s, causal(s))) @ V";
  expect_rejected(t, {"parameter 'window' of sliding_window must be a value", "not an expression"},
                  pos_of(t, "causal"));
}

// ---- C++ DSL graphs: no source text, the caret points into the rendered program ------------

struct DslRejection {
  std::string message;
  std::string source_line;
  int caret = 0;
};

DslRejection reject_dsl(const dsl::Expr& e) {
  DslRejection r;
  try {
    dsl::compile_program(e);
    ADD_FAILURE() << "accepted: " << e.text();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::Verify);
    Rejection p = parse_message(err);
    r.message = p.message;
    r.caret = p.caret;
    const size_t last = r.message.rfind('\n');
    const size_t prev = r.message.rfind('\n', last - 1);
    r.source_line = r.message.substr(prev + 3, last - prev - 3);
  }
  return r;
}

TEST(VerifierErrors, CppDslCausalOfQ) {
  using namespace dsl;
  DslRejection r = reject_dsl(matmul(softmax(causal(Q)), V));
  EXPECT_NE(r.message.find("causal expects attention scores"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.rfind("line ", 0), std::string::npos) << "no line number for C++: " << r.message;
  EXPECT_EQ(r.source_line, "softmax(causal(Q)) @ V");
  EXPECT_EQ(r.caret, 9) << r.message;
}

TEST(VerifierErrors, CppDslMaskAfterNormalization) {
  using namespace dsl;
  DslRejection r = reject_dsl(matmul(sliding_window(softmax(rope(Q, K)), 128), V));
  EXPECT_NE(r.message.find("change the normalization, not the selection"), std::string::npos) << r.message;
  EXPECT_EQ(r.source_line, "sliding_window(softmax(rope(Q, K)), window=128) @ V");
  EXPECT_EQ(r.caret, 1) << r.message;
}

TEST(VerifierErrors, CppDslBadParameter) {
  using namespace dsl;
  DslRejection r = reject_dsl(matmul(softmax(softcap(scaled_dot_product(Q, K), -1.0)), V));
  EXPECT_NE(r.message.find("'cap' must be a finite number > 0, got -1"), std::string::npos) << r.message;
  EXPECT_EQ(r.caret, 9) << r.message;
}

TEST(VerifierErrors, CppDslRopeBaseAndMissingAtV) {
  using namespace dsl;
  DslRejection a = reject_dsl(matmul(softmax(rope(Q, K, {.base = 0.5})), V));
  EXPECT_NE(a.message.find("'base' must be a finite number > 1, got 0.5"), std::string::npos) << a.message;
  DslRejection b = reject_dsl(softmax(rope(Q, K)));
  EXPECT_NE(b.message.find("missing `@ V`"), std::string::npos) << b.message;
  EXPECT_EQ(b.caret, 1) << b.message;
}

TEST(VerifierErrors, CppDslOtherTensor) {
  using namespace dsl;
  DslRejection r = reject_dsl(matmul(softmax(additive_bias(tensor("bias"))), V));
  EXPECT_NE(r.message.find("its operand is the tensor bias"), std::string::npos) << r.message;
}

// A graph built node by node (as a pass or a binding might) gets the same checks.
TEST(VerifierErrors, BuilderGraphUnknownParameterAndEmpty) {
  ir::Builder b;
  const ir::NodeId q = b.tensor("Q"), k = b.tensor("K"), v = b.tensor("V");
  const ir::NodeId s = b.call(ir::Op::ScaledDotProduct, {q, k}, {ir::Param{"scael", 0.1, {}}});
  const ir::NodeId p = b.call(ir::Op::Softmax, {s}, {});
  const ir::Graph g = std::move(b).finish(b.call(ir::Op::MatMul, {p, v}, {}));
  try {
    ir::verify(g);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("unknown parameter 'scael' of scaled_dot_product (did you mean 'scale'?)"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(ir::verify(ir::Graph{}), Error);
}

}  // namespace
}  // namespace attnfuse
