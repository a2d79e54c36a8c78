#!/usr/bin/env bash
# The twenty-ninth session's second device call (carry .devcarry and .devcarry-base as for the
# first): the group-state read moved an iteration ahead and skipped for full-block masks.
#   1. the CudaSparse GPU tests on the new build, 8 shards;
#   2. BigBird, ours only, base (HEAD) against new, two interleaved rounds;
#   3. Nsight Compute on one 4k 64-block BigBird launch: ours, then flex's (64-row tiles).
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. CudaSparse.*, 8 shards"
GTEST_FILTER='CudaSparse.*' gpu_suite_sharded "$(left 200)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. BigBird base / new, ours only"
suite_ab bigbird 'bigbird' 60
tar czf "$OUT/logs.tgz" -C "$W" .
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
KEYS="Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Waves Per SM|Stall|Issued|Eligible|Active Warps|No Eligible|SM Active|Elapsed Cycles"
for who in ours flex; do
  say "== 3. ncu bigbird 4k b64: $who"
  if [ $who = ours ]; then
    k=regex:attnfuse_fwd args=(--ours-only)
  else
    k="regex:triton_tem|flex_attention" args=(--peers flex)
  fi
  timeout "$(left 150)" ncu --clock-control none -k "$k" --launch-skip 5 --launch-count 1 $SECTIONS \
    python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite bigbird --quick --bigbird-block 64 \
    "${args[@]}" --out "$W/ncu_$who" > "$W/ncu_$who.txt" 2>&1
  say "rc=$?"
  grep -E "$KEYS" "$W/ncu_$who.txt" | head -50 >> "$D"
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "done in ${SECONDS}s"
