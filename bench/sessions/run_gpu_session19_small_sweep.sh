#!/usr/bin/env bash
# The nineteenth session's third device call: split counts and key tiles of the decode calls
# whose fixed cost keeps them under cuDNN (8B B1 4k, 8B B8 4k, 70B B1 32k), by the runtime's
# knobs on the carried build (ab9be50): ATTNFUSE_CUDA_DECODE_TILE=block_q,block_k,warps,stages,
# key_warps and ATTNFUSE_CUDA_DECODE_SPLITS=S ("auto" = the runtime's own choice). Two
# interleaved rounds, ours only, each cell validated before timing.
# CAP bounds the whole (default 330 s). Summary $OUT/small_sweep.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
CELLS="1,32,8,4096;8,32,8,4096;1,64,8,32768;1,32,8,32768"
entries=${*:-auto auto:8 auto:32 16,64,4,3,4 16,64,4,3,4:32 16,64,4,2,4:32 16,128,4,3,4:12 16,128,4,3,4:24}
for round in 1 2; do
  for e in $entries; do
    [ "$(left 60)" -lt 30 ] && break 2
    knob=${e%%:*} splits=
    [[ $e == *:* ]] && splits=${e#*:}
    [ "$knob" = auto ] && knob=
    n=${e//,/_}; n=${n//:/_s}
    ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$n ATTNFUSE_CUDA_DECODE_TILE=$knob ATTNFUSE_CUDA_DECODE_SPLITS=$splits \
      timeout "$(left 60)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode \
      --cells "$CELLS" --ours-only --out "$W/$n-r$round" > "$W/$n-r$round.log" 2>&1
    grep -E '^llama.*attnfuse' "$W/$n-r$round.log" | sed "s/^/r$round $e  /" | cut -c1-110 | tee -a "$OUT/small_sweep.txt"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
