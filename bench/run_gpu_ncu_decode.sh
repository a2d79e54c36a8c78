#!/usr/bin/env bash
# Nsight Compute on decode: one attnfuse launch and the SDPA-cuDNN launches of the same call (split
# + reduce: PEER_LAUNCHES, default 2) per cell, same sections, into $OUT/ncu_decode.txt, with a
# digest on stdout (duration, DRAM throughput and bytes, L2 hit rate, occupancy, stalls). Clocks are
# left alone (--clock-control none, METHOD.md). Knobs (e.g. ATTNFUSE_CUDA_DECODE_TILE) pass through
# to attnfuse. Expects .devcarry/ from bench/make_device_carry.sh. On the device, repo root:
#   CELLS="32,32,8,32768 1,64,8,32768" bash bench/run_gpu_ncu_decode.sh      # B,Hq,Hkv,KV at D 128
#   CELLS="1,64,8,32768" PAGE_SIZES="16 64" SKIP_CUDNN=1 bash bench/run_gpu_ncu_decode.sh  # paged vs contiguous
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
F="$OUT/ncu_decode.txt"
: > "$F"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
P=${PEER_LAUNCHES:-2}
for cell in ${CELLS:-32,32,8,32768 1,64,8,32768}; do
  echo "== attnfuse decode $cell ${ATTNFUSE_CUDA_DECODE_TILE:+tile $ATTNFUSE_CUDA_DECODE_TILE}" >> "$F"
  timeout 150 ncu --clock-control none -k regex:attnfuse --launch-skip 2 --launch-count 1 $SECTIONS \
    python3 bench/ncu_decode_target.py ours "$cell" >> "$F" 2>&1
  for ps in ${PAGE_SIZES:-}; do  # e.g. PAGE_SIZES="16 64": ours again on a paged cache
    echo "== attnfuse paged decode $cell pages of $ps" >> "$F"
    timeout 150 ncu --clock-control none -k regex:attnfuse --launch-skip 2 --launch-count 1 $SECTIONS \
      python3 bench/ncu_decode_target.py ours "$cell" --page-size "$ps" >> "$F" 2>&1
  done
  [ -n "${SKIP_CUDNN:-}" ] && continue
  echo "== sdpa cudnn decode $cell" >> "$F"
  # Every kernel but the inputs' randn: in the fourteenth session a name filter matched none of
  # cuDNN's (its list showed only lean_reduction_kernel besides randn's).
  timeout 150 ncu --clock-control none -k 'regex:^(?!distribution)' --launch-skip $((2 * P)) \
    --launch-count "$P" $SECTIONS python3 bench/ncu_decode_target.py cudnn "$cell" >> "$F" 2>&1
done
grep -E "^== |^  [a-zA-Z_].*\(|Duration|DRAM Throughput|dram__bytes_read|lts__t_sector_hit|Memory Throughput|Registers Per|Achieved Occupancy|Block Size|Grid Size|Dynamic Shared|Warp Cycles Per Issued|Stall" "$F" | head -120
