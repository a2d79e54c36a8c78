// `attnfuse window-table` (its rows and last line against the RoPE library, its exit-2 paths) and
// `--rope-config` on compile / run / bench, with the merge rule behind it (rope::apply_hf_rope:
// the program's explicit parameters win over the config).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "cli_harness.hpp"
#include "rope/apply_config.hpp"
#include "rope/hf_config.hpp"
#include "rope/window_table.hpp"

namespace attnfuse::clitest {
namespace {

namespace fs = std::filesystem;

// Llama-3.2-3B's RoPE: head_dim 128, base 500000, llama3 scaling factor 32 over 8192.
constexpr const char* kLlama = R"({
  "model_type": "llama", "hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
  "head_dim": 128, "max_position_embeddings": 131072, "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
})";

// Partial rotary (half of head dim 64) with yarn, in the transformers v5 spelling.
constexpr const char* kPartialYarn = R"({
  "model_type": "phi", "hidden_size": 2048, "num_attention_heads": 32, "max_position_embeddings": 16384,
  "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                      "factor": 4.0, "original_max_position_embeddings": 4096}
})";

constexpr const char* kPrefix = "attnfuse: error: ";

fs::path write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Table rows: lines whose first token is a pair index.
std::vector<std::string> table_rows(const std::string& out) {
  std::vector<std::string> rows;
  for (const std::string& line : lines_of(out)) {
    std::istringstream in(line);
    int pair = -1;
    std::string rest;
    if (line.empty() || line[0] == '#' || !(in >> pair) || !(in >> rest)) continue;
    rows.push_back(line);
  }
  return rows;
}

void expect_one_line_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind(kPrefix, 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(needle), std::string::npos) << "want '" << needle << "' in: " << lines[0];
  EXPECT_EQ(r.out, "");
}

// The whole table output must agree with the library on the same config, k and N.
void expect_table(const CliResult& r, const fs::path& config, double k, int64_t n) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const rope::HfRopeConfig cfg = rope::load_hf_config(config.string());
  const rope::WindowTable t = rope::window_table(cfg.rope, cfg.head_dim, k, n);
  const std::vector<std::string> rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), static_cast<size_t>(cfg.rope.rotary_dim / 2)) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::istringstream in(rows[i]);
    int pair = -1;
    double theta = 0, lambda = 0, window = 0;
    in >> pair >> theta >> lambda >> window;
    EXPECT_EQ(pair, static_cast<int>(i));
    EXPECT_NEAR(theta, t.rows[i].theta, 1e-6 * t.rows[i].theta) << rows[i];
    EXPECT_NEAR(lambda, t.rows[i].lambda, 1e-6 * t.rows[i].lambda) << rows[i];
    EXPECT_NEAR(window, k * t.rows[i].lambda, 1e-6 * k * t.rows[i].lambda) << rows[i];
  }
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  const auto lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.back(), fmt::format("pruned_share={:.6f}", t.pruned_share));
  EXPECT_EQ(lines[lines.size() - 2], fmt::format("ceiling_speedup={:.6f}", t.ceiling_speedup));
  EXPECT_EQ(lines[lines.size() - 3], fmt::format("retained_share={:.6f}", t.retained_share));
  EXPECT_NE(r.out.find(fmt::format("seq_len N = {}", n)), std::string::npos) << r.out;
}

TEST(WindowTableCli, RowsAndSharesMatchTheLibrary) {
  TempDir dir;
  const fs::path cfg = write_text(dir, "config.json", kLlama);
  for (double k : {0.25, 1.0, 2.0, 8.0}) {
    SCOPED_TRACE(fmt::format("k={}", k));
    expect_table(run_cli({"window-table", "--config", cfg.string(), "--k", fmt::format("{}", k),
                          "--seq-len", "8192"}, dir),
                 cfg, k, 8192);
  }
  // The table really depends on k and N (so the checks above compare different numbers).
  const auto last = [&](const std::string& k, const std::string& n) {
    return lines_of(run_cli({"window-table", "--config", cfg.string(), "--k", k, "--seq-len", n}, dir).out).back();
  };
  EXPECT_NE(last("1", "8192"), last("2", "8192"));
  EXPECT_NE(last("1", "8192"), last("1", "65536"));
}

