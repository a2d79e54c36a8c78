#!/usr/bin/env bash
# The thirty-third session's fifth device call: the fourth again after its fix. In the fourth,
# block_merge.cuh called neg_inf(), then defined in attention_fwd.cuh after its includes, so every
# kernel that instantiates the key-warp merge failed to compile (neg_inf, kLn2 and kLog2e now live
# in primitives.cuh). On the carried build with a176688's templates in .devcarry/kbase (plus a copy
# of block_merge.cuh):
#   1. the whole GPU suite, 8 shards;
#   2. the decode suite, ours only, two interleaved rounds: kbase / the build's (as much as the
#      session's device time allows).
# CAP bounds the whole (default 280 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-280}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 200)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode: a176688's templates / block_merge.cuh, ours only, two rounds"
OUT=$W/ab_decode QUICK=0 ROUNDS=2 SUITE=decode timeout "$(left 75)" bash bench/run_gpu_decode_ab.sh \
  base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry > "$W/decode_ab.txt" 2>&1
say "decode rc=$?"
sed -E 's/ +/ /g' "$W/decode_ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
