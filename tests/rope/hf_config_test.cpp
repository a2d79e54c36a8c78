// load_hf_config on small config.json files written to a temp dir: real model layouts
// (Llama-3.1, Qwen2.5 + yarn, Qwen3-style rope_parameters, Phi-3 longrope, GPT-NeoX and Phi-2
// partial rotary, dynamic, multimodal text_config) and every error class.
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "attnfuse/error.hpp"
#include "rope/frequencies.hpp"
#include "rope/hf_config.hpp"

namespace attnfuse::rope {
namespace {

namespace fs = std::filesystem;

class HfConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("attnfuse_rope_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  HfRopeConfig load(const std::string& text) { return load_hf_config(write("config.json", text)); }

  // Loads `text` expecting an error of `code` whose message holds `needle` (and the path).
  void expect_error(const std::string& text, ErrorCode code, const std::string& needle) {
    const std::string path = write("bad.json", text);
    try {
      load_hf_config(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.code(), code) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

TEST_F(HfConfigFile, Llama31) {
  const HfRopeConfig c = load(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope.base, 500000.0);
  EXPECT_EQ(c.rope.rotary_dim, 128);
  EXPECT_EQ(c.rope.style, RopeStyle::Neox);
  EXPECT_EQ(c.rope.rope_type, RopeScaling::Llama3);
  EXPECT_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope.window_k, 0.0);
}

TEST_F(HfConfigFile, Qwen25YarnOldSpelling) {
  const HfRopeConfig c = load(R"({"model_type": "qwen2", "hidden_size": 3584,
    "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}})");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.rope.rope_type, RopeScaling::Yarn);
  EXPECT_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.beta_fast, 32.0);
  EXPECT_EQ(c.rope.beta_slow, 1.0);
  EXPECT_FALSE(c.rope.attention_factor.has_value());
  EXPECT_DOUBLE_EQ(rope_frequencies(c.rope, c.head_dim, 0).attention_factor, 0.1 * std::log(4.0) + 1);
}

// transformers v5 writes rope_parameters with rope_theta inside; an explicit head_dim wins over
// hidden_size / heads (Qwen3-4B: 2560 / 32 = 80, head_dim 128).
TEST_F(HfConfigFile, RopeParametersSpellingAndExplicitHeadDim) {
  const HfRopeConfig c = load(R"({"model_type": "qwen3", "hidden_size": 2560, "head_dim": 128,
    "num_attention_heads": 32, "num_key_value_heads": 8, "rope_theta": 5.0,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}, "rope_scaling": null})");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope.base, 1e6);  // the dict's value wins over the top level
  EXPECT_EQ(c.rope.rope_type, RopeScaling::None);
}

std::string factor_list(int n, double first, double step) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", first + step * i);
  return s + "]";
}

// Phi-3: the top-level original_max_position_embeddings wins (HF's Phi-3 rule) and the factor
// is max_position_embeddings / original when the dict has none.
TEST_F(HfConfigFile, Phi3Longrope) {
  const HfRopeConfig c = load(fmt::format(R"({{"model_type": "phi3", "hidden_size": 3072,
    "num_attention_heads": 32, "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {{"type": "longrope", "original_max_position_embeddings": 999,
                      "long_factor": {}, "short_factor": {}}}}})",
                                          factor_list(48, 1.0, 1.25), factor_list(48, 1.0, 0.03125)));
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.rope.rope_type, RopeScaling::Longrope);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope.factor, 32.0);
  ASSERT_EQ(c.rope.long_factor.size(), 48u);
  EXPECT_EQ(c.rope.long_factor[47], 1.0 + 1.25 * 47);
  EXPECT_EQ(c.rope.short_factor[2], 1.0625);
  // Early Phi-3 configs say "su" for the same scaling.
  const HfRopeConfig su = load(fmt::format(R"({{"hidden_size": 64, "num_attention_heads": 2,
    "max_position_embeddings": 64, "original_max_position_embeddings": 16,
    "rope_scaling": {{"type": "su", "long_factor": {}, "short_factor": {}}}}})",
                                           factor_list(16, 2, 0), factor_list(16, 1, 0)));
  EXPECT_EQ(su.rope.rope_type, RopeScaling::Longrope);
  EXPECT_EQ(su.rope.factor, 4.0);
}

