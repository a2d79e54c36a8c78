#!/usr/bin/env bash
# The nineteenth session's third device call: the split merge with two rows per warp merged
# together (SplitMerge::rows_of_warp<2>: Llama-3-70B's 8 heads per group on 4 warps) in .devcarry,
# against ab9be50 in .devcarry-base:
#   1. decode A/B, every cell of the decode suite, then paged quick cells, two interleaved rounds;
#   2. CudaDecode.* and the in-kernel merge tests of CudaSparse on the new build;
#   3. paged quick cells on ab9be50 with the decode producer warp and 128-key tiles forced;
#   4. the split/tile sweep of bench/sessions/run_gpu_session19_small_sweep.sh on ab9be50, with what time
#      is left.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=2 timeout "$(left 130)" bash bench/run_gpu_decode_ab.sh base=.devcarry-base new=.devcarry \
  > "$W/decode_ab_summary.txt" 2>&1
cut -c1-150 "$W/decode_ab_summary.txt" | tee -a "$D"
OUT=$W/abp SUITE=paged ROUNDS=2 timeout "$(left 60)" bash bench/run_gpu_decode_ab.sh base=.devcarry-base new=.devcarry \
  > "$W/paged_ab_summary.txt" 2>&1
cut -c1-150 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. tests"
gpu_tests decode 'CudaDecode.QueriesCachesGqaAndSplits:CudaDecode.InKernelMergeMatchesTheCombineKernelCallAfterCall:CudaDecode.RowsThatKeepNothing:CudaDecode.EveryCombinator:CudaDecode.PagedLongSequencesSplitAcrossPages:CudaSparse.BlockSparsePlanCutsRowsLongerThanTheAverageLoad:CudaDecode.HundredThousandKeys:CudaSparse.BlockSparseDecode' "$(left 230)"
grep -c '^\[       OK' "$W/decode.log" | sed 's/^/ok: /' | tee -a "$D"
grep '^\[  FAILED\|^\[ RUN' "$W/decode.log" | tail -2 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. paged on ab9be50: the producer warp with 128-key tiles at every page size"
rm -rf .devcarry && mv .devcarry-base .devcarry
OUT=$W/abk SUITE=paged ROUNDS=2 timeout "$(left 80)" bash bench/run_gpu_decode_ab.sh auto=.devcarry \
  prod128=.devcarry+ATTNFUSE_CUDA_DECODE_PRODUCER=1+ATTNFUSE_CUDA_DECODE_TILE=16,128,4,3,4 > "$W/paged_knobs.txt" 2>&1
cut -c1-150 "$W/paged_knobs.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. sweep on ab9be50"
CAP=$((CAP - SECONDS)) OUT=$W/sweep timeout "$(left 200)" bash bench/sessions/run_gpu_session19_small_sweep.sh > /dev/null 2>&1
cat "$W/sweep/small_sweep.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
