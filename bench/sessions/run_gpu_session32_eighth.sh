#!/usr/bin/env bash
# The thirty-second session's eighth device call, on the first call's build (carry .devcarry) with
# two template folders: .devcarry/kP (the tree with the K/V tensor maps prefetched at kernel entry,
# `prefetch.tensormap` before the grid dependency wait) and .devcarry/kprodP (kP with the phase
# probe and the producer stamps of the seventh call).
#   1. decode and paged suites, ours only, two interleaved rounds: the build's templates / kP;
#   2. the whole GPU suite on kP (ATTNFUSE_KERNEL_DIR), 8 shards;
#   3. the phase probe with producer stamps on kprodP, 70B B1 / 32k contiguous and pages of 16
#      settled.
# CAP bounds the whole (default 500 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-500}
KP=$PWD/.devcarry/kP
say "== 1. decode and paged: current templates / tensor maps prefetched, ours only, two rounds"
for s in decode paged; do
  OUT=$W/ab_$s QUICK=0 ROUNDS=2 SUITE=$s timeout "$(left 120)" bash bench/run_gpu_decode_ab.sh \
    cur=.devcarry prefetch=.devcarry+ATTNFUSE_KERNEL_DIR=$KP > "$W/${s}_ab.txt" 2>&1
  say "$s rc=$?"
  cut -c1-170 "$W/${s}_ab.txt" >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. the whole GPU suite on the prefetching templates, 8 shards"
ATTNFUSE_KERNEL_DIR=$KP gpu_suite_sharded "$(left 260)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. phase probe with producer stamps, prefetching templates"
for ps in 0 16s; do
  [ "$(left 60)" -lt 25 ] && break
  producer_probe "prodP_$ps" "$PWD/.devcarry/kprodP" "$ps" 40
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
