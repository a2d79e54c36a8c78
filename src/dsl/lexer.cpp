// The text DSL's tokenizer (see lexer.hpp).
#include "dsl/lexer.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dsl/diagnostics.hpp"

namespace attnfuse::dsl {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Ident: return "a name";
    case Tok::Number: return "a number";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Assign: return "'='";
    case Tok::At: return "'@'";
    case Tok::Minus: return "'-'";
    case Tok::Semicolon: return "';'";
    case Tok::Newline: return "the end of the line";
    case Tok::End: return "the end of the program";
  }
  return "?";
}

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '\n') {
        if (depth_ == 0) push(Tok::Newline, 1);
        else advance(1);
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        advance(1);
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance(1);
      } else if (ident_start(c)) {
        size_t n = 1;
        while (pos_ + n < src_.size() && ident_char(src_[pos_ + n])) ++n;
        push(Tok::Ident, n);
      } else if (digit(c) || (c == '.' && pos_ + 1 < src_.size() && digit(src_[pos_ + 1]))) {
        number();
      } else {
        punct(c);
      }
    }
    Token end;
    end.kind = Tok::End;
    end.loc = here(1);
    out_.push_back(end);
    return std::move(out_);
  }

 private:
  SourceLoc here(size_t len) const {
    return SourceLoc{line_, static_cast<int>(pos_ - line_start_) + 1, static_cast<int>(len)};
  }
  void advance(size_t n) { pos_ += n; }
  Token& push(Tok kind, size_t len) {
    Token t;
    t.kind = kind;
    t.text = src_.substr(pos_, len);
    t.loc = here(len);
    out_.push_back(t);
    advance(len);
    return out_.back();
  }

  void number() {
    size_t n = 0;
    while (pos_ + n < src_.size() && digit(src_[pos_ + n])) ++n;
    if (pos_ + n < src_.size() && src_[pos_ + n] == '.') {
      ++n;
      while (pos_ + n < src_.size() && digit(src_[pos_ + n])) ++n;
    }
    if (pos_ + n < src_.size() && (src_[pos_ + n] == 'e' || src_[pos_ + n] == 'E')) {
      size_t m = n + 1;
      if (pos_ + m < src_.size() && (src_[pos_ + m] == '+' || src_[pos_ + m] == '-')) ++m;
      if (pos_ + m < src_.size() && digit(src_[pos_ + m])) {
        while (pos_ + m < src_.size() && digit(src_[pos_ + m])) ++m;
        n = m;
      }
    }
    // A number glued to letters (`10k`, `1e`, `1.2.3`) is a typo, not two tokens.
    if (pos_ + n < src_.size() && (ident_char(src_[pos_ + n]) || src_[pos_ + n] == '.')) {
      while (pos_ + n < src_.size() && (ident_char(src_[pos_ + n]) || src_[pos_ + n] == '.')) ++n;
      fail_at(ErrorCode::Parse, src_, here(n),
              fmt::format("malformed number '{}'; numbers look like 1024, 0.125 or 1e-5",
                          src_.substr(pos_, n)));
    }
    const std::string_view text = src_.substr(pos_, n);
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) {
      // Out of double range: a positive exponent overflowed (inf), a negative one underflowed.
      const size_t e = text.find_first_of("eE");
      const bool neg_exp = e != std::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
      v = neg_exp ? 0.0 : std::numeric_limits<double>::infinity();
    } else if (ec != std::errc() || ptr != text.data() + text.size()) {
      fail_at(ErrorCode::Parse, src_, here(n), fmt::format("malformed number '{}'", text));
    }
    push(Tok::Number, n).number = v;
  }

  void punct(char c) {
    switch (c) {
      case '(': ++depth_; push(Tok::LParen, 1); return;
      case '[': ++depth_; push(Tok::LBracket, 1); return;
      case ')': if (depth_ > 0) --depth_; push(Tok::RParen, 1); return;
      case ']': if (depth_ > 0) --depth_; push(Tok::RBracket, 1); return;
      case ',': push(Tok::Comma, 1); return;
      case '=': push(Tok::Assign, 1); return;
      case '@': push(Tok::At, 1); return;
      case '-': push(Tok::Minus, 1); return;
      case ';': push(Tok::Semicolon, 1); return;
      default: break;
    }
    // A whole UTF-8 sequence is one stray character.
    size_t n = 1;
    if (static_cast<unsigned char>(c) >= 0x80)
      while (pos_ + n < src_.size() && (static_cast<unsigned char>(src_[pos_ + n]) & 0xC0u) == 0x80u) ++n;
    std::string hint;
    if (c == '*' || c == '/' || c == '+')
      hint = "; arithmetic is not part of the DSL: write the number itself, e.g. scale=0.125";
    else if (c == '"' || c == '\'')
      hint = "; words are written without quotes, e.g. style=gptj";
    else if (c == '{' || c == '}' || c == ':')
      hint = "; a program is one expression, or statements separated by new lines or ';'";
    fail_at(ErrorCode::Parse, src_, here(n),
            fmt::format("unexpected character '{}'{}", src_.substr(pos_, n), hint));
  }

  std::string_view src_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
  int depth_ = 0;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace attnfuse::dsl
