#!/usr/bin/env bash
# Written in the twenty-fifth session for the next device call (not yet run), on the final tree
# of that session (build here: bash bench/make_device_carry.sh; carry .devcarry):
#   1. CudaForward.ScoresRisingAndFallingAcrossTiles, lazy rescaling's GPU test (written after the
#      device budget was spent);
#   2. bench/run_gpu_decode_phases.sh: the decode phases, now with the split merge's own phases
#      (MERGE lines) and 70B B1 over paged caches of 64 and 16 rows;
#   3. gpu_decode.py --suite all on this build (decode with the peers, paged, BigBird, documents),
#      the first peer sweep with the acq_rel split count.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. lazy rescaling's GPU test"
gpu_tests ramp 'CudaForward.ScoresRisingAndFallingAcrossTiles' "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode phases (merge sub-phases, paged 70B)"
decode_phases "$(left 260)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all"
peer_sweep all all "$(left 120)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
