#!/usr/bin/env bash
# Forty-seventh session, first call (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   1. the GPU tests that run bias programs (CudaForward, CudaDecode.EveryCombinator and
#      DtypesAndHeadDims) in 6 shards: 8df82aa changed how the softmax passes feed the bias
#      values, and the bias in the inputs' 16-bit dtype (FwdParams::bias_16bit) is new;
#   2. additive bias with the peers (gpu_peers.py --suite full --filter "additive bias"): an fp32
#      bias (the 16-byte loads had only run on an H100) and one in the inputs' dtype;
#   2b. the wgmma loop's L1 bias prefetch re-timed: the built-in templates against
#      .devcarry/kd/noprefetch (bench/make_bias_variants.sh), ours only, two interleaved rounds;
#   3. gpu_decode.py --suite all with the peers (decode, paged, BigBird, documents with the ragged
#      varlen split rule, which had not run on an H200), on an H200 only.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. GPU tests with bias programs"
GTEST_FILTER='CudaForward.*:CudaDecode.EveryCombinator:CudaDecode.DtypesAndHeadDims' gpu_suite_sharded "$(left 150)" 6
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. additive bias with the peers"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-bias timeout "$(left 80)" python3 bench/gpu_peers.py \
  --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E 'additive bias' "$W/bias_peers.log" | cut -c1-160 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2b. the L1 bias prefetch re-timed (bench/make_bias_variants.sh), ours only, two rounds"
for round in 1 2; do
  for v in new noprefetch; do
    kd=
    [ $v = noprefetch ] && kd=$PWD/.devcarry/kd/noprefetch
    ATTNFUSE_KERNEL_DIR=$kd ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout "$(left 45)" python3 bench/gpu_peers.py \
      --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$?"
    grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | cut -c1-160 >> "$D"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all (on an H200 only: the H100's is a session old)"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  peer_sweep all all "$(left 400)"
fi
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
