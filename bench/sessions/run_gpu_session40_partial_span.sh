#!/usr/bin/env bash
# Fortieth session, fourth call: the fixed-unit rotation for partial rotary spans whose pair
# units number a power of two (Spec::kRopeHalf = rotary_dim / 2, its log2 in the module key).
# Carry: bash bench/make_device_carry.sh && strip .devcarry/attnfuse .devcarry/test_gpu;
#   rm -f .devcarry/lib/libattnfuse_c.so .devcarry/dispatch_bench;
#   mkdir -p .devcarry/old && cp <the CLI of call2, whole spans only> .devcarry/old/attnfuse
# Run: bash bench/sessions/run_gpu_session40_partial_span.sh
#   1. the whole GPU suite in 8 shards (limit LIMIT, default 230 s);
#   2. old / new, two interleaved rounds, ms: fused RoPE with rotary_dim 64 of 128 (neox, and
#      gptj as ChatGLM has it) and 32 of 128, Llama-3-8B geometry, 16k prefill and B8 / 32k decode.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== 1. the whole GPU suite"
gpu_suite_sharded "${LIMIT:-230}" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. old / new, ms (median of 30)"
H64='softmax(causal(rope(Q, K, base=500000, rotary_dim=64))) @ V'
G64='softmax(causal(rope(Q, K, base=10000, style=gptj, rotary_dim=64))) @ V'
H32='softmax(causal(rope(Q, K, base=10000, rotary_dim=32))) @ V'
t() {  # cli program shape [args...]: the median ms of fused RoPE
  local c=$1 prog=$2 shape=$3
  shift 3
  timeout 60 "$c" bench "$prog" --shape "$shape" --dtype bf16 --device cuda --rope-mode fused --reps 30 --no-check "$@" 2>&1 |
    awk '$1=="fused"{print $2}'
}
cli_of() { case $1 in old) echo .devcarry/old/attnfuse ;; *) echo .devcarry/attnfuse ;; esac; }
for v in old new; do
  c=$(cli_of $v)
  export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
  for p in "$H64" "$G64" "$H32"; do
    "$c" bench "$p" --shape 1,32,8,777,777,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
    "$c" bench "$p" --shape 2,32,8,1,4099,128 --dtype bf16 --device cuda --rope-mode fused --reps 3 >> "$W/check_$v.log" 2>&1
  done
  say "check $v: $(grep -cE '^ +PASS' "$W/check_$v.log") PASS of 6"
done
for round in 1 2; do
  for v in old new; do
    c=$(cli_of $v)
    export ATTNFUSE_CACHE_DIR=/tmp/cache-$v
    say "round $round $v: neox 64/128 prefill 16k $(t $c "$H64" 1,32,8,16384,16384,128) B8 $(t $c "$H64" 8,32,8,1,32768,128) | gptj 64/128 prefill $(t $c "$G64" 1,32,8,16384,16384,128) B8 $(t $c "$G64" 8,32,8,1,32768,128) | neox 32/128 prefill $(t $c "$H32" 1,32,8,16384,16384,128) B8 $(t $c "$H32" 8,32,8,1,32768,128)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
