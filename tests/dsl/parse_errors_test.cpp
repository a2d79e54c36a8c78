// Every malformed program text, one test each: ErrorCode::Parse, the message's key phrase, and
// the line/column in the header and under the caret.
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "common/source_pos.hpp"

namespace attnfuse {
namespace {

using test::Pos;
using test::pos_of;

void expect_parse_error(std::string_view text, std::initializer_list<std::string_view> phrases, Pos at) {
  SCOPED_TRACE(std::string("program: ") + std::string(text));
  std::string msg;
  ErrorCode code{};
  try {
    Program::parse(text);
    FAIL() << "the program was accepted";
  } catch (const Error& e) {
    msg = e.what();
    code = e.code();
  }
  EXPECT_EQ(code, ErrorCode::Parse) << msg;
  for (std::string_view p : phrases)
    EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in:\n" << msg;
  Pos header;
  std::sscanf(msg.c_str(), "line %d, column %d:", &header.line, &header.col);
  EXPECT_EQ(header.line, at.line) << msg;
  EXPECT_EQ(header.col, at.col) << msg;
  // The last two lines: the offending source line, then the caret under the column.
  const size_t nl = msg.rfind('\n');
  ASSERT_NE(nl, std::string::npos) << msg;
  const std::string caret = msg.substr(nl + 1);
  EXPECT_EQ(static_cast<int>(caret.find('^')) - 2 + 1, at.col) << msg;
  const size_t nl2 = msg.rfind('\n', nl - 1);
  std::string line(text);
  for (int l = 1; l < at.line; ++l) line = line.substr(line.find('\n') + 1);
  line = line.substr(0, line.find('\n'));
  EXPECT_EQ(msg.substr(nl2 + 1, nl - nl2 - 1), "  " + line) << msg;
}

TEST(ParseErrors, UnknownCombinatorSuggestsTheClosest) {
  const char* t = "s = scaled_dot_product(Q, K)\nreturn softmax(causal(casual(s))) @ V";
  expect_parse_error(t, {"unknown combinator 'casual' (did you mean 'causal'?)"}, pos_of(t, "casual"));
}

TEST(ParseErrors, UnknownCombinatorListsThemAll) {
  const char* t = "softmax(frobnicate(scaled_dot_product(Q, K))) @ V";
  expect_parse_error(t, {"unknown combinator 'frobnicate'; the combinators are scaled_dot_product, rope,"},
                     pos_of(t, "frobnicate"));
}

TEST(ParseErrors, MisspelledScoreOp) {
  const char* t = "softmax(scaled_dot_prodcut(Q, K)) @ V";
  expect_parse_error(t, {"did you mean 'scaled_dot_product'?"}, pos_of(t, "scaled"));
}

TEST(ParseErrors, UnterminatedCall) {
  const char* t = "softmax(causal(scaled_dot_product(Q, K)) @ V";
  expect_parse_error(t, {"unterminated call: the '(' after softmax (column 8) is never closed"},
                     pos_of(t, "softmax"));
}

TEST(ParseErrors, UnterminatedInnerCall) {
  const char* t = "softmax(causal(scaled_dot_product(Q, K)";
  expect_parse_error(t, {"unterminated call: the '(' after causal"}, pos_of(t, "causal"));
}

TEST(ParseErrors, UnclosedParenthesis) {
  const char* t = "(softmax(rope(Q, K)) @ V";
  expect_parse_error(t, {"this '(' is never closed"}, pos_of(t, "("));
}

TEST(ParseErrors, UnmatchedClosingParenthesis) {
  const char* t = "softmax(rope(Q, K))) @ V";
  expect_parse_error(t, {"unmatched ')'"}, Pos{1, 20});
}

TEST(ParseErrors, MissingComma) {
  const char* t = "softmax(scaled_dot_product(Q K)) @ V";
  expect_parse_error(t, {"expected ',' or ')' in the call to scaled_dot_product, got 'K'"},
                     pos_of(t, "K"));
}

TEST(ParseErrors, StrayCharacter) {
  const char* t = "softmax(scaled_dot_product(Q, K)) $ V";
  expect_parse_error(t, {"unexpected character '$'"}, pos_of(t, "$"));
}

TEST(ParseErrors, StrayUnicodeCharacter) {
  const char* t = "softmax(scaled_dot_product(Q, K)) → V";
  expect_parse_error(t, {"unexpected character '→'"}, pos_of(t, "→"));
}

TEST(ParseErrors, ArithmeticInAParameter) {
  const char* t = "softmax(scaled_dot_product(Q, K, scale=1/8)) @ V";
  expect_parse_error(t, {"unexpected character '/'", "write the number itself"}, pos_of(t, "/"));
}

TEST(ParseErrors, QuotedWord) {
  const char* t = "softmax(rope(Q, K, style=\"gptj\")) @ V";
  expect_parse_error(t, {"words are written without quotes"}, pos_of(t, "\""));
}

TEST(ParseErrors, MalformedNumber) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), 10k)) @ V";
  expect_parse_error(t, {"malformed number '10k'"}, pos_of(t, "10k"));
}

