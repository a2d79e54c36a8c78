#!/usr/bin/env bash
# Forty-fourth session: the padded cp.async tile's rescheduled SASS, never timed. Landing
# bench/experiments/rope_decode_tma64.patch (57a2bd7) changed only the TMA decode tile's source, but
# ptxas scheduled the padded cp.async tile (which D = 96 heads and sm_80 keep) differently; the
# forty-third session timed D = 96 only on builds from before the patch. "base" is the CLI at
# efa4e6e (before the patch), "new" the landed tree's.
# Carry (.devcarry from bench/make_device_carry.sh at HEAD, plus the base CLI):
#   git worktree add /tmp/base efa4e6e && cmake -S /tmp/base -B /tmp/base/build-dev -G Ninja
#     -DCMAKE_BUILD_TYPE=Release -DATTNFUSE_NATIVE=OFF && cmake --build /tmp/base/build-dev --target attnfuse_cli
#   mkdir -p .devcarry/base && strip -o .devcarry/base/attnfuse /tmp/base/build-dev/bin/attnfuse
# Run: bash bench/sessions/run_gpu_session44_d96.sh (carry .devcarry)
#   1. checks: each CLI's fused RoPE at D = 96 against the float64 reference (prefill, decode);
#   2. base / new, three interleaved rounds, ms (median of 30): Phi-3-mini (Hq = Hkv = 32, D = 96)
#      fused prefill 8k and decode B1 / B8 at 32k.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
PHI='softmax(causal(rope(Q, K, base=10000))) @ V'
say "== 1. checks"
for v in base new; do
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  ab_check $v "$PHI" 1,32,32,777,777,96
  ab_check $v "$PHI" 2,32,32,1,4099,96
  ab_check $v "$PHI" 3,32,32,2,1001,96
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 3"
done
say "== 2. D = 96 fused: base / new, ms"
for round in 1 2 3; do
  for v in base new; do
    c=$(ab_cli $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: phi3 prefill 8k $(fused_ms $c "$PHI" 1,32,32,8192,8192,96) | B1 32k $(fused_ms $c "$PHI" 1,32,32,1,32768,96) | B8 32k $(fused_ms $c "$PHI" 8,32,32,1,32768,96)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
