#!/usr/bin/env bash
# Forty-seventh session, third call: the wgmma loop's bias prefetch one tile ahead. Carry
# .devcarry (bench/make_device_carry.sh at 579b4be) with .devcarry/kd/base (the kernels of
# 2026-12-06's HEAD, src/codegen/cuda/kernels copied) and .devcarry/kd/ahead (the same with
# prefetch_bias asking for the NEXT tile's lines, a whole iteration ahead, instead of the current
# tile's just before the wait for S: fwd_wgmma.cuh's two `prefetch_bias(p, w, warp, g, t, n0)`
# calls replaced by `if (it + 1 < w.it_end) prefetch_bias(p, w, warp, g, t, w.tile(p, it + 1) * kBN)`).
# Result: slower, not kept (bench/results/2026-12-06-h100-session47/call3/).
#   1. both bias cases (gpt2 4k, fp32 and 16-bit bias), ours only, two interleaved rounds;
#   2. the GPU tests that run bias programs on `ahead`, as time allows.
# CAP bounds the whole (default 200 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-200}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. additive bias, ours only, two rounds (base: prefetch of the current tile; ahead: of the next)"
for round in 1 2; do
  for v in base ahead; do
    ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kd/$v ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout "$(left 40)" \
      python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so --suite full --filter "additive bias" \
      --ours-only > "$W/bias_${v}_r$round.log" 2>&1
    say "r$round $v rc=$?"
    grep -E '^additive bias.*attnfuse' "$W/bias_${v}_r$round.log" | cut -c1-120 >> "$D"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. GPU tests with bias programs on ahead"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kd/ahead \
  GTEST_FILTER='CudaForward.AdditiveBiasAtEdgeTiles:CudaDecode.EveryCombinator' gpu_suite_sharded "$(left 150)" 4
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
