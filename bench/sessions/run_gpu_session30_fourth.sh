#!/usr/bin/env bash
# The thirtieth session's fourth device call (carry .devcarry, the third call's build): the decode
# tile at Llama-3-8B B32 (4k, 32k, 128k), the cells still at 0.98-1.0x cuDNN. The fourteenth
# session's tile sweep (bench/decode_tile_sweep.sh) ran the quick cells only (B32 at 32k). Ours
# only, with the peers once at the end; two interleaved rounds of:
#   auto                 the runtime's tile (16 rows x 128 keys, 3 stages: one block per SM)
#   16,64,4,3,4          64-key tiles, 3 stages (two blocks per SM: B32's 256 blocks in one wave)
#   16,64,4,2,4          64-key tiles, 2 stages (three blocks per SM)
#   16,128,4,2,4         128-key tiles, 2 stages
#   auto:2               the runtime's tile, 2 splits (ATTNFUSE_CUDA_DECODE_SPLITS=2)
# CAP bounds the whole (default 420 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-420}
CELLS="32,32,8,4096;32,32,8,32768;32,32,8,131072"
for round in 1 2; do
  for t in auto 16,64,4,3,4 16,64,4,2,4 16,128,4,2,4 auto:2; do
    n=${t//,/_}; n=${n//:/_s}
    knob=${t%%:*} splits=
    [[ $t == *:* ]] && splits=${t#*:}
    [ "$knob" = auto ] && knob=
    ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$n ATTNFUSE_CUDA_DECODE_TILE=$knob ATTNFUSE_CUDA_DECODE_SPLITS=$splits \
      timeout "$(left 45)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode \
      --cells "$CELLS" --ours-only --out "$W/tile_${n}_r$round" > "$W/tile_${n}_r$round.log" 2>&1
    say "r$round $t rc=$? $(grep -E '^llama.* attnfuse ' "$W/tile_${n}_r$round.log" | tr -s ' ' | cut -d' ' -f2,3,4,5 | tr '\n' ';')"
  done
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "== the peers on the same cells (runtime's tile)"
timeout "$(left 90)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode --cells "$CELLS" \
  --peers sdpa_cudnn --out "$W/peers" > "$W/peers.log" 2>&1
say "rc=$? $(grep -E '^llama.* (attnfuse|sdpa_cudnn) ' "$W/peers.log" | tr -s ' ' | cut -d' ' -f2,3,4,5 | tr '\n' ';')"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
