// The document mask in the DSL and the IR: it composes like every other mask (any order, with
// every modifier and score op, both DSL forms), reaches the KernelSpec as MaskKind::Document with
// its run-time inputs listed, and misuse is rejected with a caret at the offending spot.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "attnfuse/dsl.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "common/source_pos.hpp"

namespace attnfuse {
namespace {

using test::Pos;
using test::pos_of;

KernelSpec compile(std::string_view text) { return Program::parse(text).compile(CompileOptions{}); }

TEST(DocumentMask, ComposesWithEveryMaskAndModifierInAnyOrder) {
  const char* const programs[] = {
      "softmax(document(scaled_dot_product(Q, K))) @ V",
      "softmax(causal(document(scaled_dot_product(Q, K)))) @ V",
      "softmax(document(causal(scaled_dot_product(Q, K)))) @ V",
      "softmax(document(sliding_window(causal(scaled_dot_product(Q, K)), 128))) @ V",
      "softmax(sliding_window(document(scaled_dot_product(Q, K)), 64)) @ V",
      "softmax(alibi(document(causal(rope(Q, K, base=500000))))) @ V",
      "softmax(document(softcap(additive_bias(alibi(scaled_dot_product(Q, K))), 30))) @ V",
      "relu_attention(block_sparse(document(rope_window(Q, K, k=2)))) @ V",
      "s = rope(Q, K)\ns = document(s)\ns = causal(s)\nreturn softmax(s) @ V",
  };
  for (const char* text : programs) {
    SCOPED_TRACE(text);
    const KernelSpec spec = compile(text);
    EXPECT_TRUE(spec.masks.has(MaskKind::Document));
    EXPECT_TRUE(spec.needs_cu_seqlens());
  }
  // Masks are a set: the order among them does not change the kernel.
  EXPECT_EQ(compile(programs[1]).masks, compile(programs[2]).masks);
}

TEST(DocumentMask, CppDslBuildsTheSameProgramAsTheText) {
  using namespace dsl;
  const Program p = compile_program(matmul(softmax(causal(document(scaled_dot_product(Q, K)))), V));
  EXPECT_EQ(p.canonical(), Program::parse("softmax(causal(document(scaled_dot_product(Q, K)))) @ V").canonical());
}

TEST(DocumentMask, SpecPrintoutNamesTheMaskAndItsRunTimeInputs) {
  const std::string text = to_string(compile("softmax(document(causal(scaled_dot_product(Q, K)))) @ V"));
  EXPECT_NE(text.find("masks      causal, document"), std::string::npos) << text;
  EXPECT_NE(text.find("inputs     Q, K, V, cu_seqlens_q, cu_seqlens_k"), std::string::npos) << text;
}

// ---- Misuse: the error, its key phrases, and where the caret points ------------------------

struct Rejection {
  ErrorCode code{};
  std::string message;
  Pos header;
};

Rejection reject(std::string_view text) {
  try {
    Program::parse(text);
  } catch (const Error& e) {
    Rejection r{e.code(), e.what(), {}};
    std::sscanf(r.message.c_str(), "line %d, column %d:", &r.header.line, &r.header.col);
    return r;
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

void expect_rejected(std::string_view text, std::initializer_list<std::string_view> phrases, Pos at,
                     ErrorCode code = ErrorCode::Verify) {
  SCOPED_TRACE(std::string(text));
  const Rejection r = reject(text);
  EXPECT_EQ(r.code, code) << r.message;
  for (std::string_view p : phrases)
    EXPECT_NE(r.message.find(p), std::string::npos) << "missing '" << p << "' in:\n" << r.message;
  EXPECT_EQ(r.header.line, at.line) << r.message;
  EXPECT_EQ(r.header.col, at.col) << r.message;
  // The caret line sits under the offending column.
  const size_t nl = r.message.rfind('\n');
  ASSERT_NE(nl, std::string::npos) << r.message;
  EXPECT_EQ(static_cast<int>(r.message.find('^', nl)) - static_cast<int>(nl) - 2, at.col) << r.message;
}

TEST(DocumentMaskErrors, OffsetsPassedAsAnArgument) {
  const char* t = "softmax(document(scaled_dot_product(Q, K), cu_seqlens_q)) @ V";
  expect_rejected(t, {"too many arguments: document takes 1 operand and no parameters (document(s))",
                      "the documents are run-time tensors", "--cu-seqlens-q"},
                  pos_of(t, "cu_seqlens_q"));
}

TEST(DocumentMaskErrors, KeywordParameter) {
  const char* t = "softmax(document(scaled_dot_product(Q, K), num_docs=4)) @ V";
  expect_rejected(t, {"document takes no parameters, but got 'num_docs'", "cu_seqlens_k"},
                  pos_of(t, "num_docs"));
}

TEST(DocumentMaskErrors, AppliedAfterTheNormalization) {
  const char* t = "document(softmax(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"mask document is applied after the normalization softmax"}, pos_of(t, "document"));
}

TEST(DocumentMaskErrors, AppliedTwice) {
  const char* t = "s = document(scaled_dot_product(Q, K))\ns = document(causal(s))\nreturn softmax(s) @ V";
  expect_rejected(t, {"document is applied twice (first at line 1, column 5)"}, pos_of(t, "document", 2));
}

TEST(DocumentMaskErrors, WithFull) {
  const char* t = "softmax(full(document(scaled_dot_product(Q, K)))) @ V";
  expect_rejected(t, {"full keeps every cell, so combining it with document is redundant"}, pos_of(t, "full"));
}

TEST(DocumentMaskErrors, MisspelledSuggestsDocument) {
  const char* t = "softmax(documnet(scaled_dot_product(Q, K))) @ V";
  expect_rejected(t, {"unknown combinator 'documnet' (did you mean 'document'?)"}, pos_of(t, "documnet"),
                  ErrorCode::Parse);
}

}  // namespace
}  // namespace attnfuse
