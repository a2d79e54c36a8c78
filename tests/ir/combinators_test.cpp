// The schema table's consistency, its value checks, and collect_scalars.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "attnfuse/program.hpp"
#include "ir/combinators.hpp"
#include "ir/graph.hpp"

namespace attnfuse {
namespace {

using ir::Op;

TEST(Combinators, TableCoversEveryOpInOrder) {
  const auto all = ir::combinators();
  ASSERT_EQ(all.size(), 14u);
  std::set<std::string_view> names;
  for (size_t i = 0; i < all.size(); ++i) {
    const Op op = static_cast<Op>(i + 1);
    EXPECT_EQ(all[i].op, op);
    EXPECT_EQ(&ir::combinator(op), &all[i]);
    EXPECT_EQ(ir::op_name(op), all[i].name);
    EXPECT_EQ(ir::op_node_kind(op), all[i].kind);
    EXPECT_EQ(ir::find_combinator(all[i].name), &all[i]);
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name;
  }
  EXPECT_EQ(ir::op_node_kind(Op::None), ir::NodeKind::TensorSym);
  EXPECT_EQ(ir::find_combinator("casual"), nullptr);
  EXPECT_THROW(ir::combinator(Op::None), Error);
  EXPECT_EQ(ir::combinator_names().size(), 14u);
}

TEST(Combinators, KindsAndOperandRoles) {
  EXPECT_EQ(ir::combinator(Op::Rope).kind, ir::NodeKind::ScoreOp);
  EXPECT_EQ(ir::combinator(Op::SlidingWindow).kind, ir::NodeKind::MaskOp);
  EXPECT_EQ(ir::combinator(Op::Softcap).kind, ir::NodeKind::BiasOp);
  EXPECT_EQ(ir::combinator(Op::ReluAttention).kind, ir::NodeKind::NormOp);
  EXPECT_EQ(ir::combinator(Op::MatMul).kind, ir::NodeKind::MatMulPV);
  const auto& sdp = ir::combinator(Op::ScaledDotProduct);
  ASSERT_EQ(sdp.operands.size(), 2u);
  EXPECT_EQ(sdp.operands[0], ir::Role::Query);
  EXPECT_EQ(sdp.operands[1], ir::Role::Key);
  EXPECT_EQ(ir::combinator(Op::Causal).operands.size(), 1u);
  EXPECT_EQ(ir::combinator(Op::MatMul).operands[1], ir::Role::Value);
}

TEST(Combinators, PositionalOrders) {
  auto names = [](Op op) { return ir::param_names(ir::combinator(op)); };
  EXPECT_EQ(names(Op::ScaledDotProduct), (std::vector<std::string_view>{"scale"}));
  EXPECT_EQ(names(Op::SlidingWindow), (std::vector<std::string_view>{"window"}));
  EXPECT_EQ(names(Op::Softcap), (std::vector<std::string_view>{"cap"}));
  EXPECT_EQ(names(Op::Alibi), (std::vector<std::string_view>{"slopes"}));
  EXPECT_TRUE(names(Op::Causal).empty());
  const auto rope = names(Op::Rope);
  ASSERT_GE(rope.size(), 5u);
  EXPECT_EQ((std::vector<std::string_view>(rope.begin(), rope.begin() + 5)),
            (std::vector<std::string_view>{"base", "style", "rotary_dim", "scale", "rope_type"}));
  const auto window = names(Op::RopeWindow);
  ASSERT_EQ(window.size(), rope.size() + 1);
  EXPECT_EQ(window[0], "k");
  EXPECT_TRUE(std::equal(rope.begin(), rope.end(), window.begin() + 1));
}

TEST(Combinators, DefaultsPassTheirOwnChecks) {
  for (const auto& c : ir::combinators()) {
    for (const auto& p : c.params) {
      SCOPED_TRACE(std::string(c.name) + "." + std::string(p.name));
      EXPECT_FALSE(p.meaning.empty());
      EXPECT_FALSE(p.default_doc.empty());
      for (int s = 0; s <= static_cast<int>(RopeScaling::Longrope); ++s)
        if (p.needed_by.has(static_cast<RopeScaling>(s))) {
          EXPECT_TRUE(p.used_by.has(static_cast<RopeScaling>(s)));
        }
      if (p.presence != ir::Presence::Defaulted) continue;
      const ir::ParamValue v = p.default_word.empty() ? ir::ParamValue{p.default_number}
                                                      : ir::ParamValue{std::string(p.default_word)};
      EXPECT_EQ(ir::check_value(p, v), "");
      EXPECT_TRUE(ir::is_default(p, v));
    }
  }
}

TEST(Combinators, ValueChecks) {
  const auto& window = *ir::find_param(ir::combinator(Op::SlidingWindow), "window");
  EXPECT_EQ(ir::check_value(window, 1.0), "");
  EXPECT_EQ(ir::check_value(window, 0.0), "must be an integer >= 1, got 0");
  EXPECT_EQ(ir::check_value(window, 1.5), "must be an integer, got 1.5");
  EXPECT_EQ(ir::check_value(window, 1e300), "is too large, got 1e+300");
  const auto& scale = *ir::find_param(ir::combinator(Op::ScaledDotProduct), "scale");
  EXPECT_EQ(ir::check_value(scale, std::numeric_limits<double>::quiet_NaN()),
            "must be a finite number > 0, got nan");
  EXPECT_EQ(ir::check_value(scale, std::string("big")), "must be a number, got 'big'");
  const auto& dim = *ir::find_param(ir::combinator(Op::Rope), "rotary_dim");
  EXPECT_EQ(ir::check_value(dim, 64.0), "");
  EXPECT_NE(ir::check_value(dim, 0.0), "");
  EXPECT_NE(ir::check_value(dim, 7.0), "");
  const auto& slopes = *ir::find_param(ir::combinator(Op::Alibi), "slopes");
  EXPECT_EQ(ir::check_value(slopes, std::vector<double>{0.5, -0.5}), "");
  EXPECT_NE(ir::check_value(slopes, std::vector<double>{std::numeric_limits<double>::infinity()}), "");
  EXPECT_FALSE(ir::is_default(slopes, std::vector<double>{1.0}));
}

TEST(Combinators, NumberFormatting) {
  EXPECT_EQ(ir::format_number(4.0), "4");
  EXPECT_EQ(ir::format_number(-3.0), "-3");
  EXPECT_EQ(ir::format_number(0.125), "0.125");
  EXPECT_EQ(ir::format_number(500000.0), "500000");
  EXPECT_EQ(ir::format_number(1e-5), "1e-05");
  EXPECT_EQ(ir::format_number(0.1), "0.1");
  EXPECT_EQ(ir::format_number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ir::format_value(std::vector<double>{1, 2.5}), "[1, 2.5]");
  for (double v : {0.08838834764831845, 1.0 / 3.0, 6.02e23, 1e-300})
    EXPECT_EQ(std::stod(ir::format_number(v)), v) << "round trip of " << v;
}

TEST(Scalars, DefaultsWhenNothingIsGiven) {
  const ScalarArgs s = ir::collect_scalars(Program::parse("softmax(causal(rope(Q, K))) @ V").graph());
  EXPECT_EQ(s, ScalarArgs{});
  EXPECT_FALSE(s.scale.has_value());
  EXPECT_EQ(s.rope.base, 10000.0);
}

TEST(Scalars, EveryScalarLandsInItsField) {
  const ScalarArgs s = ir::collect_scalars(
      Program::parse("s = rope_window(Q, K, 2.5, 500000, gptj, 64, 0.1, rope_type=llama3, factor=8,"
                     " low_freq_factor=1, high_freq_factor=4, original_max_position_embeddings=8192)\n"
                     "s = sliding_window(s, 128); s = softcap(s, 30); s = alibi(s, [0.5, 0.25])\n"
                     "return softmax(s) @ V")
          .graph());
  ASSERT_TRUE(s.scale.has_value());
  EXPECT_EQ(*s.scale, 0.1);
  EXPECT_EQ(s.window, 128);
  EXPECT_EQ(s.softcap, 30.0);
  EXPECT_EQ(s.alibi, AlibiSlopes::Custom);
  EXPECT_EQ(s.alibi_slopes, (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(s.rope.base, 500000.0);
  EXPECT_EQ(s.rope.style, RopeStyle::Gptj);
  EXPECT_EQ(s.rope.rotary_dim, 64);
  EXPECT_EQ(s.rope.rope_type, RopeScaling::Llama3);
  EXPECT_EQ(s.rope.factor, 8.0);
  EXPECT_EQ(s.rope.low_freq_factor, 1.0);
  EXPECT_EQ(s.rope.high_freq_factor, 4.0);
  EXPECT_EQ(s.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(s.rope.window_k, 2.5);
}

TEST(Scalars, YarnAndLongrope) {
  const ScalarArgs y = ir::collect_scalars(
      Program::parse("softmax(rope(Q, K, rope_type=yarn, factor=40, original_max_position_embeddings=4096,"
                     " beta_fast=16, beta_slow=2, attention_factor=1.5, mscale=1, mscale_all_dim=0.5)) @ V")
          .graph());
  EXPECT_EQ(y.rope.rope_type, RopeScaling::Yarn);
  EXPECT_EQ(y.rope.beta_fast, 16.0);
  EXPECT_EQ(y.rope.beta_slow, 2.0);
  EXPECT_EQ(y.rope.attention_factor, std::optional<double>(1.5));
  EXPECT_EQ(y.rope.mscale, 1.0);
  EXPECT_EQ(y.rope.mscale_all_dim, 0.5);
  const ScalarArgs l = ir::collect_scalars(
      Program::parse("softmax(rope(Q, K, rope_type=longrope, long_factor=[2, 4], short_factor=[1, 1.5])) @ V")
          .graph());
  EXPECT_EQ(l.rope.rope_type, RopeScaling::Longrope);
  EXPECT_EQ(l.rope.long_factor, (std::vector<double>{2, 4}));
  EXPECT_EQ(l.rope.short_factor, (std::vector<double>{1, 1.5}));
  EXPECT_FALSE(l.rope.attention_factor.has_value());
}

TEST(Scalars, StandardAlibiAndScaledDot) {
  const ScalarArgs s = ir::collect_scalars(
      Program::parse("softmax(alibi(scaled_dot_product(Q, K, scale=0.125), standard)) @ V").graph());
  EXPECT_EQ(s.alibi, AlibiSlopes::Standard);
  EXPECT_TRUE(s.alibi_slopes.empty());
  EXPECT_EQ(s.scale, std::optional<double>(0.125));
}

}  // namespace
}  // namespace attnfuse
