#!/usr/bin/env bash
# The thirty-third session's fourth device call, on the carried build (.devcarry: the in-launch
# merges moved out of attention_fwd.cuh into block_merge.cuh, BlockMerge<FwdKernel>, and
# CudaKernel's plan and launch into cuda_plan.cpp and cuda_launch.cpp; no change meant) with
# a176688's kernel templates in .devcarry/kbase (plus a copy of block_merge.cuh, which they never
# include: ATTNFUSE_KERNEL_DIR must hold every template the library embeds).
#   1. the whole GPU suite, 8 shards;
#   2. decode, paged and bigbird suites, ours only, two interleaved rounds: kbase / the build's.
# CAP bounds the whole (default 540 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 260)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode, paged, bigbird: a176688's templates / block_merge.cuh, ours only, two rounds"
for s in decode paged bigbird; do
  OUT=$W/ab_$s QUICK=0 ROUNDS=2 SUITE=$s timeout "$(left 110)" bash bench/run_gpu_decode_ab.sh \
    base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry > "$W/${s}_ab.txt" 2>&1
  say "$s rc=$?"
  sed -E 's/ +/ /g' "$W/${s}_ab.txt" >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
