#!/usr/bin/env bash
# The twentieth session's last device call, on the final build (programmatic dependent launch for
# decode calls whose blocks stream at most 4096 keys, runtime::kDependentLaunchMaxKeys):
#   1. the whole GPU suite in four shards;
#   2. bench/gpu_decode.py --suite all (decode with the peers in the same process, paged,
#      BigBird, documents);
#   3. decode A/B, the final rule against ATTNFUSE_CUDA_PDL=0 (same build), two rounds.
# CAP bounds the whole (default 450 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-450}
say "== 1. GPU suite"
gpu_suite_sharded "$(left 230)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. all suites with the peers"
peer_sweep all all "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode A/B, final rule vs off"
OUT=$W/ab QUICK=0 ROUNDS=2 timeout "$(left 100)" bash bench/run_gpu_decode_ab.sh final=.devcarry \
  off=.devcarry+ATTNFUSE_CUDA_PDL=0 > "$W/decode_ab_summary.txt" 2>&1
cut -c1-170 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
