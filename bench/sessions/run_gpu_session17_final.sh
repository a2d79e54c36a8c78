#!/usr/bin/env bash
# The seventeenth session's last device call, at the final tile rule (the wgmma producer
# warpgroup on every one-block-per-SM wgmma tile but D = 64 causal and the D = 128 two-sided
# window) and with the decode producer warp zeroing paged tail rows itself:
#   1. the GPU tests the third call's time limit cut (block-sparse prefill at D = 128 with the
#      producer, the in-kernel merge of cut rows behind exited producer warps);
#   2. racecheck and the decode tests with ATTNFUSE_CUDA_DECODE_PRODUCER=1 (the first two calls
#      found hazards between the computing warps' tail-row zeroing and other warps' V reads);
#   3. bench/gpu_rope.py --suite peers (GPT-2 back on the loader-thread tile).
# BigBird (the two-blocks-per-SM block-sparse tile at D = 64) and documents (cp.async) run the
# kernels they ran before, so they are not re-timed. CAP bounds the whole (default 470 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-470}  # left (device_env.sh) bounds each step by it
L=.devcarry/lib/libattnfuse_c.so

say "== 1. the sparse tests the third call did not reach"
gpu_tests sparse 'CudaSparse.DocumentsDecodeSizedPackedBatch:CudaSparse.DocumentRefusals:CudaSparse.DocumentsAutoRopePlacementIsFused:CudaSparse.BlockSparse*' "$(left 170)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. decode producer: tests and racecheck"
ATTNFUSE_CUDA_DECODE_PRODUCER=1 gpu_tests decode_producer 'CudaDecode.SanitizerSubset:CudaDecode.PagedTma*:CudaDecode.RowsThatKeepNothing' "$(left 60)"
ATTNFUSE_CUDA_DECODE_PRODUCER=1 ATTNFUSE_NVRTC_LINEINFO=1 timeout "$(left 60)" compute-sanitizer --tool racecheck \
  --error-exitcode 9 .devcarry/test_gpu --gtest_filter='CudaDecode.SanitizerSubset' > "$W/race_decode_producer.log" 2>&1
say "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$W/race_decode_producer.log" | head -3 | tr '\n' ' ')"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. gpu_rope.py --suite peers"
timeout "$(left 100)" python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse --suite peers \
  --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
grep -E "rope_auto|\+rot" "$W/rope_peers.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
