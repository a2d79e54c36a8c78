// IR node names and the Builder that appends nodes to a graph (see graph.hpp).
#include "ir/graph.hpp"

#include <algorithm>

#include "ir/combinators.hpp"

namespace attnfuse::ir {

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::TensorSym: return "TensorSym";
    case NodeKind::ScoreOp: return "ScoreOp";
    case NodeKind::MaskOp: return "MaskOp";
    case NodeKind::BiasOp: return "BiasOp";
    case NodeKind::NormOp: return "NormOp";
    case NodeKind::MatMulPV: return "MatMulPV";
  }
  return "?";
}

// Both read the schema table, so a combinator's name and kind are written down once.
const char* op_name(Op op) {
  if (op == Op::None) return "tensor";
  return combinator(op).name.data();  // the table's names are NUL-terminated literals
}

NodeKind op_node_kind(Op op) {
  if (op == Op::None) return NodeKind::TensorSym;
  return combinator(op).kind;
}

NodeId Builder::tensor(std::string name, SourceLoc loc) {
  Node n;
  n.kind = NodeKind::TensorSym;
  n.op = Op::None;
  n.name = std::move(name);
  n.loc = loc;
  g_.nodes_.push_back(std::move(n));
  return static_cast<NodeId>(g_.nodes_.size() - 1);
}

NodeId Builder::call(Op op, std::vector<NodeId> inputs, std::vector<Param> params, SourceLoc loc) {
  if (op == Op::None) throw Error(ErrorCode::Internal, "Builder::call: use tensor() for symbols");
  // Operands must exist already: this keeps node ids in a topological order.
  for (NodeId in : inputs)
    if (in < 0 || static_cast<size_t>(in) >= g_.nodes_.size())
      throw Error(ErrorCode::Internal, "Builder::call: operand is not a node of this graph");
  Node n;
  n.kind = op_node_kind(op);
  n.op = op;
  n.name = op_name(op);
  n.inputs = std::move(inputs);
  // Stable: a parameter given twice keeps its source order, so the verifier can point at the
  // second spelling.
  std::stable_sort(params.begin(), params.end(),
                   [](const Param& a, const Param& b) { return a.name < b.name; });
  n.params = std::move(params);
  n.loc = loc;
  g_.nodes_.push_back(std::move(n));
  return static_cast<NodeId>(g_.nodes_.size() - 1);
}

Graph Builder::finish(NodeId root) && {
  if (root < 0 || static_cast<size_t>(root) >= g_.nodes_.size())
    throw Error(ErrorCode::Internal, "Builder::finish: the root is not a node of this graph");
  g_.root_ = root;
  return std::move(g_);
}

}  // namespace attnfuse::ir