TEST(WindowTableCli, DefaultLengthIsTheConfigsMaxPositionEmbeddings) {
  TempDir dir;
  const fs::path cfg = write_text(dir, "config.json", kLlama);
  const CliResult r = run_cli({"window-table", "--config", cfg.string(), "--k", "1"}, dir);
  expect_table(r, cfg, 1.0, 131072);
  EXPECT_NE(r.out.find("max_position_embeddings"), std::string::npos) << r.out;
}

TEST(WindowTableCli, PartialRotaryHasRotaryDimOverTwoRows) {
  TempDir dir;
  const fs::path cfg = write_text(dir, "config.json", kPartialYarn);
  const CliResult r = run_cli({"window-table", "--config", cfg.string(), "--k", "0.5", "--seq-len", "3000"}, dir);
  expect_table(r, cfg, 0.5, 3000);
  EXPECT_EQ(table_rows(r.out).size(), 16u);  // head_dim 64, rotary_dim 32
}

TEST(WindowTableCli, BadInputExitsTwoWithOneLine) {
  TempDir dir;
  const std::string cfg = write_text(dir, "config.json", kLlama).string();
  const std::string bad = write_text(dir, "bad.json", "{\"rope_theta\": 5e5,").string();
  const std::string no_len = write_text(dir, "nolen.json", R"({"num_attention_heads": 4, "head_dim": 64})").string();
  const std::string mrope = write_text(dir, "mrope.json",
      R"({"num_attention_heads": 4, "head_dim": 64, "rope_scaling": {"rope_type": "mrope"}})").string();
  const std::string missing = (dir / "absent.json").string();
  expect_one_line_error(run_cli({"window-table", "--config", missing, "--k", "1"}, dir), "absent.json");
  expect_one_line_error(run_cli({"window-table", "--config", bad, "--k", "1"}, dir), "not valid JSON");
  expect_one_line_error(run_cli({"window-table", "--config", mrope, "--k", "1"}, dir), "mrope");
  expect_one_line_error(run_cli({"window-table", "--config", cfg, "--k", "0"}, dir), "--k");
  expect_one_line_error(run_cli({"window-table", "--config", cfg, "--k", "-1"}, dir), "--k");
  expect_one_line_error(run_cli({"window-table", "--config", cfg, "--k", "1", "--seq-len", "0"}, dir), "--seq-len");
  expect_one_line_error(run_cli({"window-table", "--config", cfg, "--k", "1", "--seq-len", "-3"}, dir), "--seq-len");
  expect_one_line_error(run_cli({"window-table", "--config", no_len, "--k", "1"}, dir), "--seq-len");
  expect_one_line_error(run_cli({"window-table", "--config", cfg}, dir), "--k");
  expect_one_line_error(run_cli({"window-table", "--k", "1"}, dir), "--config");
}

// ---- --rope-config ---------------------------------------------------------------------------

constexpr const char* kRope = "softmax(causal(rope(Q, K))) @ V";
constexpr const char* kPlain = "softmax(causal(scaled_dot_product(Q, K))) @ V";

