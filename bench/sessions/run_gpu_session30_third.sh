#!/usr/bin/env bash
# The thirtieth session's third device call: paged decode tiles that take pages by TMA stage up to
# 1024 page ids (passes::kCudaPageListSlotsTma; 256 before), so Llama-3-8B B8 / 32k's parts
# (~8k keys, 512 pages of 16) look their pages up in shared memory instead of the global table.
# Build: bash bench/make_device_carry.sh; the library before the change (the second call's, 256
# ids) in .devcarry-base/lib. Carry .devcarry and .devcarry-base.
#   1. CudaDecode.* (the paged tests include a TMA case straddling 1024 ids), 8 shards;
#   2. the paged suite, ours only, two interleaved rounds: base (256 ids) against new (1024).
# CAP bounds the whole (default 330 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
say "== 1. CudaDecode.*, 8 shards"
GTEST_FILTER='CudaDecode.*' gpu_suite_sharded "$(left 200)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged suite: 256 staged ids (base) / 1024 (new), ours only"
SUITE=paged AB=paged decode_ab "$(left 150)" base=.devcarry-base new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
