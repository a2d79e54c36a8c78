#!/usr/bin/env bash
# Twenty-sixth session, last call, on the final tree (build here: bash bench/make_device_carry.sh;
# the build before this session's kernel changes, bf52371, copied to .devcarry-base; carry
# .devcarry and .devcarry-base). The kernel changes: the paged producer warp issues only its first
# tile before the block barrier, the page table is read under an L2 evict_last policy, and the
# split merge loads 16 parts' rows at once (D <= 128).
#   1. the whole GPU suite, 8 shards;
#   2. gpu_decode.py --suite all on this build (decode with the peers, paged, BigBird, documents);
#   3. decode_ab, base (.devcarry-base) against this build, on SUITE=paged and SUITE=decode.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_decode.py --suite all"
peer_sweep all all "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. A/B against the base build: paged"
AB=paged SUITE=paged decode_ab "$(left 100)" base=.devcarry-base final=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. A/B against the base build: decode"
SUITE=decode decode_ab "$(left 120)" base=.devcarry-base final=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
