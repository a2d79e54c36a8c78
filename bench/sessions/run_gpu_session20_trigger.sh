#!/usr/bin/env bash
# The twentieth session's third device call: where a forward kernel lets the next grid in.
#   start = .devcarry-base (151bf8d: griddepcontrol.launch_dependents right after the wait),
#   end   = .devcarry (after the main loop's last load), off = end with ATTNFUSE_CUDA_PDL=0.
#   1. the chained-calls test and the in-kernel merge test on `end`;
#   2. decode A/B, ours only, every decode cell, three interleaved rounds;
#   3. paged A/B, two rounds.
# CAP bounds the whole (default 330 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-330}
say "== 1. tests"
gpu_tests pdl 'CudaDecode.DependentLaunches*:CudaDecode.InKernelMerge*' "$(left 90)"
say "== 2. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 150)" bash bench/run_gpu_decode_ab.sh start=.devcarry-base end=.devcarry \
  off=.devcarry+ATTNFUSE_CUDA_PDL=0 > "$W/decode_ab_summary.txt" 2>&1
cut -c1-190 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. paged A/B"
OUT=$W/ab_paged SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 90)" bash bench/run_gpu_decode_ab.sh start=.devcarry-base \
  end=.devcarry off=.devcarry+ATTNFUSE_CUDA_PDL=0 > "$W/paged_ab_summary.txt" 2>&1
cut -c1-190 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
