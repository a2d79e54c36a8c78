#!/usr/bin/env bash
# Kernel-template variants for the additive-bias A/B (ATTNFUSE_KERNEL_DIR), into .devcarry/kd/:
#   noprefetch  the wgmma loop's L1 prefetch of the bias lines (prefetch_bias) not called
#   scalar      bias_values always takes its 4-byte path (the loads hoisted, not widened)
# Each is a copy of src/codegen/cuda/kernels/ with one edit; the script fails if an edit misses.
set -euo pipefail
cd "$(dirname "$0")/.."
src=src/codegen/cuda/kernels
for v in noprefetch scalar; do rm -rf ".devcarry/kd/$v"; mkdir -p .devcarry/kd; cp -r $src ".devcarry/kd/$v"; done
f=.devcarry/kd/noprefetch/fwd_wgmma.cuh
sed -i 's/if constexpr (Kernel::SpecType::kBias) prefetch_bias(p, w, warp, g, t, n0);//' $f
! grep -q "prefetch_bias(p, w" $f
f=.devcarry/kd/scalar/attention_fwd.cuh
sed -i 's/if (row \&\& (!kBounded || j0 + 8 \* kNT - 6 <= len_k) \&\& /if (false \&\& row \&\& /' $f
grep -q "if (false && row && " $f
echo "variants in .devcarry/kd: $(ls .devcarry/kd | tr '\n' ' ')"
