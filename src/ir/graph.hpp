// The high-level IR: an immutable graph of the paper's six node kinds, built from the text or
// C++ DSL and checked by the verifier. Nodes may be ill-formed when built; verify() rejects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "attnfuse/error.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::ir {

enum class NodeKind { TensorSym, ScoreOp, MaskOp, BiasOp, NormOp, MatMulPV };
const char* node_kind_name(NodeKind k);

// Which combinator a non-tensor node is (the node kind follows from it).
enum class Op {
  None,  // TensorSym
  ScaledDotProduct, Rope, RopeWindow,     // ScoreOp
  Full, Causal, SlidingWindow, BlockSparse, Document,  // MaskOp
  Alibi, AdditiveBias, Softcap,           // BiasOp (score modifiers)
  Softmax, ReluAttention,                 // NormOp
  MatMul,                                 // MatMulPV
};
const char* op_name(Op op);  // the DSL spelling, e.g. "sliding_window"
NodeKind op_node_kind(Op op);

// A parameter value as written: number, identifier (enum word such as `neox`), or list.
using ParamValue = std::variant<double, std::string, std::vector<double>>;

struct Param {
  std::string name;  // canonical keyword name (positional arguments are resolved to it)
  ParamValue value;
  SourceLoc loc;
};

using NodeId = int32_t;

struct Node {
  NodeKind kind = NodeKind::TensorSym;
  Op op = Op::None;
  std::string name;             // TensorSym: the symbol (Q, K, V, ...)
  std::vector<NodeId> inputs;   // operands in call order
  std::vector<Param> params;    // sorted by name after building
  SourceLoc loc;                // the combinator name (or symbol) in the text
  const Param* param(const std::string& n) const {
    for (const auto& p : params)
      if (p.name == n) return &p;
    return nullptr;
  }
};

// Immutable once built; Builder appends nodes. The root is the last value returned.
class Graph {
 public:
  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
  NodeId root() const { return root_; }
  // The program text the graph was parsed from ("" for the C++ DSL), kept for error carets.
  const std::string& source() const { return source_; }

 private:
  friend class Builder;
  std::vector<Node> nodes_;
  NodeId root_ = -1;
  std::string source_;
};

class Builder {
 public:
  explicit Builder(std::string source = {}) { g_.source_ = std::move(source); }
  NodeId tensor(std::string name, SourceLoc loc = {});
  NodeId call(Op op, std::vector<NodeId> inputs, std::vector<Param> params, SourceLoc loc = {});
  Graph finish(NodeId root) &&;

 private:
  Graph g_;
};

}  // namespace attnfuse::ir
