// The canonical printout of an IR graph (its identity: the signature hashes it) and the
// one-expression DSL text of a graph (for round trips, messages and `--emit`).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace attnfuse::ir {

enum class PrintValues {
  Include,  // the canonical printout
  Omit,     // structure only: no parameter values (scalars are run-time arguments)
};

// Canonical printout: one line per node, `%i = <Kind> <combinator>(<operands>, <params>)`:
//   %0 = TensorSym Q
//   %1 = TensorSym K
//   %2 = TensorSym V
//   %3 = ScoreOp rope(%0, %1, base=500000)
//   %4 = MaskOp causal(%3)
//   %5 = BiasOp alibi(%4)
//   %6 = NormOp softmax(%5)
//   %7 = MatMulPV(%6, %2)
// It depends only on what the program means, not on how it was spelled:
// - tensors first (Q, K, V, then others by name), then the nodes in post-order from the root;
//   statement and nested forms print the same, unreachable nodes are not printed;
// - masks commute with every other step of the score chain (DESIGN §2), so a chain of masks
//   and modifiers prints its masks first, in the fixed order full, causal, sliding_window,
//   block_sparse, then its modifiers in program order (their order matters);
// - parameters are keyword=value, sorted by name; positional and keyword spellings print the
//   same; numbers in shortest round-trip form (4 and 4.0 print as 4);
// - defaulted parameters are all omitted: a parameter equal to its constant default (base=10000,
//   style=neox, rope_type=default, beta_fast=32, beta_slow=1, slopes=standard) is not printed.
//   Parameters whose default depends on the head dim (scale, rotary_dim) print whenever given.
std::string print(const Graph& graph, PrintValues values = PrintValues::Include);

// The program as one DSL expression, e.g. `softmax(causal(rope(Q, K, base=500000))) @ V`,
// following the graph as built (no reordering; parameters as keywords). For any graph the
// parser can read back, parse(to_dsl(g)) has the same canonical printout as g.
std::string to_dsl(const Graph& graph);
// Same; (*locs)[id] is where node `id`'s combinator name (or `@`, or the first mention of a
// tensor) lands in the text (line 1). Nodes not reached from the root keep an unknown loc.
std::string to_dsl(const Graph& graph, std::vector<SourceLoc>* locs);

}  // namespace attnfuse::ir
