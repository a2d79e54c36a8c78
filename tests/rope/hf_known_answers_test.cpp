// Checks rope_frequencies and parse_hf_config together against Hugging Face transformers'
// own numbers for real model configs (hf_answers_data.cpp), plus the rotation convention
// against HF's apply_rotary_pos_emb (neox) and GPT-J's rotate_every_two (gptj).
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "rope/frequencies.hpp"
#include "rope/hf_config.hpp"

namespace attnfuse::rope::test {

using HfAnswer = std::tuple<long, double, std::vector<double>>;
using HfCase = std::tuple<std::string, std::string, std::vector<HfAnswer>>;
const std::vector<HfCase>& hf_cases();

namespace {

// HF evaluates in float32: a few float32 ulps (2^-24 ~ 6e-8) of relative difference.
constexpr double kFloat32Rel = 1e-6;

TEST(HfKnownAnswers, EveryCaseMatchesTransformers) {
  ASSERT_EQ(hf_cases().size(), 10u);
  for (const auto& [name, json, answers] : hf_cases()) {
    SCOPED_TRACE(name);
    const HfRopeConfig cfg = parse_hf_config(json, name);
    for (const auto& [seq, attention_factor, inv_freq] : answers) {
      SCOPED_TRACE("seq_len " + std::to_string(seq));
      const RopeFrequencies f = rope_frequencies(cfg.rope, cfg.head_dim, seq < 0 ? 0 : seq);
      ASSERT_EQ(f.inv_freq.size(), inv_freq.size());
      EXPECT_NEAR(f.attention_factor, attention_factor, 1e-12 * attention_factor);
      for (size_t r = 0; r < inv_freq.size(); ++r)
        EXPECT_NEAR(f.inv_freq[r], inv_freq[r], kFloat32Rel * inv_freq[r]) << "pair " << r;
    }
  }
}

const HfCase& find_case(const std::string& want) {
  for (const HfCase& c : hf_cases())
    if (std::get<0>(c) == want) return c;
  throw std::runtime_error("no known-answer case " + want);
}

TEST(HfKnownAnswers, GeometryOfTheModels) {
  struct Want { const char* name; int head_dim, rotary_dim, heads, kv_heads; RopeScaling type; };
  const Want wants[] = {
      {"llama31_8b", 128, 128, 32, 8, RopeScaling::Llama3},
      {"llama32_3b", 128, 128, 24, 8, RopeScaling::Llama3},
      {"qwen25_7b", 128, 128, 28, 4, RopeScaling::None},
      {"qwen25_yarn", 128, 128, 28, 4, RopeScaling::Yarn},
      {"phi35_longrope", 96, 96, 32, 32, RopeScaling::Longrope},
      {"neox_partial", 64, 16, 8, 8, RopeScaling::None},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    const HfRopeConfig c = parse_hf_config(std::get<1>(find_case(w.name)), w.name);
    EXPECT_EQ(c.head_dim, w.head_dim);
    EXPECT_EQ(c.rope.rotary_dim, w.rotary_dim);
    EXPECT_EQ(c.num_attention_heads, w.heads);
    EXPECT_EQ(c.num_key_value_heads, w.kv_heads);
    EXPECT_EQ(c.rope.rope_type, w.type);
    EXPECT_EQ(c.rope.style, RopeStyle::Neox);
  }
}

// The issue's keyword form (rope(Q, K, base=500000, rope_type=llama3, factor=32, ...)) is the
// same RopeParams as Llama-3.2-3B's config.json.
TEST(HfKnownAnswers, KeywordParamsEqualConfigParams) {
  RopeParams p;
  p.base = 500000;
  p.rotary_dim = 128;
  p.rope_type = RopeScaling::Llama3;
  p.factor = 32;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  p.original_max_position_embeddings = 8192;
  EXPECT_EQ(parse_hf_config(std::get<1>(find_case("llama32_3b")), "llama32_3b").rope, p);
}

// The Phi-3 attention factor and the long/short switch are HF's closed forms.
TEST(HfKnownAnswers, LongropeFactorAndSwitch) {
  const HfRopeConfig c = parse_hf_config(std::get<1>(find_case("phi35_longrope")), "phi35");
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);  // 131072 / 4096
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_NEAR(rope_frequencies(c.rope, 96, 0).attention_factor,
              std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-15);
  const double base_theta_1 = std::pow(10000.0, -2.0 / 96);
  EXPECT_NEAR(rope_frequencies(c.rope, 96, 4096).inv_freq[1], base_theta_1 / c.rope.short_factor[1], 1e-15);
  EXPECT_NEAR(rope_frequencies(c.rope, 96, 4097).inv_freq[1], base_theta_1 / c.rope.long_factor[1], 1e-15);
}

std::vector<double> probe(int n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37 * i + 0.1);
  return v;
}

