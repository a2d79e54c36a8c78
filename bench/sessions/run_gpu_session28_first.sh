#!/usr/bin/env bash
# Session 28, first device call. New build (.devcarry): packed documents choose the decode variant
# by queries per document and their decode tiles copy K/V by TMA; the wgmma documents' V zeroing
# goes through zero_tail_rows; contiguous TMA decode tiles prefetch their first K/V tiles into L2
# before griddepcontrol.wait. Base (.devcarry-base): c0768d3's libattnfuse_c.so.
#   1. the whole GPU suite, 8 shards, new build;
#   2. gpu_decode.py --suite documents, ours only, base / new, two interleaved rounds (prefill
#      cells level, the varlen decode cell is the change);
#   3. decode A/B base / new, two rounds, on the B1 / B8 / B32 Llama-3-8B and the 70B cells at 32k
#      (the prefetch);
#   4. documents and varlen decode with the peers, new build;
#   5. the decode suite with the peers on the same cells, new build.
# Build here first: cp the old .devcarry/lib/libattnfuse_c.so to .devcarry-base/lib/, then
# bash bench/make_device_carry.sh; carry .devcarry and .devcarry-base. Digest $OUT/digest.txt,
# logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-575}
CELLS8="1,32,8,32768;8,32,8,32768;32,32,8,32768;1,64,8,32768"
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 330)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. documents and varlen decode, ours only: base / new, two rounds"
docs_ab 60
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode A/B base / new (prefetch before the wait)"
CELLS="$CELLS8" SUITE=decode AB=prefetch decode_ab "$(left 200)" base=.devcarry-base new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. documents and varlen decode with the peers, new build"
peer_sweep docs_peers documents "$(left 150)"
say "== 5. decode with the peers, new build"
timeout "$(left 600)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode \
  --cells "$CELLS8" --out "$W/decode_peers" > "$W/decode_peers.log" 2>&1
say "rc=$?"
grep -E 'attnfuse|cudnn|flex' "$W/decode_peers.log" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
