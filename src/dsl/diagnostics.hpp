// Error text for attention programs: "line L, column C: message", the source line, and a caret
// line under the offending text; plus "did you mean" suggestions for misspelled names.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "attnfuse/error.hpp"

namespace attnfuse::dsl {

// The source line of `loc` and a caret line under it, each indented by two spaces:
//   "  softmax(casual(s)) @ V\n          ^^^^^^"
// Carets never run past the end of the line. Empty if `loc` is unknown or off the source.
std::string caret_block(std::string_view source, SourceLoc loc);

// "line L, column C: <message>\n<caret block>" when `loc` is known, else `message` alone.
std::string format_at(std::string_view source, SourceLoc loc, std::string_view message);

// Throws Error(code, format_at(source, loc, message)).
[[noreturn]] void fail_at(ErrorCode code, std::string_view source, SourceLoc loc,
                          std::string_view message);

// The candidate a typo of `word` most plausibly meant (edit distance, transpositions count
// once), or "" when none is close enough to be worth suggesting.
std::string_view closest(std::string_view word, std::span<const std::string_view> candidates);

// " (did you mean 'x'?)" for closest(word, candidates), or "".
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

// "a, b and c" (for listing the valid choices in a message).
std::string join_words(std::span<const std::string_view> words, std::string_view last_sep = " and ");

}  // namespace attnfuse::dsl
