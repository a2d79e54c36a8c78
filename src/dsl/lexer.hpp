// The tokenizer of the text DSL: identifiers, numbers, punctuation, statement separators.
#pragma once

#include <string_view>
#include <vector>

#include "attnfuse/error.hpp"

namespace attnfuse::dsl {

enum class Tok {
  Ident,      // causal, Q, s, neox, return
  Number,     // 1024, 0.125, 1e-5, .5 (a leading '-' is a separate Minus token)
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Assign,     // =
  At,         // @
  Minus,      // -
  Semicolon,  // ; (statement separator)
  Newline,    // statement separator; only outside (...) and [...]
  End,
};

// "'('", "a number", "the end of the program", ... for messages.
const char* tok_name(Tok t);

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  // a view into the source
  double number = 0.0;    // Number: the value (overflow reads as inf, underflow as 0)
  SourceLoc loc;
};

// Splits `source` into tokens ending with one End token. Newlines inside parentheses or
// brackets are dropped, so a call may span lines; `#` starts a comment that runs to the end of
// the line. Throws Error(Parse) with line, column and caret on a stray character or a
// malformed number such as `10k` or `1e`.
std::vector<Token> lex(std::string_view source);

}  // namespace attnfuse::dsl
