#!/usr/bin/env bash
# Kernel-template variants for the additive-bias A/B (ATTNFUSE_KERNEL_DIR), into .devcarry/kd/:
#   pair        each cell pair's bias by one 8-byte load, chosen per row (attention_fwd.cuh of e76db27)
#   scalar      the same loads hoisted but 4 bytes each (e76db27's bias_values, its 4-byte path only)
# Each is a copy of src/codegen/cuda/kernels/ with attention_fwd.cuh replaced (and edited); the
# script fails if the edit misses.
set -euo pipefail
cd "$(dirname "$0")/.."
src=src/codegen/cuda/kernels
for v in pair scalar; do rm -rf ".devcarry/kd/$v"; mkdir -p .devcarry/kd; cp -r $src ".devcarry/kd/$v"; done
git show e76db27:$src/attention_fwd.cuh > .devcarry/kd/pair/attention_fwd.cuh
f=.devcarry/kd/scalar/attention_fwd.cuh
git show e76db27:$src/attention_fwd.cuh > $f
sed -i 's/if (row \&\& (!kBounded || j0 + 8 \* kNT - 6 <= len_k) \&\& /if (false \&\& row \&\& /' $f
grep -q "if (false && row && " $f
echo "variants in .devcarry/kd: $(ls .devcarry/kd | tr '\n' ' ')"
