// Pass 1, fuse: recognise the canonical attention pattern of a verified graph and collect it into
// one fused-attention record (the roles of the one kernel, plus the program's scalars).
#pragma once

#include <string>

#include "attnfuse/kernel_spec.hpp"
#include "ir/graph.hpp"

namespace attnfuse::passes {

// The whole program as one kernel's roles. Masks are a set (they commute: a cell is kept iff
// every mask keeps it); modifiers keep program order, innermost first (their order matters).
struct FusedAttention {
  ScoreKind score = ScoreKind::ScaledDot;
  MaskSet masks;  // empty: `full`
  ModifierChain modifiers;
  NormKind norm = NormKind::Softmax;
  ScalarArgs scalars;
  friend bool operator==(const FusedAttention&, const FusedAttention&) = default;
};

// Contract: `graph` has passed the verifier, so it reads, from the root down,
//   MatMulPV(NormOp(<chain of MaskOp / BiasOp>(ScoreOp(Q, K))), V).
// Returns that chain as roles. `full` adds no mask; repeated causal/block_sparse masks are one
// mask; repeated sliding windows intersect (the smallest window wins). Throws Error(Verify),
// pointing at the node, if the graph is not that pattern or applies one score modifier twice
// (a kernel applies each modifier once; write the combined modifier instead).
FusedAttention fuse(const ir::Graph& graph);

// The printout of the record (`attnfuse compile --emit passes`).
std::string to_string(const FusedAttention& fused);

// Printout pieces shared by every pass's output and the KernelSpec, so all read alike: the role
// lines ("  score      ...", masks, modifiers, norm) and the run-time scalar lines of the
// scalars those roles read.
std::string role_lines(ScoreKind score, MaskSet masks, const ModifierChain& modifiers, NormKind norm);
std::string scalar_lines(const ScalarArgs& scalars, ScoreKind score, MaskSet masks,
                         const ModifierChain& modifiers);

}  // namespace attnfuse::passes
