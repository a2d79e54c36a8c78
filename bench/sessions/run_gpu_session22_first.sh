#!/usr/bin/env bash
# Twenty-second session, first call. Build here first (two trees):
#   git apply bench/experiments/paged_small_pages_producer.patch && bash bench/make_device_carry.sh &&
#   rm -rf .devcarry-paged && cp -r .devcarry .devcarry-paged &&
#   git apply -R bench/experiments/paged_small_pages_producer.patch && bash bench/make_device_carry.sh
# then carry .devcarry and .devcarry-paged. On the device:
#   1. the whole GPU suite on the committed tree (8 shards; the twenty-first session's last kernel
#      edit was never run on a GPU);
#   2. paged A/B: the small-pages producer rule against the committed tree, two rounds;
#   3. decode A/B: auto splits against 8 forced splits (the global merge), three rounds
#      (read 70B B1 32k: does 8 beat 16 now that the merge reads 16-byte chunks?).
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. GPU suite, 8 shards"
gpu_suite_sharded "$(left 230)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged A/B (rule = small pages take the producer tile)"
OUT=$W/ab_paged SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 150)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  rule=.devcarry-paged > "$W/paged_ab_summary.txt" 2>&1
cut -c1-170 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode A/B (auto vs 8 splits)"
OUT=$W/ab_s8 QUICK=0 ROUNDS=3 timeout "$(left 200)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  s8=.devcarry+ATTNFUSE_CUDA_DECODE_SPLITS=8 > "$W/decode_ab_summary.txt" 2>&1
cut -c1-200 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
