#!/usr/bin/env bash
# Builds the rope_window ablation kernel directories from the tree's kernels (for
# ATTNFUSE_KERNEL_DIR; timing only, their results are wrong by design) under .devcarry-abl/
# (the twenty-third session's call1 ran them made from 9429352):
#   nocorr/  the per-cell corrections of boundary pairs skipped;
#   lead0/   no window_cut: every tile issues the whole QK chain through the lead-step path
#            (ldmatrix'd Q, register A operand), nothing corrected;
#   lead4/   the same with the first 4 of 8 k steps never issued (half the QK tensor work).
# lead0 against the windowed kernel at k = 1e6 is window_cut's cost; lead4 against lead0 says
# whether the loop's time follows its QK tensor work; plain rope against lead0 is the lead path's.
set -euo pipefail
cd "$(dirname "$0")/.."
K=src/codegen/cuda/kernels
rm -rf .devcarry-abl && mkdir -p .devcarry-abl
mk() { mkdir -p ".devcarry-abl/$1" && cp $K/*.cuh ".devcarry-abl/$1/"; }
mk nocorr
sed -i 's/if (any) correct_window(/if (false \&\& any) correct_window(/' .devcarry-abl/nocorr/fwd_wgmma.cuh
for L in 0 4; do
  mk lead$L
  # (the len_k test keeps the lead a run-time value, so the dispatch stays as in the real kernel)
  sed -i "s|return window_cut<kD>(rt, gq_lo + qo, gq_hi + qo, wq_lo + qo, wq_hi + qo, n0, gk_last, wk_last);|WindowCut<kD> cut; cut.lead = $L + (w.len_k < 0 ? 1 : 0); for (int wd = 0; wd < WindowCut<kD>::kWords; ++wd) { cut.kept[wd] = ~0u; cut.corr[wd] = 0u; } (void)gk_last; (void)wk_last; return cut;|" \
    ".devcarry-abl/lead$L/fwd_wgmma.cuh"
done
for d in nocorr lead0 lead4; do
  cmp -s $K/fwd_wgmma.cuh ".devcarry-abl/$d/fwd_wgmma.cuh" && { echo "ablation $d did not apply" >&2; exit 1; }
done
echo ".devcarry-abl: nocorr lead0 lead4"
