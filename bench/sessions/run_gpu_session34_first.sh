#!/usr/bin/env bash
# The thirty-fourth session's first device call, on the carried build of 0271485:
#   1. the whole GPU suite, 8 shards (the thirty-third session's last call reached 50 of 60 tests
#      before its limit; the split decode test files have not yet run on a GPU);
#   2. the prepared settled-table page warm (bench/experiments/paged_settled_tlb_warm.patch):
#      paged decode tests on the patched templates, then the paged suite, ours only, three
#      interleaved rounds: the build's templates / patched.
# CAP bounds the whole (default 580 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 230)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
K=$PWD/.devcarry/kwarm
rm -rf "$K" && mkdir -p "$K" && cp src/codegen/cuda/kernels/*.cuh "$K/"
patch -p5 -d "$K" < bench/experiments/paged_settled_tlb_warm.patch > "$W/patch.log" 2>&1 || { say "patch failed"; cat "$W/patch.log" >> "$D"; exit 1; }
say "== 2a. paged decode tests on the patched templates"
ATTNFUSE_KERNEL_DIR=$K ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-kwarm gpu_tests paged 'CudaDecode.Paged*' "$(left 140)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2b. paged: the build's templates / warmed pages, ours only, three rounds"
OUT=$W/ab_paged QUICK=0 ROUNDS=3 SUITE=paged timeout "$(left 10)" bash bench/run_gpu_decode_ab.sh \
  cur=.devcarry warm=.devcarry+ATTNFUSE_KERNEL_DIR=$K > "$W/paged_ab.txt" 2>&1
say "paged rc=$?"
sed -E 's/ +/ /g' "$W/paged_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
