// The canonical IR printout and the graph -> DSL text printer (see printer.hpp).
#include "ir/printer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/combinators.hpp"

namespace attnfuse::ir {

namespace {

bool in_chain(const Node& n) {
  return (n.kind == NodeKind::MaskOp || n.kind == NodeKind::BiasOp) && n.inputs.size() == 1;
}

// Parameters as `name=value`, sorted (Builder sorts them), defaults dropped.
std::string params_text(const Node& n, PrintValues values) {
  if (values == PrintValues::Omit || n.op == Op::None) return {};
  const CombinatorSpec& spec = combinator(n.op);
  std::string out;
  for (const Param& p : n.params) {
    const ParamSpec* ps = find_param(spec, p.name);
    if (ps && is_default(*ps, p.value)) continue;
    out += fmt::format(", {}={}", p.name, format_value(p.value));
  }
  return out;
}

class CanonicalPrinter {
 public:
  CanonicalPrinter(const Graph& g, PrintValues values) : g_(g), values_(values) {}

  std::string run() {
    if (g_.root() < 0) return {};
    emit_tensors();
    emit(g_.root());
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  int emit_line(const std::string& body) {
    lines_.push_back(fmt::format("%{} = {}", lines_.size(), body));
    return static_cast<int>(lines_.size()) - 1;
  }

  void emit_tensors() {
    std::vector<char> seen(g_.nodes().size(), 0);
    std::vector<std::string> names;
    std::vector<NodeId> stack = {g_.root()};
    while (!stack.empty()) {
      NodeId id = stack.back();
      stack.pop_back();
      if (seen[static_cast<size_t>(id)]) continue;
      seen[static_cast<size_t>(id)] = 1;
      const Node& n = g_.node(id);
      if (n.kind == NodeKind::TensorSym) names.push_back(n.name);
      for (NodeId in : n.inputs) stack.push_back(in);
    }
    auto rank = [](const std::string& s) { return s == "Q" ? 0 : s == "K" ? 1 : s == "V" ? 2 : 3; };
    std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
      return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
    });
    names.erase(std::unique(names.begin(), names.end()), names.end());
    for (const auto& name : names) tensor_ids_[name] = emit_line("TensorSym " + name);
  }

  std::string call_text(const Node& n, const std::vector<int>& ins) {
    std::string operands;
    for (size_t i = 0; i < ins.size(); ++i) operands += fmt::format("{}%{}", i ? ", " : "", ins[i]);
    if (n.op == Op::MatMul) return fmt::format("MatMulPV({}{})", operands, params_text(n, values_));
    return fmt::format("{} {}({}{})", node_kind_name(n.kind), op_name(n.op), operands,
                       params_text(n, values_));
  }

  int emit(NodeId id) {
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
    const Node& n = g_.node(id);
    int result;
    if (n.kind == NodeKind::TensorSym) {
      result = tensor_ids_.at(n.name);
    } else if (in_chain(n)) {
      // The run of masks and modifiers above the score op, innermost first.
      std::vector<NodeId> run;
      NodeId cur = id;
      while (in_chain(g_.node(cur))) {
        run.push_back(cur);
        cur = g_.node(cur).inputs[0];
      }
      std::reverse(run.begin(), run.end());
      int prev = emit(cur);
      std::vector<NodeId> masks, mods;
      for (NodeId r : run) (g_.node(r).kind == NodeKind::MaskOp ? masks : mods).push_back(r);
      std::stable_sort(masks.begin(), masks.end(), [&](NodeId a, NodeId b) {
        const Node& na = g_.node(a);
        const Node& nb = g_.node(b);
        if (na.op != nb.op) return na.op < nb.op;
        return params_text(na, values_) < params_text(nb, values_);
      });
      for (NodeId m : masks) prev = emit_line(call_text(g_.node(m), {prev}));
      for (NodeId m : mods) prev = emit_line(call_text(g_.node(m), {prev}));
      result = prev;
    } else {
      std::vector<int> ins;
      for (NodeId in : n.inputs) ins.push_back(emit(in));
      result = emit_line(call_text(n, ins));
    }
    memo_[id] = result;
    return result;
  }

  const Graph& g_;
  PrintValues values_;
  std::vector<std::string> lines_;
  std::map<std::string, int> tensor_ids_;
  std::unordered_map<NodeId, int> memo_;
};

// Numbers as the lexer reads them back (infinities overflow to inf when parsed).
std::string dsl_number(double v) {
  if (std::isinf(v)) return v > 0 ? "1e999" : "-1e999";
  return format_number(v);
}

std::string dsl_value(const ParamValue& v) {
  if (const double* n = std::get_if<double>(&v)) return dsl_number(*n);
  if (const std::string* w = std::get_if<std::string>(&v)) return *w;
  std::string out = "[";
  const auto& list = std::get<std::vector<double>>(v);
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + dsl_number(list[i]);
  return out + "]";
}

class DslPrinter {
 public:
  DslPrinter(const Graph& g, std::vector<SourceLoc>* locs) : g_(g), locs_(locs) {
    if (locs_) locs_->assign(g.nodes().size(), SourceLoc{});
  }

  std::string run() {
    if (g_.root() >= 0) write(g_.root());
    return out_;
  }

 private:
  void mark(NodeId id, size_t len) {
    if (!locs_ || (*locs_)[static_cast<size_t>(id)].known()) return;
    (*locs_)[static_cast<size_t>(id)] =
        SourceLoc{1, static_cast<int>(out_.size()) + 1, static_cast<int>(len)};
  }

  void write_operand_of_matmul(NodeId id) {
    const bool paren = g_.node(id).op == Op::MatMul && g_.node(id).inputs.size() == 2;
    if (paren) out_ += "(";
    write(id);
    if (paren) out_ += ")";
  }

  void write(NodeId id) {
    const Node& n = g_.node(id);
    if (n.kind == NodeKind::TensorSym) {
      mark(id, n.name.size());
      out_ += n.name;
      return;
    }
    if (n.op == Op::MatMul && n.inputs.size() == 2 && n.params.empty()) {
      write_operand_of_matmul(n.inputs[0]);
      out_ += " ";
      mark(id, 1);
      out_ += "@ ";
      write_operand_of_matmul(n.inputs[1]);
      return;
    }
    const char* name = op_name(n.op);
    mark(id, std::string_view(name).size());
    out_ += name;
    out_ += "(";
    bool first = true;
    for (NodeId in : n.inputs) {
      if (!first) out_ += ", ";
      first = false;
      write(in);
    }
    for (const Param& p : n.params) {
      if (!first) out_ += ", ";
      first = false;
      out_ += p.name + "=" + dsl_value(p.value);
    }
    out_ += ")";
  }

  const Graph& g_;
  std::vector<SourceLoc>* locs_;
  std::string out_;
};

}  // namespace

std::string print(const Graph& graph, PrintValues values) {
  return CanonicalPrinter(graph, values).run();
}

std::string to_dsl(const Graph& graph) { return DslPrinter(graph, nullptr).run(); }

std::string to_dsl(const Graph& graph, std::vector<SourceLoc>* locs) {
  return DslPrinter(graph, locs).run();
}

}  // namespace attnfuse::ir
