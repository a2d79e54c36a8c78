#!/usr/bin/env bash
# Twenty-third session, third call (build here: bash bench/make_device_carry.sh; carry .devcarry
# and .devcarry-abl with the previous commit's kernels in .devcarry-abl/prev): rope_window's
# per-cell window test as two compares against immediates (this build) against the previous
# commit and against .devcarry-abl/skipin (this build, with the fragments inside a pair's window
# skipped in its corrections), then the whole window suite with this build.
#   0. the rope_window GPU tests (with the ±2^29 refusal);
#   1. attnfuse bench, median ms, N 8k and 32k, two interleaved rounds;
#   2. bench/gpu_rope.py --suite window at every N.
# CAP bounds the whole (default 400 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on the carried build"
gpu_tests rope_window '*RopeWindow*' "$(left 100)"
say "== 0b. the same tests on .devcarry-abl/skipin (fragments inside a pair's window skipped)"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/skipin gpu_tests rope_window_skipin '*RopeWindow*' "$(left 100)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2; do
  for n in 8192 32768; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    for k in 1 1e6; do
      window_bench new_k$k - "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
      window_bench prev_k$k prev "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
      [ $k = 1 ] && window_bench skipin_k$k skipin "softmax(causal(rope_window(Q, K, k=$k, $R))) @ V" $n
    done
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_rope.py --suite window (every N, this build's kernels)"
window_suite "$(left 200)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
