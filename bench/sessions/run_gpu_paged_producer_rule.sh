#!/usr/bin/env bash
# Prepared in the twentieth session (not yet run): the runtime rule of
# bench/experiments/paged_small_pages_producer.patch (paged split calls over boxes of 8-32 rows
# whose parts stream at most 4096 keys take the decode producer warp and 128-key tiles), built
# into .devcarry-paged, against the tree without it (.devcarry). Build here first:
#   git apply bench/experiments/paged_small_pages_producer.patch && bash bench/make_device_carry.sh &&
#   rm -rf .devcarry-paged && cp -r .devcarry .devcarry-paged &&
#   git apply -R bench/experiments/paged_small_pages_producer.patch && bash bench/make_device_carry.sh
# then carry both. On the device:
#   1. every paged GPU test (the new PagedShortPartsAtSmallPagesTakeTheProducerTile included) and
#      the chained-calls test on the rule's build;
#   2. paged A/B (ours only, every paged cell, two interleaved rounds).
# CAP bounds the whole (default 400 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== 1. paged tests on the rule's build"
timeout "$(left 220)" .devcarry-paged/test_gpu --gtest_filter='CudaDecode.Paged*:CudaDecode.DependentLaunches*' \
  > "$W/tests.log" 2>&1
say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/tests.log" | head -20 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged A/B"
OUT=$W/ab SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 150)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  rule=.devcarry-paged > "$W/paged_ab_summary.txt" 2>&1
cut -c1-170 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
