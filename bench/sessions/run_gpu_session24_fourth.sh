#!/usr/bin/env bash
# Twenty-fourth session, fourth call (carry .devcarry built at the previous commit, and
# .devcarry-abl/half with this tree's kernels): rope_window's corrections of the lower half of
# keys only, where causal masks the upper half for the warp's rows (the diagonal tiles), without
# the third call's qa change, against the carried build.
#   0. the rope_window tests on half/;
#   1. attnfuse bench, median ms, N 8k and 32k (k = 1), three interleaved rounds.
# CAP bounds the whole (default 200 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-200}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on .devcarry-abl/half"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/half gpu_tests rope_window_half '*RopeWindow*' "$(left 80)"
say "== 1. rope_window timings (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2 3; do
  for n in 8192 32768; do
    window_bench k1_build - "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench k1_half half "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
