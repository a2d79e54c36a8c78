#!/usr/bin/env bash
# Written in the twenty-sixth session for the next device call (not yet run), on c864601's tree or
# later (build here: bash bench/make_device_carry.sh; carry .devcarry):
#   1. the whole GPU suite, 8 shards: the landed kernels (the paged producer's first-tile rule and
#      the L2-kept page table, with the merge as before) were run whole only together with the
#      reverted 16-part merge loads (session 26, call3), and by every decode and paged cell of
#      gpu_decode.py (validated before timing, call4);
#   2. gpu_decode.py --suite all: the README's paged table on the landed build;
#   3. the phase probe at 70B B1 / 32k, contiguous and paged, on the landed kernels.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_decode.py --suite all"
peer_sweep all all "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. phases at 70B B1 / 32k"
CELLS=1,64,8,32768 PDLS=1 decode_phases "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
