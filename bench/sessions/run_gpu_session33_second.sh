#!/usr/bin/env bash
# The thirty-third session's second device call, on the carried build (.devcarry: the K/V copies
# moved out of attention_fwd.cuh into kv_copy.cuh, KvCopy<FwdKernel>; no change meant) with
# 3d19605's kernel templates in .devcarry/kbase (the same FwdParams layout).
#   1. the whole GPU suite, 8 shards (CudaCacheAppend's chain of cache appends included);
#   2. decode and paged suites, ours only, two interleaved rounds: kbase / the build's templates;
#   3. bench/gpu_decode.py (now split into decode_*.py modules) on its bigbird and documents suites,
#      --quick, ours only.
# CAP bounds the whole (default 500 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-500}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 260)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode and paged: 3d19605's templates / kv_copy.cuh, ours only, two rounds"
for s in decode paged; do
  OUT=$W/ab_$s QUICK=0 ROUNDS=2 SUITE=$s timeout "$(left 110)" bash bench/run_gpu_decode_ab.sh \
    base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry > "$W/${s}_ab.txt" 2>&1
  say "$s rc=$?"
  cut -c1-200 "$W/${s}_ab.txt" >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. bigbird and documents, --quick, ours only"
for s in bigbird documents; do
  timeout "$(left 60)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite $s --quick \
    --ours-only --out "$W/quick_$s" > "$W/quick_$s.log" 2>&1
  say "$s rc=$?"
  grep -E 'attnfuse|FAIL|rror' "$W/quick_$s.log" | cut -c1-160 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
