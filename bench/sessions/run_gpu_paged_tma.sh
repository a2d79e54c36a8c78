#!/usr/bin/env bash
# One device call (sixteenth session) that checks and times three paged-decode changes against the
# build before them (.devcarry-base):
#   - split calls copying pages by TMA take the deep module over long parts too (before: parts of
#     at most passes::kPagedDeepMaxTiles); `base_long` gives the base build the same rule through
#     ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES, so `new` against it isolates the next change;
#   - the decode kernel issues its first TMA tiles before it stages the page list and before the
#     block barrier (attention_fwd.cuh), for the fixed cost per call, paged or contiguous;
#   - `unsplit`: unsplit paged calls (8B B32) through the TMA module (ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=1).
# The GPU tests first (paged tests again with the unsplit knob), then the A/Bs, validated before timed.
# Everything lands in $OUT/digest.txt and $OUT/logs.tgz (the device returns at most 8 files).
# Expects .devcarry/ and .devcarry-base/ from bench/make_device_carry.sh. CAP (540): the seconds
# after which the last step is not started.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
digest_init  # $W, $D, say (device_env.sh)

say "== 1. GPU tests: paged decode, the decode launch plan, contiguous decode by TMA"
gpu_tests tests \
  'CudaDecode.Paged*:CudaDecode.LaunchPlanOfALlama3Step:CudaDecode.QueriesCachesGqaAndSplits:CudaDecode.HundredThousandKeys' 200

say "== 2. the paged tests with unsplit calls by TMA (ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=1)"
ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=1 gpu_tests tests_unsplit \
  'CudaDecode.PagedLayouts*:CudaDecode.PagedTma*:CudaDecode.PagedPageLists*:CudaDecode.PagedEveryCombinator' 100
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. paged (8B B8 and B32, 70B B1; pages of 16 and 64)"
OUT=$W/paged_ab SUITE=paged QUICK=0 ROUNDS=2 timeout 240 bash bench/run_gpu_decode_ab.sh \
  base=.devcarry-base base_long=.devcarry-base+ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES=1000000 new=.devcarry \
  unsplit=.devcarry+ATTNFUSE_CUDA_PAGED_TMA_UNSPLIT=1 2>&1 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 4. contiguous decode: the first copies before the block barrier (new) against base"
left=$((${CAP:-540} - SECONDS)); [ $left -lt 40 ] && left=1
OUT=$W/decode_ab SUITE=decode ROUNDS=2 timeout $left bash bench/run_gpu_decode_ab.sh \
  base=.devcarry-base new=.devcarry 2>&1 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
