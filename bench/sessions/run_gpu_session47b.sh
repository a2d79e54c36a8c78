#!/usr/bin/env bash
# Forty-seventh session, second call (carry .devcarry from bench/make_device_carry.sh at HEAD, with
# the template variants of bench/make_bias_variants.sh in .devcarry/kd/):
#   1. the GPU tests that run bias programs (CudaForward, CudaDecode.EveryCombinator and
#      DtypesAndHeadDims) in 6 shards, on the 16-bit bias's 16-byte loads;
#   2. the 16-bit bias case (gpu_peers.py --filter "16-bit bias"), ours only, two interleaved
#      rounds: the built-in templates against .devcarry/kd/bias8 (8-byte loads paired in the quad);
#   3. both bias cases with the peers;
#   4. on an H200 only, gpu_decode.py --suite all with the peers, if time is left.
# CAP bounds the whole (default 420 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-420}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. GPU tests with bias programs"
GTEST_FILTER='CudaForward.*:CudaDecode.EveryCombinator:CudaDecode.DtypesAndHeadDims' gpu_suite_sharded "$(left 150)" 6
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. the 16-bit bias, ours only, two rounds (new: 16-byte loads; bias8: 8-byte loads)"
for round in 1 2; do
  for v in new bias8; do
    kd=
    [ $v = bias8 ] && kd=$PWD/.devcarry/kd/bias8
    ATTNFUSE_KERNEL_DIR=$kd ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout "$(left 45)" python3 bench/gpu_peers.py \
      --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "16-bit bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | cut -c1-120)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. additive bias with the peers"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-new timeout "$(left 80)" python3 bench/gpu_peers.py \
  --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E 'additive bias' "$W/bias_peers.log" | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$(left 999)" -ge 150 ]; then
  say "== 4. gpu_decode.py --suite all"
  peer_sweep all all "$(left 400)"
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
