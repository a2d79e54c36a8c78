#!/usr/bin/env bash
# The thirty-first session's first device call (build here: bash bench/make_device_carry.sh; carry
# .devcarry). The tree since the whole suite last ran (3afc5e5): the chained-call GPU tests moved
# onto run_chain / check_chain, the decode stage / page-slot changes (CudaDecode.* passed on them),
# the CLI's --paged-table-settled.
#   1. the whole GPU suite, 8 shards;
#   2. where the paged overhead goes: gpu_decode.py --suite paged --pages-in-order, twice (the
#      _inorder rows take the same lookups and copies over pages laid out in table order);
#   3. bench/sessions/run_gpu_paged_tiles.sh's tile sweep at pages of 16, with what is left.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged, pages in table order against shuffled ones"
for r in 1 2; do
  timeout "$(left 90)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite paged --ours-only \
    --pages-in-order --out "$W/inorder_r$r" > "$W/inorder_r$r.log" 2>&1
  say "r$r rc=$?"
  grep -E "^llama|attnfuse" "$W/inorder_r$r.log" | cut -c1-150 >> "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. paged tiles at pages of 16"
SUITES=paged ROUNDS=2 OUT=$W/tiles timeout "$(left 290)" bash bench/decode_tile_sweep.sh \
  auto 16,128,4,2,4 16,128,4,3,4 16,64,4,4,4 > "$W/tiles.log" 2>&1
say "rc=$?"
grep -E "ps16|attnfuse |tile" "$W/tiles/decode_tile_sweep.txt" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
