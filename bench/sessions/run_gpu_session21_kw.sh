#!/usr/bin/env bash
# Session 21, one device call. .devcarry: the tree at 0ef1796 (the vectorised split merge).
# .devcarry-paged here holds the cluster-merge build instead of the paged producer rule (the call
# was already queued with that carry list): the narrow decode tile's key-warp merge spread over
# its four warps, and split decode tiles merged through a thread-block cluster of their splits
# (FwdKernel::cluster_merge, LaunchPlan::cluster), off under ATTNFUSE_CUDA_CLUSTER_MERGE=0.
#   1. the whole GPU suite on the cluster build (four shards);
#   2. decode A/B, three interleaved rounds: base / the cluster build with the merge off (the
#      key-warp change alone) / the cluster build;
#   3. paged A/B, two rounds: base / cluster build.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
CL=.devcarry-paged
say "== 1. GPU suite on the cluster build"
gpu_suite_sharded "$(left 230)" 4 "$CL/test_gpu"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode A/B"
OUT=$W/ab QUICK=0 ROUNDS=3 timeout "$(left 170)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  off=$CL+ATTNFUSE_CUDA_CLUSTER_MERGE=0 cluster=$CL > "$W/decode_ab_summary.txt" 2>&1
cut -c1-220 "$W/decode_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. paged A/B"
OUT=$W/pab SUITE=paged QUICK=0 ROUNDS=2 timeout "$(left 120)" bash bench/run_gpu_decode_ab.sh base=.devcarry \
  cluster=$CL > "$W/paged_ab_summary.txt" 2>&1
cut -c1-220 "$W/paged_ab_summary.txt" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