std::string spec_of(const TempDir& dir, const std::string& program, const fs::path& cfg,
                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"compile", program, "--emit", "spec", "--rope-config", cfg.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_cli(args, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(RopeConfigCli, CompileSpecShowsTheConfigsRope) {
  TempDir dir;
  const fs::path cfg = write_text(dir, "config.json", kLlama);
  const std::string out = spec_of(dir, kRope, cfg);
  EXPECT_NE(out.find("rope       base=500000 style=neox rotary_dim=128"), std::string::npos) << out;
  EXPECT_NE(out.find("rope_type  llama3 factor=32 low_freq_factor=1 high_freq_factor=4 "
                     "original_max_position_embeddings=8192"), std::string::npos) << out;
  // Without the config: the program's defaults.
  const CliResult plain = run_cli({"compile", kRope, "--emit", "spec"}, dir);
  EXPECT_NE(plain.out.find("base=10000 "), std::string::npos) << plain.out;

  const fs::path partial = write_text(dir, "phi.json", kPartialYarn);
  const std::string yarn = spec_of(dir, kRope, partial, {"--head-dim", "64"});
  EXPECT_NE(yarn.find("rotary_dim=32"), std::string::npos) << yarn;
  EXPECT_NE(yarn.find("rope_type  yarn factor=4 original_max_position_embeddings=4096"), std::string::npos) << yarn;
}

TEST(RopeConfigCli, ParametersWrittenInTheProgramWin) {
  TempDir dir;
  const fs::path cfg = write_text(dir, "config.json", kLlama);
  // base written: it wins; the scaling still comes from the config; k stays the program's.
  const std::string window = spec_of(dir, "softmax(causal(rope_window(Q, K, k=2, base=10000))) @ V", cfg);
  EXPECT_NE(window.find("rope       base=10000 style=neox rotary_dim=128"), std::string::npos) << window;
  EXPECT_NE(window.find("rope_type  llama3 factor=32"), std::string::npos) << window;
  EXPECT_NE(window.find("window_k   2"), std::string::npos) << window;
  // A different scaling written: its own factor, not the config's.
  const std::string linear = spec_of(dir, "softmax(rope(Q, K, rope_type=linear, factor=2)) @ V", cfg);
  EXPECT_NE(linear.find("rope_type  linear factor=2\n"), std::string::npos) << linear;
  EXPECT_NE(linear.find("base=500000"), std::string::npos) << linear;
  // The config's own scaling written with other values: the program's values.
  const std::string llama = spec_of(
      dir, "softmax(rope(Q, K, rope_type=llama3, factor=8, low_freq_factor=2, high_freq_factor=3, "
           "original_max_position_embeddings=1024)) @ V", cfg);
  EXPECT_NE(llama.find("rope_type  llama3 factor=8 low_freq_factor=2 high_freq_factor=3 "
                       "original_max_position_embeddings=1024"), std::string::npos) << llama;
}

TEST(RopeConfigCli, MisuseExitsTwoWithOneLine) {
  TempDir dir;
  const std::string cfg = write_text(dir, "config.json", kLlama).string();
  const std::string bad = write_text(dir, "bad.json", "[1, 2").string();
  expect_one_line_error(run_cli({"compile", kPlain, "--emit", "spec", "--rope-config", cfg}, dir),
                        "the program has no rope");
  expect_one_line_error(run_cli({"compile", kRope, "--emit", "spec", "--rope-config", bad}, dir), "bad.json");
  expect_one_line_error(run_cli({"compile", kRope, "--emit", "spec", "--rope-config", (dir / "none.json").string()}, dir),
                        "none.json");
  expect_one_line_error(run_cli({"compile", kRope, "--emit", "ir", "--rope-config", cfg}, dir), "--emit spec");
  expect_one_line_error(run_cli({"compile", kRope, "--emit", "spec", "--head-dim", "64", "--rope-config", cfg}, dir),
                        "head dim is 64");
  expect_one_line_error(run_cli({"run", kPlain, "--shape", "1,2,1,8,8,128", "--device", "cpu", "--rope-config", cfg}, dir),
                        "the program has no rope");
  expect_one_line_error(run_cli({"run", kRope, "--shape", "1,2,1,8,8,64", "--device", "cpu", "--check",
                                 "--rope-config", cfg}, dir),
                        "head dim 64");
  expect_one_line_error(run_cli({"bench", kPlain, "--shape", "1,2,1,8,8,128", "--device", "cpu", "--rope-config", cfg}, dir),
                        "the program has no rope");
}

TEST(RopeConfigCli, RunCheckWithTheConfigsRope) {
  TempDir dir;
  const std::string cfg = write_text(dir, "config.json", kLlama).string();
  for (uint64_t seed : {uint64_t{3}, fresh_seed()}) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    const CliResult r = run_cli({"run", "softmax(causal(rope_window(Q, K, k=1))) @ V", "--shape", "1,4,2,33,47,128",
                                 "--seed", std::to_string(seed), "--device", "cpu", "--check", "--rope-config", cfg},
                                dir);
    // The fused CPU kernel runs rope_window; the check against the reference must pass.
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("RoPE from"), std::string::npos) << r.out;
  }
}

