#!/usr/bin/env bash
# The thirty-third session's third device call: the A/B of the second call again, whose base rows
# had failed (ATTNFUSE_KERNEL_DIR must hold every template the library embeds, and 3d19605's had
# no kv_copy.cuh; .devcarry/kbase now holds a copy of it, which its attention_fwd.cuh never
# includes). Decode and paged suites, ours only, two interleaved rounds: 3d19605's templates /
# the build's (kv_copy.cuh). CAP bounds the whole (default 300 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-300}
say "== decode and paged: 3d19605's templates / kv_copy.cuh, ours only, two rounds"
for s in decode paged; do
  OUT=$W/ab_$s QUICK=0 ROUNDS=2 SUITE=$s timeout "$(left 140)" bash bench/run_gpu_decode_ab.sh \
    base=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/kbase new=.devcarry > "$W/${s}_ab.txt" 2>&1
  say "$s rc=$?"
  sed -E 's/ +/ /g' "$W/${s}_ab.txt" >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
