#!/usr/bin/env bash
# A session's first device call on the current tree (build here: bash bench/make_device_carry.sh;
# carry .devcarry). Written in the thirtieth session: the whole suite last ran on 3afc5e5
# (settled page tables), CudaDecode.* on the decode changes after it (1024 staged page ids, two
# stages for unsplit contiguous calls), and the chained-call GPU tests were refactored onto
# run_chain / check_chain after the session's device time was spent.
#   1. the whole GPU suite, 8 shards;
#   2. gpu_decode.py --suite all with the peers (the paged suite includes the _settled rows);
#   3. the phase probe at 70B B1 / 32k: contiguous, and pages of 64 and 16 with and without a
#      settled table (where do the paged calls' 2-4 µs still go?).
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_decode.py --suite all"
peer_sweep all all "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. the decode phase probe, 70B B1 / 32k"
CELLS="1,64,8,32768" PDLS="1" decode_phases "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" --exclude='phases/k_probe' .
say "done in ${SECONDS}s"
