// Error text with line, column and caret, and typo suggestions (see diagnostics.hpp).
#include "dsl/diagnostics.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace attnfuse::dsl {

namespace {

// The text of 1-based line `line` of `source` (without its newline), or nullopt-like empty view
// with ok=false when the source has fewer lines.
bool source_line(std::string_view source, int line, std::string_view* out) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) {
    size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return false;
    start = nl + 1;
  }
  size_t end = source.find('\n', start);
  if (end == std::string_view::npos) end = source.size();
  std::string_view text = source.substr(start, end - start);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  *out = text;
  return true;
}

// UTF-8 continuation bytes take no column on screen, so the caret line skips them.
bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0u) == 0x80u; }

int edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: a swapped pair of letters ("casual") is one edit.
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const char ca = static_cast<char>(std::tolower(static_cast<unsigned char>(a[i - 1])));
      const char cb = static_cast<char>(std::tolower(static_cast<unsigned char>(b[j - 1])));
      const int cost = ca == cb ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

std::string caret_block(std::string_view source, SourceLoc loc) {
  std::string_view line;
  if (!loc.known() || !source_line(source, loc.line, &line)) return {};
  std::string out = "  ";
  out.append(line);
  out += "\n  ";
  const size_t col0 = static_cast<size_t>(std::max(loc.col, 1) - 1);
  // Copy tabs so the caret lines up whatever the tab width of the terminal.
  for (size_t i = 0; i < col0 && i < line.size(); ++i) {
    if (is_continuation(line[i])) continue;
    out += line[i] == '\t' ? '\t' : ' ';
  }
  for (size_t i = line.size(); i < col0; ++i) out += ' ';
  size_t width = 0;
  const size_t len = static_cast<size_t>(std::max(loc.len, 1));
  for (size_t i = col0; i < col0 + len && i < line.size(); ++i)
    if (!is_continuation(line[i])) ++width;
  out.append(std::max<size_t>(width, 1), '^');
  return out;
}

std::string format_at(std::string_view source, SourceLoc loc, std::string_view message) {
  if (!loc.known()) return std::string(message);
  std::string out = fmt::format("line {}, column {}: {}", loc.line, loc.col, message);
  std::string block = caret_block(source, loc);
  if (!block.empty()) out += "\n" + block;
  return out;
}

void fail_at(ErrorCode code, std::string_view source, SourceLoc loc, std::string_view message) {
  throw Error(code, format_at(source, loc, message));
}

std::string_view closest(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view best;
  int best_d = 1 << 30;
  for (std::string_view c : candidates) {
    const int d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // Short names tolerate one edit, longer ones a few; beyond that a suggestion is noise. A
  // one-letter name only matches another case ('q' -> 'Q'): any letter is one edit from any.
  const int limit = word.size() <= 1 ? 0 : word.size() <= 3 ? 1 : word.size() <= 6 ? 2 : 3;
  if (best.empty() || best_d > limit || best == word) return {};
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view c = closest(word, candidates);
  return c.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", c);
}

std::string join_words(std::span<const std::string_view> words, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? std::string(last_sep) : std::string(", ");
    out += words[i];
  }
  return out;
}

}  // namespace attnfuse::dsl
