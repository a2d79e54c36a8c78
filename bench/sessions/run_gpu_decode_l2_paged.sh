#!/usr/bin/env bash
# One device call (fifteenth session) that checks and times two decode changes:
#   - decode tensor maps with no L2 promotion (the wgmma prefill keeps 256 bytes): the call before
#     measured 1.2-3.7% with the knob; confirmed here against the knob set back to 256;
#   - paged split calls' TMA module reading Hopper's 128-key tile (passes::cuda_decode_wide_keys),
#     against the build before it (.devcarry-base) with the same L2 setting, so only the tile differs;
# then the GPU tests these touch, and the decode and paged sweeps with peers at the new defaults.
# Everything lands in $OUT/digest.txt and $OUT/logs.tgz (the device returns at most 8 files).
# Expects .devcarry/ and .devcarry-base/ from bench/make_device_carry.sh. CAP (480): the seconds after
# which the last step (the CudaRope tests) is not started.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
L=.devcarry/lib/libattnfuse_c.so
digest_init  # $W, $D, say (device_env.sh)

say "== 1. GPU tests: paged decode, the decode launch plan"
timeout 150 .devcarry/test_gpu --gtest_filter='CudaDecode.Paged*:CudaDecode.LaunchPlanOfALlama3Step' \
  > "$W/tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/tests.log" | head -20 >> "$D"

say "== 2. paged: 64-key (base) against 128-key (new) TMA module, both without L2 promotion;"
say "   long: the TMA module for long parts too (ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES)"
OUT=$W/paged_ab SUITE=paged ROUNDS=2 timeout 180 bash bench/run_gpu_decode_ab.sh \
  base=.devcarry-base+ATTNFUSE_CUDA_TMA_L2_PROMOTE=none new=.devcarry \
  long=.devcarry+ATTNFUSE_CUDA_PAGED_DEEP_MAX_TILES=1000000 2>&1 | tee -a "$D"

say "== 3. decode: no L2 promotion (new default) against 256 bytes"
OUT=$W/l2_ab SUITE=decode ROUNDS=1 timeout 80 bash bench/run_gpu_decode_ab.sh \
  new=.devcarry p256=.devcarry+ATTNFUSE_CUDA_TMA_L2_PROMOTE=256 2>&1 | tee -a "$D"

say "== 4. full decode sweep with peers"
timeout 150 python3 bench/gpu_decode.py --lib $L --suite decode --out "$W/full" > "$W/decode_full.log" 2>&1
say "rc=$?"; grep -vE "^#" "$W/full/decode.txt" 2>/dev/null | tee -a "$D" | tail -0
cp "$W/full/decode.txt" "$OUT/decode_full.txt" 2>/dev/null; cp "$W/full/decode.json" "$OUT/decode_full.json" 2>/dev/null

say "== 5. the CudaRope tests the call before did not reach (prefill shapes), in the time left"
tar czf "$OUT/logs.tgz" -C "$W" .
left=$((${CAP:-480} - SECONDS)); [ $left -lt 60 ] && left=1
timeout $left .devcarry/test_gpu --gtest_filter='CudaRope.RopeWindow*:CudaRope.AutoPlacement*:CudaRope.SanitizerSubset:CudaRope.OddRotary*' \
  > "$W/rope_tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/rope_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED' "$W/rope_tests.log" >> "$D"

tar czf "$OUT/logs.tgz" -C "$W" .
