#!/usr/bin/env bash
# The thirty-second session's first device call (build here: bash bench/make_device_carry.sh, and
# the base kernel templates of 1df9bd2 in .devcarry/kbase; carry .devcarry). The change: with a
# settled page table the decode producer warp looks up its first tile's pages before the grid
# dependency wait (attention_fwd.cuh, producer / lookup_tile_pages / tma_kv_pages).
#   1. the whole GPU suite, 8 shards;
#   2. the paged suite, ours only, three interleaved rounds: the base kernels (the same library
#      with ATTNFUSE_KERNEL_DIR=.devcarry/kbase) against the new ones.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 260)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged suite: base kernels / new kernels, ours only, three rounds"
OUT=$W/ab QUICK=0 ROUNDS=3 SUITE=paged timeout "$(left 250)" bash bench/run_gpu_decode_ab.sh \
  base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry > "$W/paged_ab.txt" 2>&1
say "rc=$?"
cut -c1-170 "$W/paged_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
