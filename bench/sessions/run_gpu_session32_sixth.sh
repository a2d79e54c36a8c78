#!/usr/bin/env bash
# The thirty-second session's sixth device call, on the first call's build (carry .devcarry, with
# .devcarry/kvarA: the templates of cc3ebcb whose producer warp, with a settled table, looks up
# every stage's first tile before the grid dependency wait and issues them all after it, instead
# of the first tile only):
#   1. the paged suite, ours only, three interleaved rounds, the build's own templates against
#      kvarA through ATTNFUSE_KERNEL_DIR;
#   2. the settled-table and producer-tile GPU tests on kvarA.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-500}
say "== 1. paged suite: current / variant A, ours only, three rounds"
OUT=$W/ab QUICK=0 ROUNDS=3 SUITE=paged timeout "$(left 200)" bash bench/run_gpu_decode_ab.sh \
  cur=.devcarry varA=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kvarA > "$W/paged_ab.txt" 2>&1
say "rc=$?"
cut -c1-170 "$W/paged_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. settled and producer-tile tests on variant A"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kvarA gpu_tests varA_tests \
  'CudaDecode.PagedSettledTablesChainCallsOnOneStream:CudaDecode.PagedShortPartsAtSmallPagesTakeTheProducerTile' "$(left 280)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
