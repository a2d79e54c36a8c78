#!/usr/bin/env bash
# One device call: the whole CudaDecode GPU suite at this build, then the paged sweep (8B B8 and
# B32, 70B B1; pages of 16 and 64, each against the contiguous call in the same process) and the
# quick decode sweep, ours only, validated before timed. Digest in $OUT/digest.txt, logs and
# the sweeps' JSON in $OUT/logs.tgz. Expects .devcarry/ from bench/make_device_carry.sh. CAP
# (470): the seconds after which the sweeps are not started.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
digest_init  # $W, $D, say (device_env.sh)

say "== 1. GPU tests: CudaDecode.*"
gpu_tests tests 'CudaDecode.*' $((${CAP:-470} - 90))
grep -E '^\[       OK' "$W/tests.log" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

for suite in paged decode; do
  left=$((${CAP:-470} - SECONDS)); [ $left -lt 20 ] && { say "== $suite: no time left"; continue; }
  say "== $suite sweep (ours only)"
  timeout $left python3 bench/gpu_decode.py --lib $L --suite $suite --ours-only $([ $suite = decode ] && echo --quick) \
    --out "$W/$suite" > "$W/$suite.log" 2>&1
  say "rc=$?"; grep -E "attnfuse" "$W/$suite.log" | grep -v "^#" | tee -a "$D" >/dev/null
  tar czf "$OUT/logs.tgz" -C "$W" .
done
