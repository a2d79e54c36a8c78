#!/usr/bin/env bash
# Written in the twentieth session, run in the twenty-first and twenty-fifth: where a short
# decode call's fixed cost goes.
# The decode kernel patched with bench/experiments/decode_phase_probe.patch (through
# ATTNFUSE_KERNEL_DIR, no rebuild) prints each block's %globaltimer at seven points of the call;
# bench/decode_phase_probe.py turns 40 calls, back to back in one CUDA graph over input sets that
# outgrow the L2 (bench/ncu_decode_target.py --graph --sets), into per-phase medians (block start
# spread, wait, prologue, main loop, partial write, count, the last block's merge, the tail after
# the last main loop, and the gap to the next call). Cells: 8B B1 4k and 32k, 70B B1 32k, with the
# runtime's dependent launches and without (ATTNFUSE_CUDA_PDL=0). printf adds its own cost at the
# very end of each block (after t6), so the spans are a little longer than a timed call's.
# PAGED="64 16 64s 16s" (the default) adds the 70B B1 / 32k cell over paged caches of those page
# sizes (with dependent launch, as the runtime chooses; an s: with a settled page table, whose
# probe marks the wait after the table reads), to see where a paged call's extra time goes;
# PAGED="" skips them. The probe also prints the split merge's own phases (MERGE lines, printed
# after t6 like the block's line, so that their printf is not inside the timed tail). CELLS and
# PDLS replace the contiguous cells and the dependent-launch settings.
# CAP bounds the whole (default 300 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-300}
K=$W/k_probe
mkdir -p "$K" && cp -r src/codegen/cuda/kernels "$K/"
patch -s -p5 -d "$K/kernels" < bench/experiments/decode_phase_probe.patch || { say "the probe patch does not apply"; exit 1; }
for cell in ${CELLS-1,32,8,4096 1,32,8,32768 1,64,8,32768}; do
  for pdl in ${PDLS-1 0}; do
    n=${cell//,/_}_pdl$pdl
    sets=2; [ "${cell##*,}" = 4096 ] && sets=8  # K/V beyond the 50 MB L2, as the benchmark's rotation
    [ "$(left 60)" -lt 20 ] && break 2
    ATTNFUSE_CUDA_PDL=$pdl ATTNFUSE_KERNEL_DIR=$K/kernels ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-probe \
      timeout "$(left 60)" python3 bench/ncu_decode_target.py ours "$cell" --calls 40 --sets "$sets" --graph \
      --lib .devcarry/lib/libattnfuse_c.so \
      > "$W/$n.raw" 2>&1
    say "== $cell, ATTNFUSE_CUDA_PDL=$pdl"
    python3 bench/decode_phase_probe.py "$W/$n.raw" --warmup $((sets + 2)) 2>&1 | tee -a "$D"
  done
done
for ps in ${PAGED-64 16 64s 16s}; do
  [ "$(left 60)" -lt 20 ] && break
  n=1_64_8_32768_pages$ps settled=()
  [[ $ps == *s ]] && settled=(--settled) && ps=${ps%s}
  ATTNFUSE_KERNEL_DIR=$K/kernels ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-probe \
    timeout "$(left 60)" python3 bench/ncu_decode_target.py ours 1,64,8,32768 --calls 40 --sets 2 --graph \
    --page-size "$ps" "${settled[@]}" --lib .devcarry/lib/libattnfuse_c.so > "$W/$n.raw" 2>&1
  say "== 1,64,8,32768, pages of $ps${settled:+, table settled}, ATTNFUSE_CUDA_PDL=1"
  python3 bench/decode_phase_probe.py "$W/$n.raw" --warmup 4 2>&1 | tee -a "$D"
done
tar czf "$OUT/logs.tgz" -C "$W" --exclude='k_probe' .
