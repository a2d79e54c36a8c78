#!/usr/bin/env bash
# Forty-fifth session, additive bias, second call: the bias lines prefetched for the softmax
# (fwd_wgmma.cuh prefetch_bias) on top of the batch entries side by side in the grid. The build
# (.devcarry from bench/make_device_carry.sh) asks L1 for the current tile's lines after its
# products are issued; two variants of its kernel templates run through ATTNFUSE_KERNEL_DIR:
#   .devcarry/kd/noprefetch  the calls to prefetch_bias removed (the first bias call's kernel)
#   .devcarry/kd/l2next      L2 asked for the next tile's lines instead
# (each a copy of src/codegen/cuda/kernels/ with fwd_wgmma.cuh edited; the session's README says
# how), and .devcarry/base45/libattnfuse_c.so is the library before both changes.
#   1. the whole GPU suite, 8 shards (the built-in templates);
#   2. gpu_peers.py --suite full --filter "additive bias", ours only, two interleaved rounds;
#   3. the same with the peers (built-in templates).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the GPU suite, 8 shards"
gpu_suite_sharded 300 8
say "== 2. additive bias, ours only, two rounds"
for round in 1 2; do
  for v in base noprefetch l1 l2next; do
    lib=.devcarry/lib/libattnfuse_c.so kd=
    [ $v = base ] && lib=.devcarry/base45/libattnfuse_c.so
    [ -d .devcarry/kd/$v ] && kd=$PWD/.devcarry/kd/$v
    ATTNFUSE_KERNEL_DIR=$kd ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout 120 python3 bench/gpu_peers.py --lib $lib \
      --suite full --filter "additive bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | head -1)"
  done
done
say "== 3. additive bias with the peers (built-in templates)"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-l1 timeout 150 python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so \
  --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E '^additive bias' "$W/bias_peers.log" | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
