// The decomposition variants of the ablation benchmark (`attnfuse bench --ablate`), in fp32: each
// removes fewer fusion boundaries than the fused kernel, so their times show what fusing buys.
// Like the kernel they run at the process's instruction-set level (cpu/isa.hpp).
#pragma once

#include "attnfuse/attention.hpp"
#include "attnfuse/kernel_spec.hpp"

namespace attnfuse::cpu {

// (a) Three materialized ops per (b, hq): S = scores with modifiers, P = masks then normalization,
// O = P V (the float instantiation of reference::scores / normalize / pv). Validates first.
void run_unfused(const KernelSpec& spec, const AttentionArgs& args);

// (b) Two ops per (b, hq): one writes P (scores, modifiers, masks and normalization fused, P
// materialized as [Nq, Nk] fp32), then a separate P V. Validates first; Error(Unsupported) for
// document masks (run_unfused and the fused kernel run them).
// Both refuse paged KV caches (Error(Unsupported)).
void run_scores_softmax_fused(const KernelSpec& spec, const AttentionArgs& args);

}  // namespace attnfuse::cpu
