#!/usr/bin/env bash
# The thirtieth session's sixth device call: unsplit paged calls keep three stages of 128 keys
# (the fifth call had two stages 3% slower at 8B B32 / 32k, pages of 64), so paged calls take the
# modules of the build before the two-stage change again. The paged suite, ours only, two
# interleaved rounds: base (.devcarry-base, the third and fourth calls' build) against new.
# CAP bounds the whole (default 130 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-130}
SUITE=paged AB=paged decode_ab "$(left 125)" base=.devcarry-base new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
