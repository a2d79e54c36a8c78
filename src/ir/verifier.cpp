// The verifier's checks and messages (see verifier.hpp). Each node is checked in id order
// (operands first, as Builder guarantees), then the program as a whole.
#include "ir/verifier.hpp"

#include <optional>

#include <fmt/format.h>

#include "dsl/diagnostics.hpp"
#include "ir/combinators.hpp"
#include "ir/printer.hpp"

namespace attnfuse::ir {

namespace {

// What a node's result is, as far as its consumers care.
enum class Val { Query, Key, Value, Tensor, Scores, Probs, Output };

constexpr const char* kOnlyThroughAtV = "V is the value tensor, which enters only through `@ V`";

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g), val_(g.nodes().size(), Val::Tensor) {}

  void run() {
    if (g_.root() < 0 || g_.nodes().empty()) throw Error(ErrorCode::Verify, "the program is empty");
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes().size()); ++id) check_node(id);
    check_counts();
    check_root();
    check_chain();
    check_unused();
  }

 private:
  const Node& node(NodeId id) const { return g_.node(id); }
  const char* name(NodeId id) const { return op_name(node(id).op); }

  [[noreturn]] void fail(NodeId id, const std::string& msg, SourceLoc at = {}) {
    if (!g_.source().empty()) {
      SourceLoc loc = at.known() ? at : node(id).loc;
      throw Error(ErrorCode::Verify, dsl::format_at(g_.source(), loc, msg));
    }
    // A C++ DSL graph has no text: point into its one-expression rendering instead.
    std::vector<SourceLoc> locs;
    std::string text = to_dsl(g_, &locs);
    std::string block = dsl::caret_block(text, locs[static_cast<size_t>(id)]);
    throw Error(ErrorCode::Verify, block.empty() ? msg : msg + "\n" + block);
  }

  // " (line 1, column 9)" for messages that mention a second place, or "".
  std::string where(NodeId id) const {
    const SourceLoc& l = node(id).loc;
    if (g_.source().empty() || !l.known()) return {};
    return fmt::format(" (line {}, column {})", l.line, l.col);
  }

  std::string describe(NodeId id) const {
    switch (val_[static_cast<size_t>(id)]) {
      case Val::Query: return "the query tensor Q";
      case Val::Key: return "the key tensor K";
      case Val::Value: return "the value tensor V";
      case Val::Tensor: return fmt::format("the tensor {}", node(id).name);
      case Val::Scores: return fmt::format("scores (the result of {})", name(id));
      case Val::Probs: return fmt::format("probabilities (the result of {})", name(id));
      case Val::Output: return "the attention output (the result of `@`)";
    }
    return "?";
  }

  // `causal(...)` / `sliding_window(..., window)`: how to call a combinator in an example.
  static std::string call_example(const CombinatorSpec& spec, const std::string& operand) {
    std::string out = fmt::format("{}({}", spec.name, operand);
    for (const auto& p : spec.params)
      if (p.presence == Presence::Required) out += fmt::format(", {}", p.name);
    return out + ")";
  }

  void check_node(NodeId id) {
    const Node& n = node(id);
    Val& v = val_[static_cast<size_t>(id)];
    switch (n.kind) {
      case NodeKind::TensorSym:
        v = n.name == "Q" ? Val::Query : n.name == "K" ? Val::Key : n.name == "V" ? Val::Value : Val::Tensor;
        return;
      case NodeKind::ScoreOp: check_score(id); v = Val::Scores; break;
      case NodeKind::MaskOp:
      case NodeKind::BiasOp: check_chain_operand(id); v = Val::Scores; break;
      case NodeKind::NormOp: check_norm(id); v = Val::Probs; break;
      case NodeKind::MatMulPV: check_matmul(id); v = Val::Output; break;
    }
    check_params(id);
  }

  Val in_val(NodeId id, size_t i) const { return val_[static_cast<size_t>(node(id).inputs[i])]; }

  void check_score(NodeId id) {
    const Node& n = node(id);
    const std::string nm = name(id);
    if (n.inputs.size() != 2)
      fail(id, fmt::format("{} takes two operands, the query Q and the key K, but got {}; write {}(Q, K)",
                           nm, n.inputs.size(), nm));
    const Val a = in_val(id, 0), b = in_val(id, 1);
    if (a == Val::Key && b == Val::Query)
      fail(id, fmt::format("{0} has its operands swapped: it takes the query first and the key "
                           "second, {0}(Q, K), but got {0}(K, Q)", nm));
    for (size_t i = 0; i < 2; ++i) {
      const Val x = i == 0 ? a : b;
      const Val want = i == 0 ? Val::Query : Val::Key;
      if (x == want) continue;
      const NodeId in = n.inputs[i];
      const char* which = i == 0 ? "first operand must be the query tensor Q"
                                 : "second operand must be the key tensor K";
      if (x == Val::Scores || x == Val::Probs)
        fail(id, fmt::format("two score ops: {} is applied to {}, but a program has exactly one "
                             "score op and it comes first; {}'s {}", nm, describe(in), nm, which));
      std::string why = x == Val::Value ? fmt::format("; {}: write {}(Q, K)", kOnlyThroughAtV, nm)
                        : x == Val::Output ? std::string("; `@ V` is the last step of a program")
                                           : std::string();
      fail(id, fmt::format("{}'s {}, but it is {}{}", nm, which, describe(in), why));
    }
  }

  // Masks and modifiers take scores and give scores.
  void check_chain_operand(NodeId id) {
    const Node& n = node(id);
    const CombinatorSpec& spec = combinator(n.op);
    const std::string nm = name(id);
    if (n.inputs.size() != 1)
      fail(id, fmt::format("{} takes one operand, the scores, but got {}; write {}", nm,
                           n.inputs.size(), call_example(spec, "s")));
    const NodeId in = n.inputs[0];
    const bool mask = n.kind == NodeKind::MaskOp;
    switch (in_val(id, 0)) {
      case Val::Scores: return;
      case Val::Probs:
        if (mask)
          fail(id, fmt::format(
                       "mask {0} is applied after the normalization {1}: a mask selects which keys "
                       "take part in the normalization, so applied to its output it would change "
                       "the normalization, not the selection (the kept probabilities would no "
                       "longer sum to 1). Move the mask inside: {1}({2}) @ V",
                       nm, name(in), call_example(spec, "...")));
        fail(id, fmt::format(
                     "score modifier {0} is applied after the normalization {1}: a modifier changes "
                     "the scores before they are normalized, and applied to probabilities its "
                     "result is no longer normalized. Move it inside: {1}({2}) @ V",
                     nm, name(in), call_example(spec, "...")));
      case Val::Output:
        fail(id, fmt::format("{0} is applied to the attention output (the result of `@`), but "
                             "`@ V` is the last step of a program; move {0} inside the "
                             "normalization: softmax({1}) @ V", nm, call_example(spec, "...")));
      case Val::Value:
        fail(id, fmt::format("{} expects attention scores, but its operand is the value tensor V; {}",
                             nm, kOnlyThroughAtV));
      default:
        fail(id, fmt::format("{} expects attention scores, but its operand is {}: no score op was "
                             "applied. Compute the scores first: {}", nm, describe(in),
                             call_example(spec, "scaled_dot_product(Q, K)")));
    }
  }

  void check_norm(NodeId id) {
    const Node& n = node(id);
    const std::string nm = name(id);
    if (n.inputs.size() != 1)
      fail(id, fmt::format("{0} takes one operand, the scores, but got {1}; write {0}(s) @ V", nm,
                           n.inputs.size()));
    const NodeId in = n.inputs[0];
    switch (in_val(id, 0)) {
      case Val::Scores: return;
      case Val::Probs:
        fail(id, fmt::format("two normalizations: {} is applied to the output of {}, but a program "
                             "has exactly one normalization; remove one of them", nm, name(in)));
      case Val::Output:
        fail(id, fmt::format("{} is applied to the attention output (the result of `@`), but "
                             "`@ V` is the last step of a program", nm));
      case Val::Value:
        fail(id, fmt::format("{} expects attention scores, but its operand is the value tensor V; {}",
                             nm, kOnlyThroughAtV));
      default:
        fail(id, fmt::format("{0} expects attention scores, but its operand is {1}: no score op was "
                             "applied. Compute the scores first: {0}(scaled_dot_product(Q, K)) @ V",
                             nm, describe(in)));
    }
  }

  void check_matmul(NodeId id) {
    const Node& n = node(id);
    if (n.inputs.size() != 2)
      fail(id, fmt::format("`@` takes two operands, the probabilities on the left and V on the "
                           "right (softmax(s) @ V), but got {}", n.inputs.size()));
    const NodeId l = n.inputs[0], r = n.inputs[1];
    switch (in_val(id, 0)) {
      case Val::Probs: break;
      case Val::Scores:
        fail(id, fmt::format("no normalization: the left side of `@` is {}, not probabilities. "
                             "Normalize the scores first: softmax({}(...)) @ V (or relu_attention)",
                             describe(l), name(l)));
      case Val::Output:
        fail(id, "the left side of `@` is already an attention output: `@ V` is applied once, as "
                 "the last step");
      default:
        fail(id, fmt::format("the left side of `@` must be attention probabilities (softmax(...) or "
                             "relu_attention(...)), but it is {}", describe(l)));
    }
    if (in_val(id, 1) != Val::Value)
      fail(id, fmt::format("the right side of `@` must be the value tensor V, but it is {}: "
                           "attention averages the values with the probabilities (p @ V)",
                           describe(r)));
  }

  void check_params(NodeId id) {
    const Node& n = node(id);
    const CombinatorSpec& spec = combinator(n.op);
    const std::string nm = name(id);
    for (size_t i = 0; i < n.params.size(); ++i) {
      const Param& p = n.params[i];
      const ParamSpec* ps = find_param(spec, p.name);
      if (!ps) {
        const auto names = param_names(spec);
        if (names.empty())
          fail(id, fmt::format("{} takes no parameters, but got '{}'{}", nm, p.name, spec.argument_hint),
               p.loc);
        fail(id, fmt::format("unknown parameter '{}' of {}{}; its parameters are {}", p.name, nm,
                             dsl::did_you_mean(p.name, names), dsl::join_words(names)), p.loc);
      }
      if (i > 0 && n.params[i - 1].name == p.name)
        fail(id, fmt::format("parameter '{}' of {} is given twice; give it once", p.name, nm), p.loc);
      std::string why = check_value(*ps, p.value);
      // The valid words say enough; for numbers, what the parameter means says why.
      if (!why.empty())
        fail(id, ps->type == ParamType::Word || std::holds_alternative<std::string>(p.value)
                     ? fmt::format("{}: parameter '{}' {}", nm, p.name, why)
                     : fmt::format("{}: parameter '{}' {} ({})", nm, p.name, why, ps->meaning),
             p.loc);
    }
    for (const ParamSpec& ps : spec.params)
      if (ps.presence == Presence::Required && !n.param(std::string(ps.name)))
        fail(id, fmt::format("{} is missing its required parameter '{}' ({}); write {}", nm, ps.name,
                             ps.meaning, spec.usage));
    if (n.op == Op::Rope || n.op == Op::RopeWindow) check_rope(id);
  }

  void check_rope(NodeId id) {
    const Node& n = node(id);
    const CombinatorSpec& spec = combinator(n.op);
    const std::string nm = name(id);
    RopeScaling type = RopeScaling::None;
    if (const Param* p = n.param("rope_type")) parse_rope_scaling(std::get<std::string>(p->value), &type);
    const char* tname = rope_scaling_name(type);
    std::vector<std::string_view> needed, missing;
    for (const ParamSpec& ps : spec.params) {
      const Param* p = n.param(std::string(ps.name));
      if (p && !ps.used_by.has(type)) {
        std::vector<std::string_view> users;
        for (int s = 1; s <= static_cast<int>(RopeScaling::Longrope); ++s)
          if (ps.used_by.has(static_cast<RopeScaling>(s)))
            users.push_back(rope_scaling_name(static_cast<RopeScaling>(s)));
        fail(id, fmt::format("{}: parameter '{}' has no effect with rope_type={}; it is read only "
                             "by rope_type={}", nm, ps.name, tname, dsl::join_words(users, " or ")),
             p->loc);
      }
      if (ps.needed_by.has(type)) {
        needed.push_back(ps.name);
        if (!p) missing.push_back(ps.name);
      }
    }
    if (!missing.empty())
      fail(id, fmt::format("{}: rope_type={} needs {}; missing: {}", nm, tname,
                           dsl::join_words(needed), dsl::join_words(missing)));
    auto num = [&](const char* p) { return std::get<double>(n.param(p)->value); };
    if (type == RopeScaling::Llama3 && !(num("high_freq_factor") > num("low_freq_factor")))
      fail(id, fmt::format("{}: high_freq_factor ({}) must be greater than low_freq_factor ({}): "
                           "llama3 interpolates between the two wavelength bounds", nm,
                           format_number(num("high_freq_factor")), format_number(num("low_freq_factor"))),
           n.param("high_freq_factor")->loc);
    if (type == RopeScaling::Longrope) {
      const Param* lf = n.param("long_factor");
      const Param* sf = n.param("short_factor");
      const size_t nl = std::get<std::vector<double>>(lf->value).size();
      const size_t ns = std::get<std::vector<double>>(sf->value).size();
      if (nl != ns)
        fail(id, fmt::format("{}: long_factor has {} entries but short_factor has {}; both hold one "
                             "factor per rotated pair", nm, nl, ns), sf->loc);
      if (const Param* rd = n.param("rotary_dim")) {
        const double pairs = std::get<double>(rd->value) / 2;
        if (static_cast<double>(nl) != pairs)
          fail(id, fmt::format("{}: long_factor and short_factor have {} entries, but rotary_dim={} "
                               "rotates {} pairs; give one factor per pair", nm, nl,
                               format_number(pairs * 2), format_number(pairs)), lf->loc);
      }
    }
  }

  void check_counts() {
    NodeId score = -1, norm = -1;
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes().size()); ++id) {
      const NodeKind k = node(id).kind;
      if (k == NodeKind::ScoreOp) {
        if (score >= 0)
          fail(id, fmt::format("two score ops: {}{} and {}; a program has exactly one score op",
                               name(score), where(score), name(id)));
        score = id;
      }
      if (k == NodeKind::NormOp) {
        if (norm >= 0)
          fail(id, fmt::format("two normalizations: {}{} and {}; a program has exactly one "
                               "normalization", name(norm), where(norm), name(id)));
        norm = id;
      }
    }
  }

  void check_root() {
    const NodeId r = g_.root();
    switch (val_[static_cast<size_t>(r)]) {
      case Val::Output: return;
      case Val::Probs:
        fail(r, fmt::format("missing `@ V`: the program ends with {0}(...), which gives attention "
                            "probabilities; attention multiplies them by the values: write "
                            "{0}(...) @ V", name(r)));
      case Val::Scores:
        fail(r, fmt::format("the program ends with scores (the result of {0}): it has no "
                            "normalization and no `@ V`; write softmax({0}(...)) @ V", name(r)));
      default:
        fail(r, fmt::format("the program is just {}; an attention program looks like "
                            "softmax(scaled_dot_product(Q, K)) @ V", describe(r)));
    }
  }

  // The root is `@`, its left a normalization, below it masks and modifiers down to the score op.
  void check_chain() {
    std::vector<NodeId> chain;  // outermost first
    NodeId cur = node(node(g_.root()).inputs[0]).inputs[0];
    while (node(cur).kind == NodeKind::MaskOp || node(cur).kind == NodeKind::BiasOp) {
      chain.push_back(cur);
      cur = node(cur).inputs[0];
    }
    std::vector<NodeId> first(static_cast<size_t>(Op::MatMul) + 1, -1);
    NodeId full = -1, other_mask = -1;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {  // program order
      const NodeId id = *it;
      const Node& n = node(id);
      NodeId& seen = first[static_cast<size_t>(n.op)];
      if (seen >= 0) {
        std::string why =
            n.op == Op::SlidingWindow
                ? "two windows keep only the cells of the narrower one, so use one sliding_window "
                  "with the smaller window"
            : n.kind == NodeKind::MaskOp
                ? "a mask keeps the same cells however often it is applied, so remove one"
                : "each score modifier may appear at most once in a program, so remove one";
        const SourceLoc& l = node(seen).loc;
        std::string first_at = g_.source().empty() || !l.known()
                                   ? std::string()
                                   : fmt::format(" (first at line {}, column {})", l.line, l.col);
        fail(id, fmt::format("{} is applied twice{}: {}", name(id), first_at, why));
      }
      seen = id;
      if (n.op == Op::Full) full = id;
      else if (n.kind == NodeKind::MaskOp && other_mask < 0) other_mask = id;
    }
    if (full >= 0 && other_mask >= 0)
      fail(full, fmt::format("full keeps every cell, so combining it with {} is redundant: remove "
                             "full(...) (full is for a program with no other mask)", name(other_mask)));
  }

  void check_unused() {
    std::vector<char> used(g_.nodes().size(), 0);
    used[static_cast<size_t>(g_.root())] = 1;
    for (NodeId id = g_.root(); id >= 0; --id)
      if (used[static_cast<size_t>(id)])
        for (NodeId in : node(id).inputs) used[static_cast<size_t>(in)] = 1;
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes().size()); ++id)
      if (!used[static_cast<size_t>(id)] && node(id).kind != NodeKind::TensorSym)
        fail(id, fmt::format("the result of {0} is never used: it does not reach the program's "
                             "result. To apply it, assign it back to the name it reads, e.g. "
                             "s = {0}(s)", name(id)));
  }

  const Graph& g_;
  std::vector<Val> val_;
};

}  // namespace

void verify(const Graph& graph) { Verifier(graph).run(); }

}  // namespace attnfuse::ir
