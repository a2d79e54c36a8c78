#!/usr/bin/env bash
# The thirty-third session's first device call, on the carried build (.devcarry: the TMA decode
# tiles ask their first key tiles into L2 before the grid dependency wait, FwdParams::kv_l2_prefetch,
# knob ATTNFUSE_CUDA_KV_L2_PREFETCH, default 4 tiles).
#   1. the new test and the chains of dependent launches, then the whole GPU suite, 8 shards;
#   2. decode and paged suites, ours only, two interleaved rounds: prefetch off (0) / 4 tiles
#      (the default) / 8 tiles.
# CAP bounds the whole (default 580 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-580}
say "== 1. the prefetch and chain tests, then the whole GPU suite, 8 shards"
gpu_tests chains 'CudaL2Prefetch.*:CudaDecode.DependentLaunches*:CudaDecode.PagedSettled*' "$(left 90)"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode and paged: L2 prefetch of 0 / 4 (default) / 8 tiles, ours only, two rounds"
for s in decode paged; do
  OUT=$W/ab_$s QUICK=0 ROUNDS=2 SUITE=$s timeout "$(left 160)" bash bench/run_gpu_decode_ab.sh \
    off=.devcarry+ATTNFUSE_CUDA_KV_L2_PREFETCH=0 t4=.devcarry \
    t8=.devcarry+ATTNFUSE_CUDA_KV_L2_PREFETCH=8 > "$W/${s}_ab.txt" 2>&1
  say "$s rc=$?"
  cut -c1-200 "$W/${s}_ab.txt" >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
