#!/usr/bin/env bash
# Kernel-template variants for the additive-bias A/B (ATTNFUSE_KERNEL_DIR), into .devcarry/kd/:
#   noprefetch  the wgmma loop without prefetch_bias (the L1 prefetch of each tile's bias lines,
#               forty-fifth session), re-timed since the softmax loads a row's bias 16 bytes at a time
#   quadt       a 16-bit bias read by 16-byte loads transposed in the quad (attention_fwd.cuh of
#               579b4be; bench/experiments/bias16_quad_transpose.patch), against the 8-byte pairs
# Each is a copy of src/codegen/cuda/kernels/ with one file edited; the script fails if the edit
# misses. (The forty-sixth session's pair/scalar load forms are in git history, e76db27.)
set -euo pipefail
cd "$(dirname "$0")/.."
src=src/codegen/cuda/kernels
rm -rf .devcarry/kd/noprefetch .devcarry/kd/quadt && mkdir -p .devcarry/kd
cp -r $src .devcarry/kd/noprefetch
f=.devcarry/kd/noprefetch/fwd_wgmma.cuh
sed -i 's/if constexpr (Kernel::SpecType::kBias) prefetch_bias(/if constexpr (false) prefetch_bias(/' $f
[ "$(grep -c 'if constexpr (false) prefetch_bias(' $f)" = 2 ]
cp -r $src .devcarry/kd/quadt
git show 579b4be:$src/attention_fwd.cuh > .devcarry/kd/quadt/attention_fwd.cuh
grep -q "constexpr bool kWide" .devcarry/kd/quadt/attention_fwd.cuh
echo "variants in .devcarry/kd: $(ls .devcarry/kd | tr '\n' ' ')"
