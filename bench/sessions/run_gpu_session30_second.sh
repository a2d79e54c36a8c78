#!/usr/bin/env bash
# The thirtieth session's second device call: paged calls that read a settled page table before
# the grid dependency wait (PagedKV::table_settled, attnfuse_args.paged_table_settled). Build:
# bash bench/make_device_carry.sh, then the kernel templates of the commit before the change in
# .devcarry/kbase (git show <base>:src/codegen/cuda/kernels/<F>.cuh; the host-side FwdParams gained
# one int in what was padding, so the base templates read the same layout). Carry .devcarry.
#   1. the whole GPU suite, 8 shards (CudaDecode.PagedSettledTablesChainCallsOnOneStream is new);
#   2. the paged suite, ours only, two interleaved rounds: the base kernels (the library's new
#      host side with ATTNFUSE_KERNEL_DIR=.devcarry/kbase, where the _settled rows run as plain
#      ones) against the new kernels;
#   3. gpu_decode.py --suite all with the peers.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged suite: base kernels / new kernels (with and without a settled table), ours only"
SUITE=paged AB=paged decode_ab "$(left 150)" base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all"
peer_sweep all all "$(left 170)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
