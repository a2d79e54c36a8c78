#!/usr/bin/env bash
# One device call for issue 5 (decode, paged KV, BigBird block sparsity, packed documents): the C ABI
# self-check, optionally the GPU test suite, then bench/gpu_decode.py, every log and JSON under $OUT.
# Expects .devcarry/ from bench/make_device_carry.sh. Usage on the device, from the repo root:
#   bench/run_gpu_decode.sh [quick|full] [decode paged bigbird documents ...]   (default: quick, all)
# A device command has 10 minutes and flex recompiles for every shape, so run the full sweep one
# suite per call (`bench/run_gpu_decode.sh full decode`, then paged, ...): the JSON of each suite
# and summary.txt (all suites found in $OUT/decode) accumulate. TESTS=1 runs .devcarry/test_gpu
# first; FILTER=text keeps only the cases whose name contains it; TIMING=loop or L2_FLUSH=1 change
# how calls are timed (see the header of gpu_decode.py).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
mkdir -p "$OUT/decode"
L=.devcarry/lib/libattnfuse_c.so
size=${1:-quick}
shift || true
suites=${*:-all}
case "$size" in quick) quick=--quick ;; full) quick= ;; *) echo "usage: $0 [quick|full] [suites...]"; exit 2 ;; esac
if [ "${TESTS:-0}" = 1 ]; then
  echo "== GPU tests"
  .devcarry/test_gpu > "$OUT/gpu_tests.log" 2>&1; echo "rc=$?"
  grep -E '^\[  (PASSED|FAILED)|FAILED|Failure' "$OUT/gpu_tests.log" | head -20
fi
echo "== C ABI self-check (ctypes layouts vs attnfuse.h, the new fields on the CPU device)"
python3 bench/gpu_decode.py --selfcheck --lib "$L" 2>&1 | tee "$OUT/selfcheck.log"
opts=(--lib "$L" --out "$OUT/decode" --filter "${FILTER:-}" --timing "${TIMING:-graph}")
[ -n "$quick" ] && opts+=("$quick")
[ "${L2_FLUSH:-0}" = 1 ] && opts+=(--l2-flush)
for suite in $suites; do
  echo "== $suite ($size)"
  python3 bench/gpu_decode.py "${opts[@]}" --suite "$suite" 2>&1 | grep -v Warning > "$OUT/decode_$suite.log"
  echo "rc=${PIPESTATUS[0]}"
  grep -E "^(llama|bigbird|documents|  |==)|INVALID|rror" "$OUT/decode_$suite.log" | head -60
done