// HF: Qwen2RotaryEmbedding(qwen25_yarn) -> cos, sin (attention factor folded in), then
// apply_rotary_pos_emb on v_i = sin(0.37 i + 0.1), D = 128; dims 0, 1, 5, 63, 64, 65, 100, 127.
TEST(HfKnownAnswers, RotateMatchesHfNeoxWithYarnScaling) {
  const HfRopeConfig c = parse_hf_config(std::get<1>(find_case("qwen25_yarn")), "qwen25_yarn");
  const RopeFrequencies f = rope_frequencies(c.rope, 128, 0);
  const int dims[] = {0, 1, 5, 63, 64, 65, 100, 127};
  const std::vector<std::pair<int64_t, std::vector<double>>> want = {
      {0, {0.11367326229810715, 0.5156696438789368, 1.0577409267425537, -1.125510811805725,
           -1.1116666793823242, -0.9473637938499451, -0.6420836448669434, 0.03858054429292679}},
      {5, {-1.0337594747543335, -1.0602695941925049, -0.6740264892578125, -1.1255109310150146,
           -0.4243418872356415, 0.19809561967849731, -0.641311764717102, 0.03857879713177681}},
      {1000, {0.9831419587135315, 0.9348729848861694, 0.6392263174057007, -1.1255226135253906,
              -0.5311840176582336, 0.5379831790924072, -0.47822773456573486, 0.038231369107961655}}};
  for (const auto& [pos, values] : want) {
    std::vector<double> v = probe(128);
    rotate(c.rope, f, pos, v.data(), 128);
    // float32 angles at position 1000 are off by up to ~1000 * 2^-24 rad in HF.
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(v[static_cast<size_t>(dims[i])], values[i], 2e-4) << "position " << pos << " dim " << dims[i];
  }
}

// HF GPT-J: create_sinusoidal_positions(2048, 64) and apply_rotary_pos_emb (rotate_every_two)
// on the first 64 of 256 dims; dims 0, 1, 2, 3, 30, 31, 62, 63, 64, 255.
TEST(HfKnownAnswers, RotateMatchesHfGptjPartial) {
  const HfRopeConfig c = parse_hf_config(
      R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64})", "gptj");
  ASSERT_EQ(c.head_dim, 256);
  ASSERT_EQ(c.rope.rotary_dim, 64);
  ASSERT_EQ(c.rope.style, RopeStyle::Gptj);
  const RopeFrequencies f = rope_frequencies(c.rope, 256, 0);
  const int dims[] = {0, 1, 2, 3, 30, 31, 62, 63, 64, 255};
  const std::vector<std::pair<int64_t, std::vector<double>>> want = {
      {3, {-0.1627456396818161, -0.4342655539512634, -1.1957454681396484, -0.007963061332702637,
           -0.9448183178901672, -0.8779948949813843, -0.866455614566803, -0.988825261592865,
           -0.9763200283050537, 0.20084497332572937}},
      {1000, {-0.31833821535110474, 0.3372439742088318, -1.1944034099578857, 0.05719447135925293,
              -0.12003803253173828, -1.284191370010376, -0.7277296781539917, -1.0949567556381226,
              -0.9763200283050537, 0.20084497332572937}}};
  for (const auto& [pos, values] : want) {
    std::vector<double> v = probe(256);
    rotate(c.rope, f, pos, v.data(), 256);
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(v[static_cast<size_t>(dims[i])], values[i], 2e-4) << "position " << pos << " dim " << dims[i];
  }
}

}  // namespace
}  // namespace attnfuse::rope::test
