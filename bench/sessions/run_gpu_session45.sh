#!/usr/bin/env bash
# Forty-fifth session: varlen decode through documents (gpu_decode.py --suite documents, the
# 32-sequence cell, ours only) read 0.605 ms on the H200 through the thirtieth session's sweep and
# 0.662-0.674 ms from the thirty-second on. The thirtieth session gave unsplit decode calls two
# stages of 128 keys (0.5-2% faster at 8B B32); varlen decode runs unsplit (256 blocks), so it
# took them too. Each variant, two interleaved rounds, validated against float64 first:
#   auto  the runtime's tile (unsplit: 16 x 128 keys, 2 stages)
#   st3   ATTNFUSE_CUDA_DECODE_TILE=16,128,4,3,4 (3 stages, still unsplit)
#   sN    ATTNFUSE_CUDA_DECODE_SPLITS=N (split calls take the 3-stage tile)
# for the random lengths (1k-32k) and for uniform ones (--varlen-lengths uniform, the same keys);
# then B32 contiguous decode with auto / st3 (the cells the two stages were chosen on).
# (Call 1 of the session ran st3 as 16,128,4,3, which the knob refuses, and s2-s4 random only.)
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
lib=.devcarry/lib/libattnfuse_c.so
variant() {  # name -> environment for the run
  case $1 in
    auto) echo "" ;;
    st3) echo "ATTNFUSE_CUDA_DECODE_TILE=16,128,4,3,4" ;;
    s*) echo "ATTNFUSE_CUDA_DECODE_SPLITS=${1#s}" ;;
  esac
}
say "== 1. varlen decode, ours only, two rounds"
for round in 1 2; do
  for lens in random uniform; do
    for v in ${VARIANTS:-auto st3 s2 s4 s8}; do
      env $(variant $v) ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout 120 python3 bench/gpu_decode.py --lib $lib \
        --suite documents --quick --ours-only --filter varlen --varlen-lengths $lens > "$W/varlen_${lens}_${v}_r$round.log" 2>&1
      say "r$round $lens $v rc=$? $(grep -E '^varlen decode .*attnfuse' "$W/varlen_${lens}_${v}_r$round.log" | head -1 | cut -c1-90)"
    done
  done
done
say "== 2. 8B B32 contiguous decode, ours only: auto / st3, two rounds"
for round in 1 2; do
  for v in auto st3; do
    env $(variant $v) ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$v timeout 150 python3 bench/gpu_decode.py --lib $lib \
      --suite decode --ours-only --cells "32,32,8,4096;32,32,8,32768;32,32,8,131072" > "$W/b32_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E '^llama.*attnfuse' "$W/b32_${v}_r$round.log" | awk '{print $1,$2,$3,$5,$6}' | tr '\n' ';')"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
