#!/usr/bin/env bash
# One device call: gpu_decode.py --suite all with the peers on the carried build (.devcarry, from
# bash bench/make_device_carry.sh): decode against cuDNN / FA2 / flex, paged against contiguous,
# BigBird against flex, documents and varlen decode against flex / FA2 varlen; validated before
# timed. CAP (default 300) bounds it. Digest $OUT/digest.txt, logs and JSON in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-300}
say "== gpu_decode.py --suite all"
peer_sweep all all "$(left 600)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
