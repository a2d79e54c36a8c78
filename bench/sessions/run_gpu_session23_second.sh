#!/usr/bin/env bash
# Twenty-third session, second call (build here: bash bench/make_device_carry.sh; carry .devcarry
# and .devcarry-abl): rope_window with the next tile's cut made at the end of each iteration
# (this build) against the previous tree (.devcarry-abl/old) and the cut made between the QK and
# P V issues (.devcarry-abl/cutB), then the whole GPU suite on this build.
#   0. the rope_window GPU tests;
#   1. attnfuse bench, median ms, N 8k and 32k, two interleaved rounds;
#   2. the whole GPU suite, 8 shards.
# CAP bounds the whole (default 520 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-520}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on the carried build"
gpu_tests rope_window '*RopeWindow*' "$(left 120)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2; do
  for n in 8192 32768; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    for k in 1 1e6; do
      window_bench new_k$k - "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
      window_bench cutB_k$k cutB "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
      window_bench old_k$k old "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
    done
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
