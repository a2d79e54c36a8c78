// Golden canonical printouts, the DSL rendering (to_dsl) and signatures.
#include <gtest/gtest.h>

#include <string>

#include "attnfuse/dsl.hpp"
#include "attnfuse/error.hpp"
#include "attnfuse/program.hpp"
#include "ir/graph.hpp"
#include "ir/printer.hpp"
#include "ir/signature.hpp"

namespace attnfuse {
namespace {

std::string canon(const char* text) { return Program::parse(text).canonical(); }

TEST(Printer, LlamaGolden) {
  EXPECT_EQ(canon("softmax(causal(rope(Q, K, base=500000))) @ V"),
            "%0 = TensorSym Q\n"
            "%1 = TensorSym K\n"
            "%2 = TensorSym V\n"
            "%3 = ScoreOp rope(%0, %1, base=500000)\n"
            "%4 = MaskOp causal(%3)\n"
            "%5 = NormOp softmax(%4)\n"
            "%6 = MatMulPV(%5, %2)\n");
}

TEST(Printer, EveryMaskAndModifierGolden) {
  // Spelled with masks and modifiers interleaved; printed masks first (fixed order), then the
  // modifiers in program order.
  const char* t =
      "s = scaled_dot_product(Q, K, 0.125)\n"
      "s = block_sparse(s)\n"
      "s = alibi(s, slopes=[0.5, 0.25])\n"
      "s = sliding_window(s, 128)\n"
      "s = softcap(s, 30)\n"
      "s = causal(s)\n"
      "s = additive_bias(s)\n"
      "return relu_attention(s) @ V";
  EXPECT_EQ(canon(t),
            "%0 = TensorSym Q\n"
            "%1 = TensorSym K\n"
            "%2 = TensorSym V\n"
            "%3 = ScoreOp scaled_dot_product(%0, %1, scale=0.125)\n"
            "%4 = MaskOp causal(%3)\n"
            "%5 = MaskOp sliding_window(%4, window=128)\n"
            "%6 = MaskOp block_sparse(%5)\n"
            "%7 = BiasOp alibi(%6, slopes=[0.5, 0.25])\n"
            "%8 = BiasOp softcap(%7, cap=30)\n"
            "%9 = BiasOp additive_bias(%8)\n"
            "%10 = NormOp relu_attention(%9)\n"
            "%11 = MatMulPV(%10, %2)\n");
}

TEST(Printer, RopeParametersSortedAndDefaultsOmitted) {
  const char* t =
      "softmax(rope_window(Q, K, 2, 10000, gptj, rope_type=llama3, factor=8.0, high_freq_factor=4,"
      " low_freq_factor=1, original_max_position_embeddings=8192, scale=0.0883883476483184)) @ V";
  EXPECT_EQ(canon(t),
            "%0 = TensorSym Q\n"
            "%1 = TensorSym K\n"
            "%2 = TensorSym V\n"
            "%3 = ScoreOp rope_window(%0, %1, factor=8, high_freq_factor=4, k=2, low_freq_factor=1, "
            "original_max_position_embeddings=8192, rope_type=llama3, scale=0.0883883476483184, "
            "style=gptj)\n"
            "%4 = NormOp softmax(%3)\n"
            "%5 = MatMulPV(%4, %2)\n");
}

TEST(Printer, DefaultsAreOmittedSoExplicitDefaultsChangeNothing) {
  EXPECT_EQ(canon("softmax(rope(Q, K)) @ V"),
            canon("softmax(rope(Q, K, base=10000, style=neox, rope_type=default)) @ V"));
  EXPECT_EQ(canon("softmax(alibi(rope(Q, K))) @ V"), canon("softmax(alibi(rope(Q, K), standard)) @ V"));
  EXPECT_EQ(canon("softmax(rope(Q, K, rope_type=yarn, factor=4, original_max_position_embeddings=4096)) @ V"),
            canon("softmax(rope(Q, K, rope_type=yarn, factor=4, original_max_position_embeddings=4096, "
                  "beta_fast=32, beta_slow=1)) @ V"));
  // A head-dim-dependent default cannot be written, so an explicit value always counts.
  EXPECT_NE(canon("softmax(scaled_dot_product(Q, K)) @ V"),
            canon("softmax(scaled_dot_product(Q, K, scale=0.125)) @ V"));
}

TEST(Printer, NumbersPrintInOneForm) {
  EXPECT_EQ(canon("softmax(sliding_window(rope(Q, K), 4)) @ V"),
            canon("softmax(sliding_window(rope(Q, K), 4.0)) @ V"));
  EXPECT_EQ(canon("softmax(sliding_window(rope(Q, K), 4)) @ V"),
            canon("softmax(sliding_window(rope(Q, K), 4e0)) @ V"));
  EXPECT_EQ(canon("softmax(scaled_dot_product(Q, K, 0.125)) @ V"),
            canon("softmax(scaled_dot_product(Q, K, 1.25e-1)) @ V"));
  EXPECT_NE(canon("softmax(scaled_dot_product(Q, K, 0.125)) @ V").find("scale=0.125"), std::string::npos);
  EXPECT_NE(canon("softmax(alibi(rope(Q, K), [-0.5, 1e-3])) @ V").find("slopes=[-0.5, 0.001]"),
            std::string::npos);
}

TEST(Printer, ModifierOrderMatters) {
  EXPECT_NE(canon("softmax(softcap(alibi(rope(Q, K)), 30)) @ V"),
            canon("softmax(alibi(softcap(rope(Q, K), 30))) @ V"));
}

TEST(Printer, MaskPlacementDoesNot) {
  const std::string a = canon("softmax(causal(sliding_window(alibi(rope(Q, K)), 64))) @ V");
  EXPECT_EQ(a, canon("softmax(alibi(sliding_window(causal(rope(Q, K)), 64))) @ V"));
  EXPECT_EQ(a, canon("softmax(sliding_window(alibi(causal(rope(Q, K))), window=64)) @ V"));
}

TEST(Printer, StructureOnly) {
  const Program p = Program::parse("softmax(sliding_window(rope(Q, K, base=500000), 64)) @ V");
  EXPECT_EQ(ir::print(p.graph(), ir::PrintValues::Omit),
            "%0 = TensorSym Q\n"
            "%1 = TensorSym K\n"
            "%2 = TensorSym V\n"
            "%3 = ScoreOp rope(%0, %1)\n"
            "%4 = MaskOp sliding_window(%3)\n"
            "%5 = NormOp softmax(%4)\n"
            "%6 = MatMulPV(%5, %2)\n");
  EXPECT_EQ(ir::print(p.graph(), ir::PrintValues::Omit),
            ir::print(Program::parse("softmax(sliding_window(rope(Q, K), 4096)) @ V").graph(),
                      ir::PrintValues::Omit));
}

TEST(Printer, ToDslGolden) {
  const Program p = Program::parse(
      "s = rope(Q, K, 500000, gptj)\ns = sliding_window(s, 64); s = causal(s)\n"
      "s = alibi(s, [0.5, 0.25])\nreturn softmax(s) @ V");
  EXPECT_EQ(ir::to_dsl(p.graph()),
            "softmax(alibi(causal(sliding_window(rope(Q, K, base=500000, style=gptj), window=64)), "
            "slopes=[0.5, 0.25])) @ V");
}

TEST(Printer, ToDslLocations) {
  const Program p = Program::parse("softmax(causal(scaled_dot_product(Q, K))) @ V");
  std::vector<SourceLoc> locs;
  const std::string text = ir::to_dsl(p.graph(), &locs);
  ASSERT_EQ(locs.size(), p.graph().nodes().size());
  for (size_t i = 0; i < locs.size(); ++i) {
    const ir::Node& n = p.graph().nodes()[i];
    ASSERT_TRUE(locs[i].known()) << i;
    const std::string word = n.op == ir::Op::MatMul ? "@" : n.kind == ir::NodeKind::TensorSym ? n.name : ir::op_name(n.op);
    EXPECT_EQ(text.substr(static_cast<size_t>(locs[i].col - 1), static_cast<size_t>(locs[i].len)), word);
    // The parsed graph's own locations agree, since the text was already in this form.
    EXPECT_EQ(locs[i].col, n.loc.col) << word;
  }
}

TEST(Printer, RoundTripsThroughToDsl) {
  const char* programs[] = {
      "softmax(causal(rope(Q, K))) @ V",
      "relu_attention(block_sparse(additive_bias(rope_window(Q, K, k=1.5, rotary_dim=64)))) @ V",
      "s = scaled_dot_product(Q, K, scale=1e-1); s = softcap(s, 50); s = full(s)\nreturn softmax(s) @ V",
      "softmax(alibi(sliding_window(rope(Q, K, rope_type=longrope, long_factor=[1, 2], "
      "short_factor=[1, 1.5], attention_factor=1.25), 8), [1, -1])) @ V",
  };
  for (const char* t : programs) {
    const Program p = Program::parse(t);
    const std::string once = ir::to_dsl(p.graph());
    const Program q = Program::parse(once);
    EXPECT_EQ(q.canonical(), p.canonical()) << t;
    EXPECT_EQ(ir::to_dsl(q.graph()), once) << "to_dsl is a fixed point after one trip";
  }
}

TEST(Signature, Sha256KnownAnswers) {
  EXPECT_EQ(ir::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ir::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Signature, IsTheHashOfTheCanonicalPrintout) {
  const Program p = Program::parse("softmax(causal(rope(Q, K))) @ V");
  EXPECT_EQ(p.signature(), ir::sha256_hex(p.canonical()));
  EXPECT_EQ(p.signature(), ir::signature(p.graph()));
  EXPECT_EQ(p.signature().size(), 64u);
  EXPECT_EQ(p.signature(), Program::parse("s = rope(Q, K)  # llama\ns = causal(s)\nreturn softmax(s) @ V").signature());
  EXPECT_NE(p.signature(), Program::parse("softmax(causal(rope(Q, K, style=gptj))) @ V").signature());
  EXPECT_NE(p.signature(), Program::parse("relu_attention(causal(rope(Q, K))) @ V").signature());
}

TEST(Printer, UnverifiedGraphsStillPrint) {
  // The printer is also used on graphs the verifier rejects (to show them); it must not crash
  // and prints only what reaches the root.
  ir::Builder b;
  const ir::NodeId q = b.tensor("Q");
  const ir::NodeId dead = b.call(ir::Op::Causal, {q}, {});
  (void)dead;
  const ir::NodeId s = b.call(ir::Op::Softmax, {q}, {});
  const ir::Graph g = std::move(b).finish(s);
  EXPECT_EQ(ir::print(g), "%0 = TensorSym Q\n%1 = NormOp softmax(%0)\n");
  EXPECT_EQ(ir::to_dsl(g), "softmax(Q)");
}

}  // namespace
}  // namespace attnfuse
