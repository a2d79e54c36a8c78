#!/usr/bin/env bash
# Twenty-fifth session, last call: the whole GPU suite (8 shards) on the final tree, with lazy
# rescaling and the split count as one acq_rel atomic in src/ (build here: bash
# bench/make_device_carry.sh; device: bash bench/sessions/run_gpu_session25_third.sh, carry .devcarry).
# CAP bounds the whole (default 300 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-300}
say "== the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 290)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
