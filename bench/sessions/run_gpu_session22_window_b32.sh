#!/usr/bin/env bash
# Twenty-second session, second call: two experiments on one build (.devcarry, the committed
# tree) that need no rebuild.
#   A. rope_window with the P V product issued behind the windowed QK chain (kernel templates in
#      .devcarry-kb, read through ATTNFUSE_KERNEL_DIR): the QK instances no longer wait for S
#      inside, so the previous tile's P V runs under the softmax as in the plain loop. Copy the
#      variant's src/codegen/cuda/kernels/*.cuh into .devcarry-kb and carry it.
#      1. CudaRope.* on the variant; 2. gpu_rope.py --suite window (N <= 32k) base vs variant,
#      two interleaved rounds.
#   B. B32 decode with forced splits (17 and 33 parts, which fill the last wave of the 256-block
#      grid: 33 x 256 = 64 x 132) in balanced parts (work.cuh's floor(split x count / S); kernel
#      templates in .devcarry-kbal) against the runtime's choice (1 part: two waves, the second
#      124 of 132 SMs), two interleaved rounds, ours only.
#   C. the split count of short decode calls: 8B at B1 (KV 2k-16k), B2 and B4 (KV 4k), forced
#      4 / 8 / 16 against the runtime's choice (the first call found 8 splits 1.05x faster than
#      the chosen 16 at B1 / 4k), two rounds.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== A1. CudaRope.* on the variant kernels"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-kb gpu_tests rope_kb 'CudaRope.RopeWindow*' "$(left 110)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== A2. rope_window base vs variant (N <= 32k)"
for round in 1 2; do
  for v in base kb; do
    envs=(); [ $v = kb ] && envs=(ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-kb)
    env "${envs[@]}" timeout "$(left 75)" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so \
      --cli .devcarry/attnfuse --suite window --max-n 32768 --out "$W/window_${v}_$round.json" \
      > "$W/window_${v}_$round.log" 2>&1
    say "round $round $v rc=$?"
    grep -E "rope_window|attnfuse" "$W/window_${v}_$round.log" | cut -c1-160 >> "$D"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "== B. B32 decode: auto (1 part) vs balanced parts (kernels in .devcarry-kbal) at 17 and 33"
CELLS="32,32,8,4096;32,32,8,32768;32,32,8,131072"
for round in 1 2; do
  for s in auto bal17 bal33; do
    envs=(); [ $s != auto ] && envs=(ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-kbal ATTNFUSE_CUDA_DECODE_SPLITS=${s#bal})
    env "${envs[@]}" timeout "$(left 45)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so \
      --suite decode --ours-only --cells "$CELLS" --out "$(mktemp -d)" 2>&1 |
      awk -v r=$round -v s=$s '/ attnfuse/ && !/^(#|==)/ { print r "|" s "|" $0 }' >> "$W/b32.txt"
  done
done
cut -c1-120 "$W/b32.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== C. split counts of short decode calls (forced 4 / 8 / 16 against auto)"
CELLS="1,32,8,2048;1,32,8,4096;1,32,8,8192;1,32,8,16384;2,32,8,4096;4,32,8,4096"
for round in 1 2; do
  for s in auto 4 8 16; do
    envs=(); [ $s != auto ] && envs=(ATTNFUSE_CUDA_DECODE_SPLITS=$s)
    env "${envs[@]}" timeout "$(left 45)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so \
      --suite decode --ours-only --cells "$CELLS" --out "$(mktemp -d)" 2>&1 |
      awk -v r=$round -v s=$s '/ attnfuse/ && !/^(#|==)/ { print r "|" s "|" $0 }' >> "$W/splits.txt"
  done
done
cut -c1-120 "$W/splits.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
