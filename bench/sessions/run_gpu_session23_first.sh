#!/usr/bin/env bash
# Twenty-third session, first call (build here: bash bench/make_device_carry.sh; carry .devcarry):
#   1. rope_window ablations (bench/make_window_ablations.sh, carry .devcarry-abl too): time at
#      N 8k and 32k, two interleaved rounds, of plain rope, rope_window at k = 1 and k = 1e6 (the
#      carried build's kernels, and the previous tree's in .devcarry-abl/old: the corrections by
#      fragment and the shared lead-step registers against the per-cell ones), and the ablation
#      kernels made from the previous tree (no corrections; no window_cut with the whole QK chain
#      or half of it);
#   1b. bench/gpu_rope.py --suite window at every N with this build's kernels;
#   2. Nsight Compute on the rope_window prefill kernel at the Llama-3.2-3B geometry, N 8k,
#      k = 1 (pruning) against k = 1e6 (nothing pruned) and plain rope: warp stall reasons,
#      issue slots, pipe use and per-SASS stall samples, to find what binds a windowed tile.
#   3. the whole GPU suite, 8 shards (WITH_SUITE=0 leaves it out).
# CAP bounds the whole (default 520 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-520}
R=$LLAMA32_ROPE
say "== 0. the rope_window GPU tests on the carried build"
gpu_tests rope_window '*RopeWindow*:*Rope*Window*' "$(left 120)"
say "== 1. rope_window ablations (median ms of attnfuse bench, bf16, B1 Hq24 Hkv8 D128)"
for round in 1 2; do
  for n in 8192 32768; do
    window_bench rope - "softmax(causal(rope(Q, K, $R))) @ V" $n
    window_bench window_k1 - "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench window_k1e6 - "softmax(causal(rope_window(Q, K, k=1e6, $R))) @ V" $n
    window_bench old_window_k1 old "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench old_window_k1e6 old "softmax(causal(rope_window(Q, K, k=1e6, $R))) @ V" $n
    window_bench nocorr_k1 nocorr "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench lead0 lead0 "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
    window_bench lead4 lead4 "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" $n
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 1b. gpu_rope.py --suite window (every N, this build's kernels)"
window_suite "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. ncu on the rope_window kernel"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
say "ncu: $NCU $($NCU --version 2>&1 | tail -1)"
prof() {  # name, program, rope mode
  timeout "$(left 90)" "$NCU" --clock-control none -k regex:attnfuse_fwd --launch-skip 1 --launch-count 1 \
    --set full --import-source no -o "$W/$1" -f \
    .devcarry/attnfuse bench "$2" --shape 1,24,8,8192,8192,128 --dtype bf16 --rope-mode "$3" --no-check --reps 2 \
    > "$W/$1.run.log" 2>&1
  say "$1 rc=$?"
  "$NCU" -i "$W/$1.ncu-rep" --page details > "$W/$1.details.txt" 2>&1
  "$NCU" -i "$W/$1.ncu-rep" --page raw --csv > "$W/$1.raw.csv" 2>&1
  "$NCU" -i "$W/$1.ncu-rep" --page source --print-source sass --csv > "$W/$1.sass.csv" 2>&1
  grep -E "Duration|Issue Slots Busy|No Eligible|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput" \
    "$W/$1.details.txt" | head -14 >> "$D"
  cp "$W/$1.ncu-rep" "$OUT/" 2>/dev/null
  tar czf "$OUT/logs.tgz" -C "$W" .
}
prof window_k1 "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" auto
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/old prof old_window_k1 "softmax(causal(rope_window(Q, K, k=1, $R))) @ V" auto
if [ "${WITH_SUITE:-1}" = 1 ]; then
  say "== 3. GPU suite, 8 shards"
  gpu_suite_sharded "$(left 240)" 8
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
