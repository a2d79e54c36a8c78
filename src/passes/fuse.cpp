// Pass 1, fuse: walk the verified graph from `@ V` down to the score op and record its roles.
#include "passes/fuse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "dsl/diagnostics.hpp"
#include "ir/combinators.hpp"

namespace attnfuse::passes {
namespace {

[[noreturn]] void not_fusible(const ir::Graph& g, const ir::Node& n, const std::string& why) {
  dsl::fail_at(ErrorCode::Verify, g.source(), n.loc,
               fmt::format("cannot fuse this program into one kernel: {}", why));
}

ScoreKind score_kind(ir::Op op) {
  switch (op) {
    case ir::Op::Rope: return ScoreKind::Rope;
    case ir::Op::RopeWindow: return ScoreKind::RopeWindow;
    default: return ScoreKind::ScaledDot;
  }
}

ModifierKind modifier_kind(ir::Op op) {
  switch (op) {
    case ir::Op::Alibi: return ModifierKind::Alibi;
    case ir::Op::AdditiveBias: return ModifierKind::AdditiveBias;
    default: return ModifierKind::Softcap;
  }
}

bool is_tensor(const ir::Graph& g, ir::NodeId id) { return g.node(id).kind == ir::NodeKind::TensorSym; }

}  // namespace

FusedAttention fuse(const ir::Graph& g) {
  if (g.root() < 0) throw Error(ErrorCode::Verify, "cannot fuse an empty program");
  const ir::Node& root = g.node(g.root());
  if (root.kind != ir::NodeKind::MatMulPV || root.inputs.size() != 2 || !is_tensor(g, root.inputs[1]))
    not_fusible(g, root, "the program must end in `<normalization> @ V`");
  const ir::Node& norm = g.node(root.inputs[0]);
  if (norm.kind != ir::NodeKind::NormOp || norm.inputs.size() != 1)
    not_fusible(g, norm, "`@ V` must take the output of softmax or relu_attention");

  // The chain of masks and modifiers, collected outermost first, then reversed.
  std::vector<ir::NodeId> chain;
  ir::NodeId cur = norm.inputs[0];
  while (g.node(cur).kind == ir::NodeKind::MaskOp || g.node(cur).kind == ir::NodeKind::BiasOp) {
    if (g.node(cur).inputs.size() != 1) not_fusible(g, g.node(cur), "a mask or modifier takes one score operand");
    chain.push_back(cur);
    cur = g.node(cur).inputs[0];
  }
  std::reverse(chain.begin(), chain.end());
  const ir::Node& score = g.node(cur);
  if (score.kind != ir::NodeKind::ScoreOp || score.inputs.size() != 2 || !is_tensor(g, score.inputs[0]) ||
      !is_tensor(g, score.inputs[1]))
    not_fusible(g, score, "the normalization must read scores computed from Q and K by one score op");

  FusedAttention f;
  f.score = score_kind(score.op);
  f.norm = norm.op == ir::Op::ReluAttention ? NormKind::ReluAttention : NormKind::Softmax;
  f.scalars = ir::collect_scalars(g);
  int64_t window = 0;  // intersection of every sliding window: the smallest
  for (ir::NodeId id : chain) {
    const ir::Node& n = g.node(id);
    switch (n.op) {
      case ir::Op::Full: break;
      case ir::Op::Causal: f.masks.add(MaskKind::Causal); break;
      case ir::Op::BlockSparse: f.masks.add(MaskKind::BlockSparse); break;
      case ir::Op::Document: f.masks.add(MaskKind::Document); break;
      case ir::Op::SlidingWindow: {
        f.masks.add(MaskKind::SlidingWindow);
        const ir::Param* p = n.param("window");
        const double* w = p ? std::get_if<double>(&p->value) : nullptr;
        if (!w) not_fusible(g, n, "sliding_window has no window size");
        window = window == 0 ? static_cast<int64_t>(*w) : std::min(window, static_cast<int64_t>(*w));
        break;
      }
      case ir::Op::Alibi:
      case ir::Op::AdditiveBias:
      case ir::Op::Softcap: {
        const ModifierKind k = modifier_kind(n.op);
        if (f.modifiers.has(k))
          not_fusible(g, n,
                      fmt::format("{} is applied twice; the kernel applies each score modifier once, "
                                  "so write a single {} with the combined effect",
                                  modifier_kind_name(k), modifier_kind_name(k)));
        f.modifiers.push(k);
        break;
      }
      default: not_fusible(g, n, fmt::format("{} cannot appear between the score op and the normalization",
                                             ir::op_name(n.op)));
    }
  }
  if (f.masks.has(MaskKind::SlidingWindow)) f.scalars.window = window;
  return f;
}

std::string role_lines(ScoreKind score, MaskSet masks, const ModifierChain& modifiers, NormKind norm) {
  std::string mask_text;
  for (MaskKind k : {MaskKind::Causal, MaskKind::SlidingWindow, MaskKind::BlockSparse, MaskKind::Document})
    if (masks.has(k)) mask_text += fmt::format("{}{}", mask_text.empty() ? "" : ", ", mask_kind_name(k));
  std::string mod_text;
  for (int i = 0; i < modifiers.size(); ++i)
    mod_text += fmt::format("{}{}", i ? " -> " : "", modifier_kind_name(modifiers[i]));
  return fmt::format("  score      {}\n  masks      {}\n  modifiers  {}\n  norm       {}\n",
                     score_kind_name(score), mask_text.empty() ? "none (full)" : mask_text,
                     mod_text.empty() ? "none" : modifiers.size() > 1 ? mod_text + "  (innermost first)" : mod_text, norm_kind_name(norm));
}

namespace {

std::string num(double v) { return ir::format_number(v); }

std::string list(const std::vector<double>& v) { return ir::format_value(ir::ParamValue{v}); }

// "base=... style=... rotary_dim=..." and, on a second line, the rope_type with the parameters
// that scaling reads (the others are ignored by it, so they are not printed).
std::string rope_text(const RopeParams& r) {
  return fmt::format("base={} style={} rotary_dim={}", num(r.base), rope_style_name(r.style),
                     r.rotary_dim > 0 ? std::to_string(r.rotary_dim) : "D");
}

std::string rope_type_text(const RopeParams& r) {
  std::string s = rope_scaling_name(r.rope_type);
  const auto add = [&s](const char* name, const std::string& value) { s += fmt::format(" {}={}", name, value); };
  const RopeScaling t = r.rope_type;
  if (t != RopeScaling::None) add("factor", num(r.factor));
  if (t == RopeScaling::Llama3) add("low_freq_factor", num(r.low_freq_factor)), add("high_freq_factor", num(r.high_freq_factor));
  if (t != RopeScaling::None && t != RopeScaling::Linear)
    add("original_max_position_embeddings", std::to_string(r.original_max_position_embeddings));
  if (t == RopeScaling::Yarn) {
    add("beta_fast", num(r.beta_fast)), add("beta_slow", num(r.beta_slow));
    if (r.mscale != 0) add("mscale", num(r.mscale));
    if (r.mscale_all_dim != 0) add("mscale_all_dim", num(r.mscale_all_dim));
  }
  if ((t == RopeScaling::Yarn || t == RopeScaling::Longrope) && r.attention_factor)
    add("attention_factor", num(*r.attention_factor));
  if (t == RopeScaling::Longrope) add("long_factor", list(r.long_factor)), add("short_factor", list(r.short_factor));
  return s;
}

}  // namespace

std::string scalar_lines(const ScalarArgs& s, ScoreKind score, MaskSet masks, const ModifierChain& modifiers) {
  std::string out = fmt::format("  scale      {}\n", s.scale ? num(*s.scale) : "1/sqrt(D)");
  if (score != ScoreKind::ScaledDot)
    out += fmt::format("  rope       {}\n  rope_type  {}\n", rope_text(s.rope), rope_type_text(s.rope));
  if (score == ScoreKind::RopeWindow) out += fmt::format("  window_k   {}\n", num(s.rope.window_k));
  if (masks.has(MaskKind::SlidingWindow)) out += fmt::format("  window     {}\n", s.window);
  if (modifiers.has(ModifierKind::Alibi))
    out += fmt::format("  alibi      {}\n", s.alibi == AlibiSlopes::Standard ? "standard slopes" : "slopes " + list(s.alibi_slopes));
  if (modifiers.has(ModifierKind::Softcap)) out += fmt::format("  softcap    {}\n", num(s.softcap));
  return out;
}

std::string to_string(const FusedAttention& f) {
  return "fused_attention\n" + role_lines(f.score, f.masks, f.modifiers, f.norm) + "run-time scalars\n" +
         scalar_lines(f.scalars, f.score, f.masks, f.modifiers);
}

}  // namespace attnfuse::passes
