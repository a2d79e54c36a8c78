// Where a piece of program text sits (line, column), for tests that check error carets.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace attnfuse::test {

struct Pos {
  int line = 1;
  int col = 0;
};

// Line and column (1-based) of the nth occurrence of `needle` in `text`.
inline Pos pos_of(std::string_view text, std::string_view needle, int nth = 1) {
  size_t at = std::string_view::npos, from = 0;
  for (int i = 0; i < nth; ++i) {
    at = text.find(needle, from);
    if (at == std::string_view::npos) {
      ADD_FAILURE() << "test bug: '" << needle << "' not in " << text;
      return {};
    }
    from = at + 1;
  }
  Pos p;
  size_t line_start = 0;
  for (size_t i = 0; i < at; ++i)
    if (text[i] == '\n') ++p.line, line_start = i + 1;
  p.col = static_cast<int>(at - line_start) + 1;
  return p;
}

}  // namespace attnfuse::test
