#!/usr/bin/env bash
# The thirty-second session's seventh device call, on the first call's build (carry .devcarry, with
# .devcarry/kprod: cc3ebcb's templates with bench/experiments/decode_phase_probe.patch and producer
# stamps, see bench/experiments/README.md): where a settled paged 70B call's prologue goes.
# 70B B1 / 32k, contiguous and pages of 64 / 16, as is and settled, 40 graph-captured calls each.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-300}
for ps in 0 64 64s 16 16s; do
  n=prod_$ps settled=()
  [[ $ps == *s ]] && settled=(--settled) && ps=${ps%s}
  paged=()
  [ "$ps" != 0 ] && paged=(--page-size "$ps")
  ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kprod ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-prod \
    timeout "$(left 60)" python3 bench/ncu_decode_target.py ours 1,64,8,32768 --calls 40 --sets 2 --graph \
    "${paged[@]}" "${settled[@]}" --lib .devcarry/lib/libattnfuse_c.so > "$W/$n.raw" 2>&1
  say "== 1,64,8,32768 $n"
  python3 bench/decode_phase_probe.py "$W/$n.raw" --warmup 4 2>&1 | grep -E "pre|loop  " | tee -a "$D"
  python3 bench/experiments/producer_probe_summary.py "$W/$n.raw" --warmup 4 2>&1 | tee -a "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
