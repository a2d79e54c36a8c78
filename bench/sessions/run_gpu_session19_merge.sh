#!/usr/bin/env bash
# The nineteenth session's first device call: the decode variant's block-wide split merge
# (SplitMerge::block_rows: every part's rows to shared memory by cp.async in one group, one
# memory latency) against the row-per-warp merge of .devcarry-base (commit ab9be50):
#   1. the decode and block-sparse GPU tests on the new build;
#   2. decode A/B, every cell of bench/gpu_decode.py's decode suite, two interleaved rounds;
#   3. paged A/B (quick cells: 8B B8 32k, 70B B1 32k), two rounds.
# CAP bounds the whole (default 420 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-420}
say "== 1. tests"
gpu_tests decode 'CudaDecode.*:CudaSparse.*' "$(left 170)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=2 timeout "$(left 200)" bash bench/run_gpu_decode_ab.sh base=.devcarry-base new=.devcarry \
  > "$W/decode_ab_summary.txt" 2>&1
cat "$W/decode_ab_summary.txt" | cut -c1-150 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. paged A/B"
OUT=$W/abp SUITE=paged ROUNDS=2 timeout "$(left 120)" bash bench/run_gpu_decode_ab.sh base=.devcarry-base new=.devcarry \
  > "$W/paged_ab_summary.txt" 2>&1
cat "$W/paged_ab_summary.txt" | cut -c1-150 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
