#!/usr/bin/env bash
# Fifty-ninth session, prepared for the next call, on any card (the card goes to the digest).
# Carry .devcarry from `bash bench/make_device_carry.sh`.
# PARTS picks, in order (default "twice abd suite merge"; CAP bounds the whole, default 570 s):
#   twice: is the split merge's tail its instruction fetch? gpu_decode.py --suite decode, ours
#          only, three interleaved rounds of the templates as they are (kdbase/) and with
#          ../experiments/decode_merge_twice.patch (kdtwice/: the last block runs the same merge
#          loop body twice). The call grows by the second, warm pass; against the probe's cold
#          merge (4.0-4.7 us at 70B B1) that splits the merge into its fetch and its data. Why:
#          the split merge's landing code, never run with its knob off, cost 8B B1 4k 1 us
#          (bench/results/2026-12-07-h100-session59/call1/);
#   abd:   ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0 (every stage hinted, the first tile, none), --suite
#          decode, two rounds (the fifty-ninth session's call was cut after one round of 16 and 1);
#   suite: the whole GPU suite, 14 shards in parallel (~220 s on a fresh H100);
#   merge: the 16-bit merge_states entry against ATTNFUSE_CUDA_MERGE_HALF=0, then with the peers.
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
for part in ${PARTS:-twice abd suite merge}; do
  case $part in
    twice)
      say "== twice: the merge run once (kdbase) / twice (kdtwice), --suite decode, three rounds"
      rm -rf kdbase kdtwice
      cp -r src/codegen/cuda/kernels kdbase && cp -r src/codegen/cuda/kernels kdtwice &&
        patch -s -d kdtwice -p5 < bench/experiments/decode_merge_twice.patch || { say "the patch failed"; continue; }
      ROUNDS=3 knob_ab ATTNFUSE_KERNEL_DIR "kdbase kdtwice" decode 45
      ;;
    abd)
      say "== abd: ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0"
      knob_ab ATTNFUSE_CUDA_EARLY_L2 "16 1 0" decode 40
      ;;
    suite)
      say "== suite: the whole GPU suite, 14 shards"
      gpu_suite_sharded "$(left 260)" 14
      ;;
    merge) merge_part ;;
  esac
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "done in ${SECONDS}s"
