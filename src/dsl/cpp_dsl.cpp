// The embedded C++ DSL (include/attnfuse/dsl.hpp): expression trees lowered to ir::Graph with
// the same parameter names and values the text parser produces.
#include "attnfuse/dsl.hpp"

#include <map>
#include <unordered_map>

#include "ir/graph.hpp"
#include "ir/printer.hpp"

namespace attnfuse::dsl {

struct ExprNode {
  ir::Op op = ir::Op::None;
  std::string name;  // tensors
  std::vector<std::shared_ptr<const ExprNode>> inputs;
  std::vector<ir::Param> params;
};

namespace {

Expr make(ir::Op op, std::vector<Expr> inputs, std::vector<ir::Param> params = {}) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  for (const Expr& e : inputs) n->inputs.push_back(e.node());
  n->params = std::move(params);
  return Expr(std::move(n));
}

void add(std::vector<ir::Param>& ps, const char* name, ir::ParamValue v) {
  ps.push_back(ir::Param{name, std::move(v), {}});
}
template <class T>
void add(std::vector<ir::Param>& ps, const char* name, const std::optional<T>& v) {
  if (v) add(ps, name, ir::ParamValue{static_cast<double>(*v)});
}
void add(std::vector<ir::Param>& ps, const char* name, const std::vector<double>& v) {
  if (!v.empty()) add(ps, name, ir::ParamValue{v});
}

std::vector<ir::Param> rope_params(const RopeOptions& o) {
  std::vector<ir::Param> ps;
  add(ps, "base", o.base);
  if (o.style) add(ps, "style", ir::ParamValue{std::string(rope_style_name(*o.style))});
  add(ps, "rotary_dim", o.rotary_dim);
  add(ps, "scale", o.scale);
  if (o.rope_type) add(ps, "rope_type", ir::ParamValue{std::string(rope_scaling_name(*o.rope_type))});
  add(ps, "factor", o.factor);
  add(ps, "low_freq_factor", o.low_freq_factor);
  add(ps, "high_freq_factor", o.high_freq_factor);
  add(ps, "original_max_position_embeddings", o.original_max_position_embeddings);
  add(ps, "beta_fast", o.beta_fast);
  add(ps, "beta_slow", o.beta_slow);
  add(ps, "attention_factor", o.attention_factor);
  add(ps, "mscale", o.mscale);
  add(ps, "mscale_all_dim", o.mscale_all_dim);
  add(ps, "long_factor", o.long_factor);
  add(ps, "short_factor", o.short_factor);
  return ps;
}

class Lowering {
 public:
  ir::NodeId lower(const std::shared_ptr<const ExprNode>& n) {
    if (auto it = memo_.find(n.get()); it != memo_.end()) return it->second;
    ir::NodeId id;
    if (n->op == ir::Op::None) {
      auto t = tensors_.find(n->name);
      id = t != tensors_.end() ? t->second : (tensors_[n->name] = b_.tensor(n->name));
    } else {
      std::vector<ir::NodeId> ins;
      for (const auto& in : n->inputs) ins.push_back(lower(in));
      id = b_.call(n->op, std::move(ins), n->params);
    }
    memo_[n.get()] = id;
    return id;
  }
  ir::Graph finish(ir::NodeId root) { return std::move(b_).finish(root); }

 private:
  ir::Builder b_;
  std::unordered_map<const ExprNode*, ir::NodeId> memo_;
  std::map<std::string, ir::NodeId> tensors_;
};

}  // namespace

Expr::Expr(Sym s) : Expr(tensor(s.name)) {}

Expr tensor(std::string name) {
  auto n = std::make_shared<ExprNode>();
  n->name = std::move(name);
  return Expr(std::move(n));
}

ir::Graph Expr::graph() const {
  Lowering l;
  const ir::NodeId root = l.lower(node_);
  return l.finish(root);
}

std::string Expr::text() const { return ir::to_dsl(graph()); }

Expr scaled_dot_product(const Expr& q, const Expr& k, const ScaledDotOptions& o) {
  std::vector<ir::Param> ps;
  add(ps, "scale", o.scale);
  return make(ir::Op::ScaledDotProduct, {q, k}, std::move(ps));
}

Expr rope(const Expr& q, const Expr& k, const RopeOptions& o) {
  return make(ir::Op::Rope, {q, k}, rope_params(o));
}

Expr rope_window(const Expr& q, const Expr& k, double window_k, const RopeOptions& o) {
  std::vector<ir::Param> ps = rope_params(o);
  add(ps, "k", ir::ParamValue{window_k});
  return make(ir::Op::RopeWindow, {q, k}, std::move(ps));
}

Expr full(const Expr& s) { return make(ir::Op::Full, {s}); }
Expr causal(const Expr& s) { return make(ir::Op::Causal, {s}); }
Expr sliding_window(const Expr& s, int64_t window) {
  return make(ir::Op::SlidingWindow, {s}, {ir::Param{"window", static_cast<double>(window), {}}});
}
Expr block_sparse(const Expr& s) { return make(ir::Op::BlockSparse, {s}); }
Expr document(const Expr& s) { return make(ir::Op::Document, {s}); }

Expr alibi(const Expr& s) { return make(ir::Op::Alibi, {s}); }
Expr alibi(const Expr& s, std::vector<double> slopes) {
  return make(ir::Op::Alibi, {s}, {ir::Param{"slopes", std::move(slopes), {}}});
}
Expr additive_bias(const Expr& s) { return make(ir::Op::AdditiveBias, {s}); }
Expr softcap(const Expr& s, double cap) {
  return make(ir::Op::Softcap, {s}, {ir::Param{"cap", cap, {}}});
}

Expr softmax(const Expr& s) { return make(ir::Op::Softmax, {s}); }
Expr relu_attention(const Expr& s) { return make(ir::Op::ReluAttention, {s}); }

Expr matmul(const Expr& p, const Expr& v) { return make(ir::Op::MatMul, {p, v}); }

Program compile_program(const Expr& e) { return Program::from_graph(e.graph()); }

}  // namespace attnfuse::dsl
