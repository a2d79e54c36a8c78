#!/usr/bin/env bash
# The eighteenth session's third device call: masked cells test a per-row key range
# (attention_fwd.cuh, key_range), which frees the registers that let the 192-row tile take the
# producer warpgroup under causal and window masks, and the D = 128 two-sided window take it:
#   1. the whole GPU test suite, four shards at once (the masking code is every kernel's);
#   2. CLI A/B, two interleaved rounds: old = .devcarry-base (the previous commit: causal 192 rows
#      with the loader thread, windows on 128 rows), new = this tree, new_noprod = this tree
#      without the producer, new_128 = this tree on 128-row tiles (D = 64 cases only);
#   3. bench/gpu_peers.py --suite full.
# Expects .devcarry (this tree) and .devcarry-base (the commit before) from
# bench/make_device_carry.sh. CAP bounds the whole (default 560 s). Digest $OUT/digest.txt,
# logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
L=.devcarry/lib/libattnfuse_c.so

say "== 1. test_gpu, 4 shards"
gpu_suite_sharded "$(left 230)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. CLI A/B"
C='softmax(causal(scaled_dot_product(Q, K))) @ V'
P='softmax(scaled_dot_product(Q, K)) @ V'
CW='softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V'
TW='softmax(sliding_window(scaled_dot_product(Q, K), 256)) @ V'
G=4,12,12 LL=1,32,8
mkdir -p "$W/ab64" "$W/ab128"
CASES="$C|$G,32768,32768,64;$C|$G,8192,8192,64;$C|$G,4096,4096,64;$CW|$G,8192,8192,64;$TW|$G,8192,8192,64;$P|$G,8192,8192,64" \
  ROUNDS=2 OUT=$W/ab64 timeout "$(left 150)" bash bench/run_gpu_cli_ab.sh old=bin:.devcarry-base base \
  new_noprod=env:ATTNFUSE_CUDA_WGMMA_PRODUCER=0 new_128=env:ATTNFUSE_CUDA_WGMMA_TILE=128,1,4,128 > "$W/ab64/summary.txt" 2>&1
cat "$W/ab64/summary.txt" >> "$D"
CASES="$C|$LL,8192,8192,128;$TW|$LL,8192,8192,128;$CW|$LL,8192,8192,128" \
  ROUNDS=2 OUT=$W/ab128 timeout "$(left 70)" bash bench/run_gpu_cli_ab.sh old=bin:.devcarry-base base \
  new_noprod=env:ATTNFUSE_CUDA_WGMMA_PRODUCER=0 > "$W/ab128/summary.txt" 2>&1
cat "$W/ab128/summary.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. gpu_peers.py --suite full"
timeout "$(left 100)" python3 bench/gpu_peers.py --lib $L --suite full --out "$W/peers_full.json" 2>&1 \
  | grep -v Warning > "$W/peers_full.log"
tail -25 "$W/peers_full.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
