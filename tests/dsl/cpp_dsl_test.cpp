// The embedded C++ DSL: the spellings of the issue and the README, their equivalence with the
// text form, and how expression trees become graphs.
#include <gtest/gtest.h>

#include <string>

#include "attnfuse/dsl.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "ir/graph.hpp"
#include "ir/printer.hpp"

namespace attnfuse {
namespace {

using namespace attnfuse::dsl;

void expect_same(const Expr& e, const char* text) {
  const Program a = compile_program(e);
  const Program b = Program::parse(text);
  EXPECT_EQ(a.canonical(), b.canonical()) << text;
  EXPECT_EQ(a.signature(), b.signature()) << text;
}

TEST(CppDsl, TheIssueExample) {
  auto p = matmul(softmax(causal(rope(Q, K, {.base = 500000}))), V);
  const Program prog = Program::from_graph(p.graph());
  EXPECT_EQ(prog.canonical(), Program::parse("softmax(causal(rope(Q, K, base=500000))) @ V").canonical());
  EXPECT_EQ(compile_program(p).signature(), prog.signature());
}

TEST(CppDsl, EveryCombinatorMatchesItsText) {
  expect_same(matmul(softmax(scaled_dot_product(Q, K)), V), "softmax(scaled_dot_product(Q, K)) @ V");
  expect_same(matmul(softmax(scaled_dot_product(Q, K, {.scale = 0.125})), V),
              "softmax(scaled_dot_product(Q, K, scale=0.125)) @ V");
  expect_same(matmul(relu_attention(full(rope(Q, K))), V), "relu_attention(full(rope(Q, K))) @ V");
  expect_same(matmul(softmax(block_sparse(causal(rope_window(Q, K, 2.0)))), V),
              "softmax(block_sparse(causal(rope_window(Q, K, k=2)))) @ V");
  expect_same(matmul(softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)), V),
              "softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V");
  expect_same(matmul(softmax(softcap(additive_bias(alibi(rope(Q, K))), 30)), V),
              "softmax(softcap(additive_bias(alibi(rope(Q, K))), 30)) @ V");
  expect_same(matmul(softmax(alibi(rope(Q, K), {0.5, 0.25})), V),
              "softmax(alibi(rope(Q, K), slopes=[0.5, 0.25])) @ V");
}

TEST(CppDsl, RopeOptionsSpelledNaturally) {
  expect_same(matmul(softmax(causal(rope(Q, K, {.base = 500000, .style = RopeStyle::Gptj, .rotary_dim = 64}))), V),
              "softmax(causal(rope(Q, K, 500000, gptj, 64))) @ V");
  expect_same(matmul(softmax(causal(rope(Q, K,
                                         {.base = 500000,
                                          .rope_type = RopeScaling::Llama3,
                                          .factor = 8,
                                          .low_freq_factor = 1,
                                          .high_freq_factor = 4,
                                          .original_max_position_embeddings = 8192}))),
                     V),
              "softmax(causal(rope(Q, K, base=500000, rope_type=llama3, factor=8, low_freq_factor=1, "
              "high_freq_factor=4, original_max_position_embeddings=8192))) @ V");
  expect_same(matmul(softmax(rope(Q, K,
                                  {.rotary_dim = 4,
                                   .rope_type = RopeScaling::Longrope,
                                   .long_factor = {1, 2},
                                   .short_factor = {1, 1}})),
                     V),
              "softmax(rope(Q, K, rotary_dim=4, rope_type=longrope, long_factor=[1, 2], short_factor=[1, 1])) @ V");
  expect_same(matmul(softmax(rope_window(Q, K, 1.5, {.rope_type = RopeScaling::Yarn, .factor = 4,
                                                     .original_max_position_embeddings = 4096})),
                     V),
              "softmax(rope_window(Q, K, 1.5, rope_type=yarn, factor=4, original_max_position_embeddings=4096)) @ V");
  // Explicit defaults are the same program as omitted ones, in both forms.
  expect_same(matmul(softmax(rope(Q, K, {.base = 10000, .style = RopeStyle::Neox})), V),
              "softmax(rope(Q, K)) @ V");
}

TEST(CppDsl, SharedSubexpressionsAreOneNode) {
  const Expr s = causal(rope(Q, K));
  const Expr out = matmul(softmax(s), V);
  const ir::Graph g = out.graph();
  EXPECT_EQ(g.nodes().size(), 7u);  // Q K rope causal softmax V matmul
  int tensors = 0;
  for (const ir::Node& n : g.nodes()) tensors += n.kind == ir::NodeKind::TensorSym;
  EXPECT_EQ(tensors, 3);
  EXPECT_TRUE(g.source().empty());
  EXPECT_EQ(out.text(), "softmax(causal(rope(Q, K))) @ V");
}

TEST(CppDsl, StatementStyleInCpp) {
  // The paper's traced function, written the same way in C++.
  Expr s = rope(Q, K);
  s = causal(s);
  s = sliding_window(s, 4096);
  const Program p = compile_program(matmul(softmax(s), V));
  EXPECT_EQ(p.canonical(),
            Program::parse("s = rope(Q, K)\ns = causal(s)\ns = sliding_window(s, 4096)\nreturn softmax(s) @ V")
                .canonical());
}

TEST(CppDsl, ScalarValuesAreNotStructure) {
  const Program a = compile_program(matmul(softmax(sliding_window(rope(Q, K), 128)), V));
  const Program b = compile_program(matmul(softmax(sliding_window(rope(Q, K), 4096)), V));
  EXPECT_NE(a.signature(), b.signature());
  EXPECT_EQ(ir::print(a.graph(), ir::PrintValues::Omit), ir::print(b.graph(), ir::PrintValues::Omit));
}

TEST(CppDsl, IllFormedExpressionsAreRejectedWhenCompiled) {
  EXPECT_THROW(compile_program(softmax(rope(Q, K))), Error);
  EXPECT_THROW(compile_program(matmul(causal(softmax(rope(Q, K))), V)), Error);
  EXPECT_THROW(compile_program(matmul(softmax(sliding_window(rope(Q, K), 0)), V)), Error);
  EXPECT_THROW(compile_program(matmul(softmax(rope(Q, K, {.rope_type = RopeScaling::Llama3})), V)), Error);
  try {
    compile_program(matmul(softmax(rope(K, Q)), V));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("operands swapped"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnfuse
