// Everything well-formed is accepted: the paper's programs, every combinator in many
// compositions, both text forms, all spellings of parameters. (The exhaustive randomized
// sweep over all 1632 structures lives in tests/dsl/spelling_test.cpp.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "ir/graph.hpp"
#include "ir/verifier.hpp"

namespace attnfuse {
namespace {

const char* const kValid[] = {
    // The paper's examples and the issue's.
    "softmax(causal(rope(Q, K))) @ V",
    "s = rope(Q, K)\ns = causal(s)\nreturn softmax(s) @ V",
    "s = scaled_dot_product(Q, K)\ns = causal(s)\nreturn softmax(s) @ V",
    "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V",
    "softmax(scaled_dot_product(Q, K, scale=0.125)) @ V",
    "softmax(softcap(scaled_dot_product(Q, K), 30)) @ V",
    // Every combinator.
    "softmax(scaled_dot_product(Q, K)) @ V",
    "softmax(rope(Q, K)) @ V",
    "softmax(rope_window(Q, K, k=2)) @ V",
    "softmax(full(scaled_dot_product(Q, K))) @ V",
    "softmax(causal(scaled_dot_product(Q, K))) @ V",
    "softmax(sliding_window(scaled_dot_product(Q, K), 1)) @ V",
    "softmax(block_sparse(scaled_dot_product(Q, K))) @ V",
    "softmax(alibi(scaled_dot_product(Q, K))) @ V",
    "softmax(additive_bias(scaled_dot_product(Q, K))) @ V",
    "softmax(softcap(scaled_dot_product(Q, K), cap=50.0)) @ V",
    "relu_attention(scaled_dot_product(Q, K)) @ V",
    "matmul(softmax(scaled_dot_product(Q, K)), V)",
    // Compositions.
    "relu_attention(causal(alibi(rope(Q, K)))) @ V",
    "softmax(block_sparse(causal(rope_window(Q, K, 1.5, 500000)))) @ V",
    "softmax(alibi(causal(sliding_window(rope(Q, K), 4096)))) @ V",
    "softmax(softcap(additive_bias(alibi(causal(scaled_dot_product(Q, K)))), 30)) @ V",
    "softmax(additive_bias(softcap(alibi(scaled_dot_product(Q, K)), 30))) @ V",
    "relu_attention(block_sparse(sliding_window(causal(additive_bias(rope(Q, K))), 256))) @ V",
    "softmax(full(softcap(additive_bias(alibi(rope_window(Q, K, k=4))), 20))) @ V",
    "softmax(causal(block_sparse(sliding_window(softcap(additive_bias(alibi(rope(Q, K))), 30), 128)))) @ V",
    // Statement forms: separators, comments, reused names, fresh names, nesting in statements.
    "s = rope(Q, K); s = causal(s); return softmax(s) @ V",
    "# Llama-3\nscores = rope(Q, K, base=500000)   # theta\n\nscores = causal(scores)\n"
    "probs = softmax(scores)\nreturn probs @ V\n",
    "a = scaled_dot_product(Q, K)\nb = alibi(a)\nc = causal(b)\nreturn relu_attention(c) @ V",
    "s = softcap(causal(rope(Q, K)), 30)\nreturn softmax(s) @ V",
    "s = rope(Q, K)\np = softmax(causal(s)); o = p @ V\nreturn o",
    "return softmax(rope(Q, K)) @ V",
    "\n\n  softmax(rope(Q, K)) @ V  \n\n",
    // A call spanning lines, trailing commas, parentheses.
    "softmax(rope(\n    Q,\n    K,\n    base=500000,\n    style=gptj,\n)) @ V",
    "(softmax((causal((rope(Q, K)))))) @ (V)",
    // Parameter spellings.
    "softmax(rope(Q, K, 500000, gptj, 64, 0.1)) @ V",
    "softmax(rope(Q, K, rotary_dim=128, base=1e6)) @ V",
    "softmax(sliding_window(rope(Q, K), window=4.0)) @ V",
    "softmax(alibi(rope(Q, K), slopes=[0.5, 0.25, 0.125])) @ V",
    "softmax(alibi(rope(Q, K), [-0.5])) @ V",
    "softmax(alibi(rope(Q, K), slopes=standard)) @ V",
    "softmax(scaled_dot_product(Q, K, 1e-2)) @ V",
    "softmax(scaled_dot_product(Q, K, .5)) @ V",
    // RoPE scalings (Hugging Face rope_scaling).
    "softmax(causal(rope(Q, K, rope_type=linear, factor=4))) @ V",
    "softmax(causal(rope(Q, K, rope_type=dynamic, factor=2, original_max_position_embeddings=4096))) @ V",
    "softmax(causal(rope(Q, K, rope_type=yarn, factor=4, original_max_position_embeddings=32768))) @ V",
    "softmax(causal(rope(Q, K, rope_type=yarn, factor=40, original_max_position_embeddings=4096,"
    " beta_fast=32, beta_slow=1, mscale=1, mscale_all_dim=1, attention_factor=1.0))) @ V",
    "softmax(causal(rope(Q, K, base=500000, rope_type=llama3, factor=8, low_freq_factor=1,"
    " high_freq_factor=4, original_max_position_embeddings=8192))) @ V",
    "softmax(causal(rope(Q, K, rotary_dim=6, rope_type=longrope, long_factor=[1, 2, 4],"
    " short_factor=[1, 1, 1], original_max_position_embeddings=4096))) @ V",
    "softmax(causal(rope(Q, K, rope_type=longrope, long_factor=[1.5], short_factor=[1], factor=4,"
    " attention_factor=1.2))) @ V",
    "softmax(causal(rope_window(Q, K, k=1, rope_type=llama3, factor=8, low_freq_factor=1,"
    " high_freq_factor=4, original_max_position_embeddings=8192))) @ V",
    "softmax(causal(rope(Q, K, style=gptj, rope_type=default))) @ V",
};

TEST(VerifierValid, AcceptsEveryWellFormedProgram) {
  for (const char* text : kValid) {
    try {
      const Program p = Program::parse(text);
      EXPECT_FALSE(p.canonical().empty());
    } catch (const Error& e) {
      ADD_FAILURE() << "rejected:\n" << text << "\n" << e.what();
    }
  }
}

// Groups of spellings of one program: each group shares one canonical printout, and no two
// groups do.
TEST(VerifierValid, SpellingsOfOneProgramAgree) {
  const std::vector<std::vector<const char*>> groups = {
      {"softmax(causal(rope(Q, K))) @ V",
       "s = rope(Q, K)\ns = causal(s)\nreturn softmax(s) @ V",
       "s = rope(Q, K); s = causal(s); p = softmax(s); return p @ V",
       "matmul(softmax(causal(rope(Q, K))), V)",
       "softmax(causal(rope(Q, K, base=10000, style=neox))) @ V",
       "x = rope(Q,K)\n# mask\nreturn softmax(causal(x))@V"},
      {"softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V",
       "softmax(causal(sliding_window(scaled_dot_product(Q, K), window=1024))) @ V",
       "s = scaled_dot_product(Q, K)\ns = sliding_window(s, 1.024e3)\ns = causal(s)\nreturn softmax(s) @ V"},
      {"softmax(alibi(causal(rope(Q, K)))) @ V", "softmax(causal(alibi(rope(Q, K)))) @ V",
       "softmax(causal(alibi(rope(Q, K), slopes=standard))) @ V"},
      {"softmax(softcap(alibi(rope(Q, K)), 30)) @ V",
       "softmax(causal(softcap(alibi(rope(Q, K)), 30))) @ V"},  // second one differs: see below
  };
  std::vector<std::string> seen;
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    const std::string first = Program::parse(groups[g][0]).canonical();
    for (const char* t : groups[g]) EXPECT_EQ(Program::parse(t).canonical(), first) << t;
    for (const auto& other : seen) EXPECT_NE(other, first);
    seen.push_back(first);
  }
  EXPECT_NE(Program::parse(groups.back()[0]).canonical(), Program::parse(groups.back()[1]).canonical());
}

TEST(VerifierValid, TensorsAreSharedAcrossStatements) {
  const Program p = Program::parse("s = scaled_dot_product(Q, K)\np = softmax(s)\nreturn p @ V");
  int tensors = 0;
  for (const ir::Node& n : p.graph().nodes()) tensors += n.kind == ir::NodeKind::TensorSym;
  EXPECT_EQ(tensors, 3);
  EXPECT_EQ(p.graph().nodes().size(), 6u);
  EXPECT_EQ(p.graph().node(p.graph().root()).op, ir::Op::MatMul);
}

TEST(VerifierValid, SourceLocationsPointAtCombinators) {
  const Program p = Program::parse("s = rope(Q, K)\nreturn softmax(causal(s)) @ V");
  for (const ir::Node& n : p.graph().nodes()) {
    const std::pair at{n.loc.line, n.loc.col};
    if (n.op == ir::Op::Rope) {
      EXPECT_EQ(at, (std::pair{1, 5}));
    } else if (n.op == ir::Op::Causal) {
      EXPECT_EQ(at, (std::pair{2, 16}));
    } else if (n.op == ir::Op::MatMul) {
      EXPECT_EQ(at, (std::pair{2, 27}));
    }
    if (n.op != ir::Op::None) {
      EXPECT_EQ(n.loc.len, n.op == ir::Op::MatMul ? 1 : static_cast<int>(n.name.size()));
    }
  }
}

TEST(VerifierValid, ProgramFromGraphVerifies) {
  ir::Builder b;
  const ir::NodeId q = b.tensor("Q"), k = b.tensor("K"), v = b.tensor("V");
  const ir::NodeId s = b.call(ir::Op::Rope, {q, k}, {ir::Param{"base", 500000.0, {}}});
  const ir::NodeId m = b.call(ir::Op::Causal, {s}, {});
  const ir::NodeId p = b.call(ir::Op::Softmax, {m}, {});
  const ir::NodeId o = b.call(ir::Op::MatMul, {p, v}, {});
  const Program prog = Program::from_graph(std::move(b).finish(o));
  EXPECT_EQ(prog.canonical(), Program::parse("softmax(causal(rope(Q, K, base=500000))) @ V").canonical());
}

}  // namespace
}  // namespace attnfuse
