// The verifier: accepts exactly the well-formed attention programs of DESIGN §2 and rejects the
// rest with a message that says what is wrong, why, and points at the offending combinator.
#pragma once

#include "ir/graph.hpp"

namespace attnfuse::ir {

// Contract: returns iff `graph` is one score op (scaled_dot_product | rope | rope_window of Q
// and K), then a chain of masks and score modifiers in any order, then exactly one
// normalization, then `@ V`, with every node reaching the root and every parameter known,
// given once, of the right type and in range (rope_type's required and applicable parameters
// included). Otherwise throws Error(ErrorCode::Verify) whose message says what is wrong and
// why, starting with "line L, column C: " and ending with the source line and a caret under
// the offending combinator (or parameter) when the graph has source text; for C++ DSL graphs
// the caret is under the combinator in the program's DSL rendering (ir::to_dsl).
//
// Redundancy is rejected rather than silently dropped, because it usually means the author
// meant something else: a mask or modifier applied twice (the kernel applies each kind once;
// two sliding windows are one with the smaller width), `full` combined with another mask
// (`full` keeps every cell, so it only makes sense alone), and a result that is computed but
// never reaches the root (typically `t = causal(s)` where `s = causal(s)` was meant).
void verify(const Graph& graph);

}  // namespace attnfuse::ir
