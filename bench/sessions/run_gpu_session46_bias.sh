#!/usr/bin/env bash
# Forty-sixth session, second call: the additive bias's loads. Carry .devcarry from
# bench/make_device_carry.sh at HEAD, the library before the bias-value loads in
# .devcarry/base46/, and the template variants of bench/make_bias_variants.sh in .devcarry/kd/.
#   1. the GPU tests that run bias programs (CudaForward, CudaDecode.EveryCombinator and
#      DtypesAndHeadDims) in 6 shards, the built-in templates;
#   2. gpu_peers.py --suite full --filter "additive bias", ours only, two interleaved rounds:
#      base (the library before), new, and the variants of make_bias_variants.sh (ATTNFUSE_KERNEL_DIR);
#   3. the same with the peers (built-in templates).
# CAP bounds the whole (default 260 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-260}
say "== 1. GPU tests with bias programs"
GTEST_FILTER='CudaForward.*:CudaDecode.EveryCombinator:CudaDecode.DtypesAndHeadDims' gpu_suite_sharded "$(left 120)" 6
say "== 2. additive bias, ours only, two rounds"
for round in 1 2; do
  for v in base new pair scalar; do
    lib=.devcarry/lib/libattnfuse_c.so kd=
    [ $v = base ] && lib=.devcarry/base46/libattnfuse_c.so
    [ -d .devcarry/kd/$v ] && kd=$PWD/.devcarry/kd/$v
    ATTNFUSE_KERNEL_DIR=$kd ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout "$(left 40)" python3 bench/gpu_peers.py \
      --lib $lib --suite full --filter "additive bias" --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | head -1)"
  done
done
say "== 3. additive bias with the peers"
ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-new timeout "$(left 45)" python3 bench/gpu_peers.py \
  --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" > "$W/bias_peers.log" 2>&1
say "rc=$?"; grep -E 'additive bias' "$W/bias_peers.log" | cut -c1-160 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
