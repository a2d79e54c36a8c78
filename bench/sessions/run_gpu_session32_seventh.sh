#!/usr/bin/env bash
# The thirty-second session's seventh device call, on the first call's build (carry .devcarry, with
# .devcarry/kprod: cc3ebcb's templates with bench/experiments/decode_phase_probe.patch and producer
# stamps, see bench/experiments/README.md): where a settled paged 70B call's prologue goes.
# 70B B1 / 32k, contiguous and pages of 64 / 16, as is and settled, 40 graph-captured calls each.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-300}
for ps in 0 64 64s 16 16s; do
  producer_probe "prod_$ps" "$PWD/.devcarry/kprod" "$ps" 60
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
