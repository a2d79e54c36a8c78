#!/usr/bin/env bash
# Kernel-template variants for the additive-bias A/B (ATTNFUSE_KERNEL_DIR), into .devcarry/kd/:
#   noprefetch  the wgmma loop's L1 prefetch of the bias lines (prefetch_bias) not called
#   pair        each cell pair's bias by one 8-byte load, chosen per row (attention_fwd.cuh of e76db27)
#   scalar      the same loads hoisted but 4 bytes each (e76db27's bias_values, its 4-byte path only)
# Each is a copy of src/codegen/cuda/kernels/ with one file replaced or edited; the script fails
# if an edit misses.
set -euo pipefail
cd "$(dirname "$0")/.."
src=src/codegen/cuda/kernels
for v in noprefetch pair scalar; do rm -rf ".devcarry/kd/$v"; mkdir -p .devcarry/kd; cp -r $src ".devcarry/kd/$v"; done
f=.devcarry/kd/noprefetch/fwd_wgmma.cuh
sed -i 's/if constexpr (Kernel::SpecType::kBias) prefetch_bias(p, w, warp, g, t, n0);//' $f
! grep -q "prefetch_bias(p, w" $f
git show e76db27:$src/attention_fwd.cuh > .devcarry/kd/pair/attention_fwd.cuh
f=.devcarry/kd/scalar/attention_fwd.cuh
git show e76db27:$src/attention_fwd.cuh > $f
sed -i 's/if (row \&\& (!kBounded || j0 + 8 \* kNT - 6 <= len_k) \&\& /if (false \&\& row \&\& /' $f
grep -q "if (false && row && " $f
echo "variants in .devcarry/kd: $(ls .devcarry/kd | tr '\n' ' ')"
