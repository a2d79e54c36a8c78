// Builds attention programs for the pass tests with ir::Builder (score op, chain, normalization).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace attnfuse::testing {

struct Step {
  ir::Op op;
  std::vector<ir::Param> params = {};
};

inline ir::Param param(std::string name, ir::ParamValue value) { return ir::Param{std::move(name), std::move(value), {}}; }

// norm(chain...(score(Q, K))) @ V, chain listed innermost first.
inline ir::Graph program(const Step& score, const std::vector<Step>& chain, ir::Op norm = ir::Op::Softmax) {
  ir::Builder b;
  const ir::NodeId q = b.tensor("Q"), k = b.tensor("K"), v = b.tensor("V");
  ir::NodeId s = b.call(score.op, {q, k}, score.params);
  for (const Step& st : chain) s = b.call(st.op, {s}, st.params);
  const ir::NodeId p = b.call(norm, {s}, {});
  const ir::NodeId o = b.call(ir::Op::MatMul, {p, v}, {});
  return std::move(b).finish(o);
}

inline Step sdp() { return {ir::Op::ScaledDotProduct}; }

}  // namespace attnfuse::testing
