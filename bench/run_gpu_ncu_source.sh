#!/usr/bin/env bash
# Nsight Compute's per-instruction warp-stall sampling on one causal prefill launch: where in the
# SASS the kernel waits ($OUT/ncu_source_digest.txt: the top lines; $OUT/sass.csv.gz: all).
# Clocks left alone (--clock-control none, METHOD.md). Expects .devcarry/ (bench/make_device_carry.sh).
#   SHAPE=4,12,12,8192,64 bash bench/run_gpu_ncu_source.sh      # B,Hq,Hkv,N,D
# CMD replaces the profiled command (its attnfuse kernels, after SKIP launches), e.g. BigBird at 4k:
#   SKIP=5 CMD="python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite bigbird --quick --ours-only" ...
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
IFS=, read -r B HQ HKV N D <<< "${SHAPE:-4,12,12,8192,64}"
R=$(mktemp -d)/rep
if [ -n "${CMD:-}" ]; then
  read -ra cmd <<< "$CMD"
else
  cmd=(.devcarry/attnfuse bench "softmax(causal(scaled_dot_product(Q, K))) @ V" --shape "$B,$HQ,$HKV,$N,$N,$D"
    --dtype bf16 --device cuda)
fi
timeout 200 ncu --clock-control none -k regex:attnfuse --launch-skip "${SKIP:-2}" --launch-count 1 \
  --section WarpStateStats --section SourceCounters -o "$R" "${cmd[@]}" > "$OUT/ncu_source_run.log" 2>&1
echo "ncu rc=$?"
ncu -i "$R.ncu-rep" --page source --csv --print-source sass > "$OUT/sass.csv" 2>&1
echo "source page rc=$?"
python3 bench/ncu_source_digest.py "$OUT/sass.csv" > "$OUT/ncu_source_digest.txt" 2>&1
head -45 "$OUT/ncu_source_digest.txt" | cut -c1-230
gzip -f "$OUT/sass.csv"