TEST(ParseErrors, ExponentWithoutDigits) {
  const char* t = "softmax(scaled_dot_product(Q, K, scale=1e)) @ V";
  expect_parse_error(t, {"malformed number '1e'"}, pos_of(t, "1e"));
}

TEST(ParseErrors, MinusWithoutNumber) {
  const char* t = "softmax(sliding_window(scaled_dot_product(Q, K), -w)) @ V";
  expect_parse_error(t, {"'-' must be followed by a number, got 'w'"}, pos_of(t, "-"));
}

TEST(ParseErrors, EmptyProgram) {
  expect_parse_error("", {"empty program", "softmax(causal(scaled_dot_product(Q, K))) @ V"}, Pos{1, 1});
}

TEST(ParseErrors, OnlyCommentsAndBlankLines) {
  expect_parse_error("  # just a comment\n\n", {"empty program"}, Pos{3, 1});
}

TEST(ParseErrors, ReturnMissingInStatementForm) {
  const char* t = "s = scaled_dot_product(Q, K)\ns = causal(s)\nsoftmax(s) @ V";
  expect_parse_error(t, {"statement form needs `return`", "return softmax(s) @ V"}, pos_of(t, "softmax"));
}

TEST(ParseErrors, OnlyAssignments) {
  const char* t = "s = scaled_dot_product(Q, K); s = causal(s)";
  expect_parse_error(t, {"statement form needs a final `return`"}, pos_of(t, "s = causal"));
}

TEST(ParseErrors, ReturnWithoutValue) {
  const char* t = "s = scaled_dot_product(Q, K)\nreturn\n";
  expect_parse_error(t, {"`return` needs the program's result"}, pos_of(t, "return"));
}

TEST(ParseErrors, StatementAfterReturn) {
  const char* t = "s = rope(Q, K)\nreturn softmax(s) @ V\ns = causal(s)";
  expect_parse_error(t, {"comes after `return` and would never run"}, pos_of(t, "s = causal"));
}

TEST(ParseErrors, DiscardedExpression) {
  const char* t = "s = rope(Q, K)\ncausal(s)\nreturn softmax(s) @ V";
  expect_parse_error(t, {"the result of this expression is discarded"}, pos_of(t, "causal"));
}

TEST(ParseErrors, UnassignedName) {
  const char* t = "softmax(causal(s)) @ V";
  expect_parse_error(t, {"unknown name 's'; the inputs are Q, K and V"}, pos_of(t, "s)"));
}

TEST(ParseErrors, UnknownNameSuggestsAnAssignedOne) {
  const char* t = "scores = rope(Q, K)\nreturn softmax(causal(score)) @ V";
  expect_parse_error(t, {"unknown name 'score' (did you mean 'scores'?)",
                         "the names assigned so far are scores"},
                     pos_of(t, "score)"));
}

