// Malformed text never crashes the front end: random token soups and random edits of valid
// programs either parse or raise a typed Parse/Verify error whose message carries a line,
// a column and a caret. Fixed seeds plus one fresh seed (printed on failure).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"

namespace attnfuse {
namespace {

const char* const kPieces[] = {
    "softmax", "relu_attention", "causal", "sliding_window", "full", "block_sparse", "alibi",
    "additive_bias", "softcap", "rope", "rope_window", "scaled_dot_product", "matmul", "Q", "K",
    "V", "s", "p", "return", "(", ")", "[", "]", ",", "=", "@", "-", ";", "\n", " ", "#c\n", "0",
    "1", "128", "0.125", "1e-3", "1e999", "base", "window", "k", "cap", "scale", "neox", "gptj",
    "rope_type", "llama3", "factor", "slopes", "standard", "$", "\t", "é", "10k", ".5"};

const char* const kValid[] = {
    "softmax(causal(rope(Q, K, base=500000))) @ V",
    "s = scaled_dot_product(Q, K, 0.125)\ns = sliding_window(s, 128); s = alibi(s, [0.5, 0.25])\n"
    "return relu_attention(s) @ V",
    "softmax(softcap(rope_window(Q, K, k=2, rope_type=llama3, factor=8, low_freq_factor=1, "
    "high_freq_factor=4, original_max_position_embeddings=8192), 30)) @ V",
};

// Every failure is a typed user error that says where.
void check(const std::string& text) {
  try {
    const Program p = Program::parse(text);
    EXPECT_FALSE(p.canonical().empty());
  } catch (const Error& e) {
    const std::string msg = e.what();
    ASSERT_TRUE(e.code() == ErrorCode::Parse || e.code() == ErrorCode::Verify)
        << error_code_name(e.code()) << ": " << msg << "\nfor:\n" << text;
    EXPECT_EQ(msg.rfind("line ", 0), 0u) << msg << "\nfor:\n" << text;
    EXPECT_NE(msg.find('^'), std::string::npos) << msg << "\nfor:\n" << text;
  }
}

void fuzz(uint64_t seed) {
  SCOPED_TRACE(fmt::format("seed {} (rerun: ATTNFUSE_TEST_SEED={})", seed, seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (int i = 0; i < 3000; ++i) {
    std::string soup;
    const size_t n = 1 + pick(30);
    for (size_t j = 0; j < n; ++j) soup += kPieces[pick(std::size(kPieces))];
    check(soup);
    if (::testing::Test::HasFailure()) return;  // one report is enough
  }
  for (int i = 0; i < 3000; ++i) {
    std::string t = kValid[pick(std::size(kValid))];
    const size_t edits = 1 + pick(3);
    for (size_t e = 0; e < edits && !t.empty(); ++e) {
      const size_t at = pick(t.size());
      switch (pick(3)) {
        case 0: t.erase(at, 1 + pick(4)); break;
        case 1: t.insert(at, kPieces[pick(std::size(kPieces))]); break;
        default: std::swap(t[at], t[pick(t.size())]); break;
      }
    }
    check(t);
    if (::testing::Test::HasFailure()) return;  // one report is enough
  }
}

TEST(Fuzz, FixedSeeds) {
  for (uint64_t seed : {11u, 12u}) fuzz(seed);
}

TEST(Fuzz, FreshSeed) {
  const char* env = std::getenv("ATTNFUSE_TEST_SEED");
  fuzz(env ? std::strtoull(env, nullptr, 10) : std::random_device{}());
}

TEST(Fuzz, LongInputsDoNotOverflowTheStack) {
  std::string chain = "softmax(rope(Q, K))";
  for (int i = 0; i < 100000; ++i) chain += " @ V";
  check(chain);
  std::string nested;
  for (int i = 0; i < 100000; ++i) nested += "causal(";
  check(nested);
  std::string statements = "s = rope(Q, K)\n";
  for (int i = 0; i < 20000; ++i) statements += "s = causal(s)\n";
  check(statements + "return softmax(s) @ V");
}

}  // namespace
}  // namespace attnfuse
