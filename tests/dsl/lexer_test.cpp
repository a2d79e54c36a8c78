// The tokenizer: token kinds and locations, numbers, comments, newlines inside brackets.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attnfuse/error.hpp"
#include "dsl/lexer.hpp"

namespace attnfuse::dsl {
namespace {

std::vector<Tok> kinds(std::string_view src) {
  std::vector<Tok> out;
  for (const Token& t : lex(src)) out.push_back(t.kind);
  return out;
}

TEST(Lexer, KindsOfAProgram) {
  EXPECT_EQ(kinds("s = causal(s); return softmax(s) @ V"),
            (std::vector<Tok>{Tok::Ident, Tok::Assign, Tok::Ident, Tok::LParen, Tok::Ident, Tok::RParen,
                              Tok::Semicolon, Tok::Ident, Tok::Ident, Tok::LParen, Tok::Ident, Tok::RParen,
                              Tok::At, Tok::Ident, Tok::End}));
  EXPECT_EQ(kinds("alibi(s, [-0.5, 1])"),
            (std::vector<Tok>{Tok::Ident, Tok::LParen, Tok::Ident, Tok::Comma, Tok::LBracket, Tok::Minus,
                              Tok::Number, Tok::Comma, Tok::Number, Tok::RBracket, Tok::RParen, Tok::End}));
}

TEST(Lexer, Locations) {
  const auto toks = lex("s = rope(Q, K)\n  return softmax(s) @ V");
  EXPECT_EQ(toks[2].text, "rope");
  EXPECT_EQ((std::tuple{toks[2].loc.line, toks[2].loc.col, toks[2].loc.len}), (std::tuple{1, 5, 4}));
  const Token& ret = toks[9];
  EXPECT_EQ(ret.text, "return");
  EXPECT_EQ((std::tuple{ret.loc.line, ret.loc.col}), (std::tuple{2, 3}));
  EXPECT_EQ(toks.back().kind, Tok::End);
  EXPECT_EQ(toks.back().loc.col, 24);  // just past the last character
}

TEST(Lexer, Numbers) {
  struct Case {
    const char* text;
    double value;
  };
  for (const Case& c : {Case{"1024", 1024}, Case{"0.125", 0.125}, Case{".5", 0.5}, Case{"1.", 1.0},
                        Case{"1e-5", 1e-5}, Case{"1E+3", 1000}, Case{"2.5e2", 250},
                        Case{"0.08838834764831845", 0.08838834764831845}}) {
    const auto toks = lex(c.text);
    ASSERT_EQ(toks.size(), 2u) << c.text;
    EXPECT_EQ(toks[0].kind, Tok::Number) << c.text;
    EXPECT_EQ(toks[0].number, c.value) << c.text;
  }
  EXPECT_TRUE(std::isinf(lex("1e999")[0].number));
  EXPECT_EQ(lex("1e-999")[0].number, 0.0);
  for (const char* bad : {"10k", "1e", "1.2.3", "3x", "1e+"}) EXPECT_THROW(lex(bad), Error) << bad;
}

TEST(Lexer, NewlinesSeparateStatementsOnlyOutsideBrackets) {
  EXPECT_EQ(kinds("a\nb"), (std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident, Tok::End}));
  EXPECT_EQ(kinds("f(a,\n b)\n[1,\n2]"),
            (std::vector<Tok>{Tok::Ident, Tok::LParen, Tok::Ident, Tok::Comma, Tok::Ident, Tok::RParen,
                              Tok::Newline, Tok::LBracket, Tok::Number, Tok::Comma, Tok::Number,
                              Tok::RBracket, Tok::End}));
  EXPECT_EQ(kinds("a\r\nb"), (std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident, Tok::End}));
}

TEST(Lexer, Comments) {
  EXPECT_EQ(kinds("# header\na  # trailing (not a paren\n"),
            (std::vector<Tok>{Tok::Newline, Tok::Ident, Tok::Newline, Tok::End}));
  EXPECT_EQ(kinds(""), (std::vector<Tok>{Tok::End}));
}

TEST(Lexer, StrayCharactersAreParseErrors) {
  for (const char* bad : {"a $ b", "a ! b", "f(x) * 2", "{", "'a'", "é"}) {
    try {
      lex(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Parse);
      EXPECT_NE(std::string(e.what()).find("unexpected character"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attnfuse::dsl
