#!/usr/bin/env bash
# Forty-fifth session, additive bias with the batch entries of a query tile side by side in the
# grid (work.cuh init, CudaKernel::plan), on the build that has it (.devcarry from
# bench/make_device_carry.sh) against the library before it (.devcarry/base45/libattnfuse_c.so):
#   1. the whole GPU suite, 8 shards;
#   2. gpu_peers.py --suite full --filter "additive bias" (GPT-2, B 4, H 12, N 4096, a [1, H, N, N]
#      fp32 bias broadcast over the batch), ours only, base / new, two interleaved rounds;
#   3. the same case with the peers on the new build.
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the GPU suite, 8 shards"
gpu_suite_sharded 300 8
say "== 2. additive bias, ours only: base / new, two rounds"
for round in 1 2; do
  for v in base new; do
    lib=.devcarry/lib/libattnfuse_c.so
    [ $v = base ] && lib=.devcarry/base45/libattnfuse_c.so
    ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout 120 python3 bench/gpu_peers.py --lib $lib --suite full \
      --filter "additive bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E 'attnfuse' "$W/bias_${v}_r$round.log" | grep -v '^#' | head -2 | tr '\n' ' ' | cut -c1-160)"
  done
done
say "== 3. additive bias with the peers, new build"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-new timeout 150 python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so \
  --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -vE '^\s*$' "$W/bias_peers.log" | tail -12 | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