// ---- The merge rule in-process ---------------------------------------------------------------

TEST(RopeConfigMerge, ExplicitFieldsComeFromTheProgramText) {
  const Program p = Program::parse("softmax(rope(Q, K, base=10000, rope_type=linear, factor=2)) @ V");
  const rope::RopeFieldSet f = rope::explicit_rope_fields(p.graph());
  EXPECT_TRUE(f.has(rope::RopeField::Base));
  EXPECT_TRUE(f.has(rope::RopeField::RopeType));
  EXPECT_TRUE(f.has(rope::RopeField::Factor));
  EXPECT_FALSE(f.has(rope::RopeField::Style));
  EXPECT_FALSE(f.has(rope::RopeField::RotaryDim));
  EXPECT_TRUE(rope::explicit_rope_fields(Program::parse(kRope).graph()).empty());
  EXPECT_FALSE(rope::has_rope(Program::parse(kPlain).graph()));
  EXPECT_STREQ(rope::rope_field_name(rope::RopeField::OriginalMaxPositionEmbeddings),
               "original_max_position_embeddings");
}

TEST(RopeConfigMerge, ApplyKeepsWrittenFieldsKAndScale) {
  const rope::HfRopeConfig cfg = rope::parse_hf_config(kLlama, "<llama>");
  const Program p = Program::parse("softmax(rope_window(Q, K, k=0.5, scale=0.25, style=gptj)) @ V");
  KernelSpec spec = p.compile(CompileOptions{});
  rope::apply_hf_rope(spec, cfg, p);
  RopeParams want = cfg.rope;
  want.style = RopeStyle::Gptj;
  want.window_k = 0.5;
  EXPECT_EQ(spec.scalars.rope, want);
  EXPECT_EQ(spec.scalars.scale, 0.25);

  // A program with its own scaling does not pick up the config's scaling factors.
  const Program lr = Program::parse(
      "softmax(rope(Q, K, rope_type=longrope, long_factor=[1, 2], short_factor=[1, 1], rotary_dim=4)) @ V");
  KernelSpec s2 = lr.compile(CompileOptions{});
  rope::apply_hf_rope(s2, cfg, lr);
  EXPECT_EQ(s2.scalars.rope.rope_type, RopeScaling::Longrope);
  EXPECT_EQ(s2.scalars.rope.factor, 1.0);
  EXPECT_EQ(s2.scalars.rope.original_max_position_embeddings, 0);
  EXPECT_EQ(s2.scalars.rope.base, 500000.0);
  EXPECT_EQ(s2.scalars.rope.rotary_dim, 4);

  // No rope, a head dim too small for the config, merged parameters that do not fit: Verify.
  const auto code = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Internal;
  };
  const Program plain = Program::parse(kPlain);
  KernelSpec s3 = plain.compile(CompileOptions{});
  EXPECT_EQ(code([&] { rope::apply_hf_rope(s3, cfg, rope::RopeFieldSet{}); }), ErrorCode::Verify);
  EXPECT_EQ(code([&] { rope::explicit_rope_fields(plain.graph()); }), ErrorCode::Verify);
  KernelSpec s4 = Program::parse(kRope).compile(CompileOptions{Target::Cpu, DType::F32, 64});
  EXPECT_EQ(code([&] { rope::apply_hf_rope(s4, cfg, rope::RopeFieldSet{}); }), ErrorCode::Verify);
  const rope::HfRopeConfig lcfg = rope::parse_hf_config(
      R"({"num_attention_heads": 1, "head_dim": 8, "rope_scaling": {"rope_type": "longrope",
          "long_factor": [1, 1, 1, 1], "short_factor": [1, 1, 1, 1], "original_max_position_embeddings": 4}})",
      "<longrope>");
  const Program rd = Program::parse("softmax(rope(Q, K, rotary_dim=4)) @ V");
  KernelSpec s5 = rd.compile(CompileOptions{});
  EXPECT_EQ(code([&] { rope::apply_hf_rope(s5, lcfg, rd); }), ErrorCode::Verify) << "4 factors for 2 pairs";
}

}  // namespace
}  // namespace attnfuse::clitest
