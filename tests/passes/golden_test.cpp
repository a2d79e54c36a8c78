// Golden KernelSpec printouts: each program compiled for a CPU and a CUDA target must print exactly
// what tests/passes/golden/<name>.txt holds. ATTNFUSE_UPDATE_GOLDEN=1 rewrites the files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "attnfuse/program.hpp"
#include "ir/verifier.hpp"
#include "pass_helpers.hpp"
#include "passes/pipeline.hpp"

namespace attnfuse::testing {
namespace {

using ir::Op;

struct GoldenCase {
  const char* name;
  const char* text;  // the program as DSL text (documentation in the golden file)
  ir::Graph graph;
};

std::vector<GoldenCase> cases() {
  const Step causal{Op::Causal};
  std::vector<GoldenCase> v;
  v.push_back({"causal", "softmax(causal(scaled_dot_product(Q, K))) @ V", program(sdp(), {causal})});
  v.push_back({"sliding_window", "softmax(sliding_window(scaled_dot_product(Q, K), 1024)) @ V",
               program(sdp(), {{Op::SlidingWindow, {param("window", 1024.0)}}})});
  v.push_back({"causal_alibi", "softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V",
               program(sdp(), {causal, {Op::Alibi}})});
  v.push_back({"bias", "softmax(additive_bias(scaled_dot_product(Q, K, scale=0.125))) @ V",
               program({Op::ScaledDotProduct, {param("scale", 0.125)}}, {{Op::AdditiveBias}})});
  v.push_back({"relu", "relu_attention(causal(scaled_dot_product(Q, K))) @ V",
               program(sdp(), {causal}, Op::ReluAttention)});
  v.push_back({"softcap", "softmax(softcap(causal(scaled_dot_product(Q, K)), 30)) @ V",
               program(sdp(), {causal, {Op::Softcap, {param("cap", 30.0)}}})});
  v.push_back({"block_sparse", "softmax(block_sparse(scaled_dot_product(Q, K))) @ V",
               program(sdp(), {{Op::BlockSparse}})});
  v.push_back({"document", "softmax(alibi(document(causal(scaled_dot_product(Q, K))))) @ V",
               program(sdp(), {causal, {Op::Document}, {Op::Alibi}})});
  v.push_back({"rope", "softmax(causal(rope(Q, K, base=500000))) @ V",
               program({Op::Rope, {param("base", 500000.0)}}, {causal})});
  v.push_back({"rope_window_llama3",
               "softmax(softcap(alibi(sliding_window(causal(rope_window(Q, K, k=2, style=gptj, "
               "rotary_dim=64, rope_type=llama3, factor=8, low_freq_factor=1, high_freq_factor=4, "
               "original_max_position_embeddings=8192)), 4096), slopes=[0.5, 0.25]), 50)) @ V",
               program({Op::RopeWindow,
                        {param("k", 2.0), param("style", std::string("gptj")), param("rotary_dim", 64.0),
                         param("rope_type", std::string("llama3")), param("factor", 8.0),
                         param("low_freq_factor", 1.0), param("high_freq_factor", 4.0),
                         param("original_max_position_embeddings", 8192.0)}},
                       {causal,
                        {Op::SlidingWindow, {param("window", 4096.0)}},
                        {Op::Alibi, {param("slopes", std::vector<double>{0.5, 0.25})}},
                        {Op::Softcap, {param("cap", 50.0)}}})});
  return v;
}

const CompileOptions kTargets[] = {{Target::Cpu, DType::F32, 0}, {Target::Cuda, DType::BF16, 128}};

std::string render(const GoldenCase& c) {
  ir::verify(c.graph);
  std::string out = fmt::format("# program: {}\n", c.text);
  for (const CompileOptions& o : kTargets) {
    out += fmt::format("\n# options: target={} dtype={} head_dim={}\n", target_name(o.target),
                       dtype_name(o.dtype), o.head_dim);
    out += to_string(passes::run_pipeline(c.graph, o, nullptr));
  }
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// A unified-style line diff (longest common subsequence; the files are a few dozen lines).
std::string diff(const std::string& want, const std::string& got) {
  const auto a = lines(want), b = lines(got);
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      out += "  " + a[i++] + "\n";
      ++j;
    } else if (j < b.size() && (i == a.size() || lcs[i][j + 1] > lcs[i + 1][j])) {
      out += "+ " + b[j++] + "\n";
    } else {
      out += "- " + a[i++] + "\n";
    }
  }
  return out;
}

TEST(GoldenSpec, PrintoutsMatchTheCommittedFiles) {
  const std::string dir = std::string(ATTNFUSE_SOURCE_DIR) + "/tests/passes/golden/";
  const char* env = std::getenv("ATTNFUSE_UPDATE_GOLDEN");
  const bool update = env && std::strcmp(env, "1") == 0;
  for (const GoldenCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + c.name + ".txt";
    const std::string got = render(c);
    if (update) {
      std::ofstream(path, std::ios::binary) << got;
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << "missing golden file " << path << " (run with ATTNFUSE_UPDATE_GOLDEN=1)";
    const std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(want, got) << "golden mismatch for " << path << " (- expected, + got); if the change is "
                         << "intended, rerun with ATTNFUSE_UPDATE_GOLDEN=1 and review the diff:\n"
                         << diff(want, got);
  }
}

TEST(GoldenSpec, TextProgramsCompileLikeTheirBuilderGraphs) {
  for (const GoldenCase& c : cases()) {
    SCOPED_TRACE(c.text);
    const Program p = Program::parse(c.text);
    for (const CompileOptions& o : kTargets) {
      std::string trace;
      const KernelSpec s = p.compile(o, &trace);
      EXPECT_EQ(to_string(s), to_string(passes::run_pipeline(c.graph, o, nullptr)));
      EXPECT_NE(trace.find("== after lower =="), std::string::npos) << trace;
    }
  }
}

TEST(GoldenSpec, StatementFormCompilesLikeTheExpression) {
  const Program stmts = Program::parse(
      "s = scaled_dot_product(Q, K)\ns = softcap(s, 30)\ns = causal(s)\nreturn softmax(s) @ V");
  const Program expr = Program::parse("softmax(softcap(causal(scaled_dot_product(Q, K)), 30)) @ V");
  for (const CompileOptions& o : kTargets) EXPECT_EQ(to_string(stmts.compile(o)), to_string(expr.compile(o)));
}

TEST(GoldenSpec, DiffShowsChangedLines) {
  const std::string d = diff("a\nb\nc\n", "a\nx\nc\n");
  EXPECT_EQ(d, "  a\n- b\n+ x\n  c\n");
}

}  // namespace
}  // namespace attnfuse::testing
