#!/usr/bin/env bash
# The twentieth session's device call on programmatic dependent launch (PDL: every kernel waits
# on griddepcontrol.wait before touching memory, then lets the next grid be scheduled; the
# runtime launches with the attribute unless ATTNFUSE_CUDA_PDL=0):
#   1. the chained-calls test (RAW on Q, WAR on the split workspace, on/off bit equality);
#   2. decode A/B, PDL on (.devcarry) against off (same build, ATTNFUSE_CUDA_PDL=0), ours only,
#      every decode cell, three interleaved rounds; then the paged cells, two rounds;
#   3. the whole GPU suite in four shards;
#   4. bench/gpu_decode.py --suite all (decode with the peers in the same process, paged,
#      BigBird, documents) with PDL on, as far as CAP leaves time.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. chained dependent launches"
gpu_tests pdl_chain 'CudaDecode.DependentLaunches*' "$(left 90)"
say "== 2a. decode A/B, PDL on vs off"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 120)" bash bench/run_gpu_decode_ab.sh on=.devcarry off=.devcarry+ATTNFUSE_CUDA_PDL=0 \
  > "$W/decode_ab_summary.txt" 2>&1
cut -c1-150 "$W/decode_ab_summary.txt" | tee -a "$D"
say "== 2b. paged A/B, PDL on vs off"
OUT=$W/ab_paged SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 80)" bash bench/run_gpu_decode_ab.sh on=.devcarry off=.devcarry+ATTNFUSE_CUDA_PDL=0 \
  > "$W/paged_ab_summary.txt" 2>&1
cut -c1-150 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. GPU suite"
gpu_suite_sharded "$(left 260)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. all suites with the peers, PDL on"
peer_sweep all all "$(left 200)"
tar czf "$OUT/logs.tgz" -C "$W" .