TEST(ParseErrors, LowerCaseInput) {
  const char* t = "softmax(scaled_dot_product(q, K)) @ V";
  expect_parse_error(t, {"unknown name 'q' (did you mean 'Q'?)"}, pos_of(t, "q,"));
}

TEST(ParseErrors, NameUsedBeforeItIsAssigned) {
  const char* t = "s = causal(t)\nt = rope(Q, K)\nreturn softmax(s) @ V";
  expect_parse_error(t, {"'t' is used before it is assigned (line 2)"}, pos_of(t, "t)"));
}

TEST(ParseErrors, CombinatorWithoutCall) {
  const char* t = "softmax(causal) @ V";
  expect_parse_error(t, {"'causal' is a combinator: call it, e.g. causal(s)"}, pos_of(t, "causal"));
}

TEST(ParseErrors, ValueCalledLikeACombinator) {
  const char* t = "s = rope(Q, K)\nreturn softmax(s(Q)) @ V";
  expect_parse_error(t, {"'s' is a value, not a combinator"}, pos_of(t, "s(Q)"));
}

TEST(ParseErrors, AssignToAnInput) {
  const char* t = "Q = rope(Q, K)\nreturn softmax(Q) @ V";
  expect_parse_error(t, {"cannot assign to the input Q"}, pos_of(t, "Q"));
}

TEST(ParseErrors, AssignToACombinatorName) {
  const char* t = "causal = rope(Q, K)\nreturn softmax(causal) @ V";
  expect_parse_error(t, {"cannot assign to 'causal': it is the name of a combinator"}, pos_of(t, "causal"));
}

TEST(ParseErrors, PositionalAfterKeyword) {
  const char* t = "softmax(rope(Q, K, base=500000, gptj)) @ V";
  expect_parse_error(t, {"positional argument after a keyword argument"}, pos_of(t, "gptj"));
}

TEST(ParseErrors, ProgramEndsAfterAt) {
  const char* t = "softmax(rope(Q, K)) @";
  expect_parse_error(t, {"the program ends in the middle of an expression"}, Pos{1, 22});
}

TEST(ParseErrors, NothingAfterAtOnTheLine) {
  const char* t = "s = rope(Q, K)\nreturn softmax(s) @\n";
  expect_parse_error(t, {"expected an expression, got the end of the line"}, Pos{2, 20});
}

TEST(ParseErrors, TwoExpressionsOnOneLine) {
  const char* t = "softmax(rope(Q, K)) @ V V";
  expect_parse_error(t, {"expected a new line or ';' after this statement, got 'V'"}, Pos{1, 25});
}

TEST(ParseErrors, NumberAsTheProgram) {
  const char* t = "return 42";
  expect_parse_error(t, {"expected an attention expression here, got a number"}, pos_of(t, "42"));
}

TEST(ParseErrors, ListEntryNotANumber) {
  const char* t = "softmax(alibi(rope(Q, K), slopes=[0.5, half])) @ V";
  expect_parse_error(t, {"list entries must be numbers, got 'half'"}, pos_of(t, "half"));
}

TEST(ParseErrors, UnterminatedList) {
  const char* t = "softmax(alibi(rope(Q, K), slopes=[0.5, 0.25)) @ V";
  expect_parse_error(t, {"expected ',' or ']' in the list, got ')'"}, pos_of(t, "))"));
}

TEST(ParseErrors, NestedTooDeeply) {
  std::string t = "softmax(rope(Q, K)) @ V";
  for (int i = 0; i < 300; ++i) t = "(" + t + ")";
  expect_parse_error(t, {"nested too deeply"}, Pos{1, 202});
}

TEST(ParseErrors, CaretLinesUpAfterTabs) {
  const char* t = "s = rope(Q, K)\n\ts = causal(s)\n\treturn softmax(s) @ W";
  try {
    Program::parse(t);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("line 3, column 22: unknown name 'W'", 0), 0u) << msg;
    // The caret line copies the tab, so it lines up whatever the terminal's tab width.
    EXPECT_NE(msg.find("\n  \treturn softmax(s) @ W\n  \t                    ^"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace attnfuse