TEST_F(HfConfigFile, PartialRotary) {
  // GPT-NeoX / Pythia spell it rotary_pct and rotary_emb_base.
  const HfRopeConfig neox = load(R"({"model_type": "gpt_neox", "hidden_size": 512,
    "num_attention_heads": 8, "rotary_pct": 0.25, "rotary_emb_base": 10000})");
  EXPECT_EQ(neox.head_dim, 64);
  EXPECT_EQ(neox.rope.rotary_dim, 16);
  EXPECT_EQ(neox.rope.base, 10000.0);
  EXPECT_EQ(neox.rope.style, RopeStyle::Neox);
  // Phi-2: partial_rotary_factor 0.4 of head dim 80 = 32 dims.
  const HfRopeConfig phi2 = load(R"({"model_type": "phi", "hidden_size": 2560,
    "num_attention_heads": 32, "partial_rotary_factor": 0.4, "rope_theta": 10000.0})");
  EXPECT_EQ(phi2.head_dim, 80);
  EXPECT_EQ(phi2.rope.rotary_dim, 32);
  EXPECT_EQ(rope_frequencies(phi2.rope, phi2.head_dim, 0).inv_freq.size(), 16u);
}

TEST_F(HfConfigFile, DynamicReadsMaxPositionEmbeddings) {
  const HfRopeConfig c = load(R"({"hidden_size": 4096, "num_attention_heads": 32,
    "max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}})");
  EXPECT_EQ(c.rope.rope_type, RopeScaling::Dynamic);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(c.rope.base, 10000.0);  // HF's default theta
}

TEST_F(HfConfigFile, MultimodalTextConfig) {
  const HfRopeConfig c = load(R"({"model_type": "llava", "text_config": {"model_type": "llama",
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "rope_theta": 500000.0}})");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.rope.base, 500000.0);
}

TEST_F(HfConfigFile, FileErrorsAreIo) {
  const std::string missing = (dir_ / "nope.json").string();
  try {
    load_hf_config(missing);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  try {
    load_hf_config(dir_.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": )", ErrorCode::Io, "not valid JSON");
  expect_error(R"({"hidden_size": 4096,, })", ErrorCode::Io, "parse error");
  expect_error("", ErrorCode::Io, "not valid JSON");
  expect_error("[1, 2]", ErrorCode::Io, "not an object");
}

TEST_F(HfConfigFile, BadValuesAreVerify) {
  const std::string heads = R"("hidden_size": 4096, "num_attention_heads": 32)";
  expect_error(R"({"hidden_size": 4096})", ErrorCode::Verify, "num_attention_heads");
  expect_error(R"({"num_attention_heads": 32})", ErrorCode::Verify, "hidden_size");
  expect_error(R"({"hidden_size": 4001, "num_attention_heads": 32})", ErrorCode::Verify,
               "not a multiple");
  expect_error(R"({"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 5})",
               ErrorCode::Verify, "num_key_value_heads");
  expect_error("{" + heads + R"(, "rope_theta": "big"})", ErrorCode::Verify, "'rope_theta' must be a number");
  expect_error("{" + heads + R"(, "rope_theta": 0.5})", ErrorCode::Verify, "base");
  expect_error("{" + heads + R"(, "head_dim": 12.5})", ErrorCode::Verify, "'head_dim' must be an integer");
  expect_error("{" + heads + R"(, "partial_rotary_factor": 1.5})", ErrorCode::Verify, "partial_rotary_factor");
  expect_error("{" + heads + R"(, "rope_scaling": {"rope_type": "foo"}})", ErrorCode::Verify,
               "rope_scaling.rope_type");
  expect_error("{" + heads + R"(, "rope_scaling": [1]})", ErrorCode::Verify, "must be an object");
  expect_error("{" + heads + R"(, "rope_scaling": {"rope_type": "linear"}})", ErrorCode::Verify,
               "'rope_scaling.factor' is missing");
  expect_error("{" + heads + R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8,
      "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
               ErrorCode::Verify, "rope_scaling.low_freq_factor");
  expect_error("{" + heads + R"(, "max_position_embeddings": 9, "rope_scaling": {"rope_type":
      "longrope", "long_factor": [1, 2], "short_factor": [1, 2]}})",
               ErrorCode::Verify, "per rotated pair");
  expect_error("{" + heads + R"(, "max_position_embeddings": 9, "rope_scaling": {"rope_type": "longrope", "long_factor": [1, "a"],
      "short_factor": [1]}})", ErrorCode::Verify, "list of numbers");
  expect_error("{" + heads + R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})",
               ErrorCode::Verify, "max_position_embeddings");
}

TEST_F(HfConfigFile, UnimplementedFormsAreUnsupported) {
  const std::string heads = R"("hidden_size": 4096, "num_attention_heads": 32)";
  expect_error("{" + heads + R"(, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})",
               ErrorCode::Unsupported, "mrope");
  expect_error("{" + heads + R"(, "rope_parameters": {"full_attention": {"rope_type": "default"},
      "sliding_attention": {"rope_type": "default"}}})", ErrorCode::Unsupported, "per-layer");
  expect_error("{" + heads + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 32,
      "original_max_position_embeddings": 4096, "truncate": false}})", ErrorCode::Unsupported,
               "truncate");
}

}  // namespace
}  // namespace attnfuse::rope
