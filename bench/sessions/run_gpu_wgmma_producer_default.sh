#!/usr/bin/env bash
# One device call once the wgmma tile's producer warpgroup is the default (passes::cuda_arch_tile;
# ATTNFUSE_CUDA_WGMMA_PRODUCER=0 takes it away). In order, each bounded by CAP (570 s in all):
#   1. the GPU tests the wgmma prefill reaches (rope, sparse and documents, the forward suite's
#      combinator and head-dim sweeps) at the default;
#   2. bench/gpu_peers.py --suite full: causal and dense against SDPA (cuDNN, FA2) and flex;
#   3. bench/gpu_rope.py --suite peers: fused RoPE against the peers with a compiled pre-rotation;
#   4. the CLI A/B, the producer off against on, at shapes the first call did not time.
# Digest $OUT/digest.txt, logs and JSON in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}  # left (device_env.sh) bounds each step by it
L=.devcarry/lib/libattnfuse_c.so

say "== 1. GPU tests at the default"
gpu_tests tests 'CudaRope.*:CudaSparse.*:CudaForward.EveryCombinatorAgainstReference:CudaForward.HeadDimsAndOddLengths' "$(left 240)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. gpu_peers.py --suite full"
timeout "$(left 110)" python3 bench/gpu_peers.py --lib $L --suite full --out "$W/peers_full.json" 2>&1 \
  | grep -v Warning > "$W/peers_full.log"
grep -E "^(causal|dense|softcap|relu|additive)" "$W/peers_full.log" | head -60 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. gpu_rope.py --suite peers"
timeout "$(left 110)" python3 bench/gpu_rope.py --lib $L --cli .devcarry/attnfuse --suite peers \
  --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
grep -E "attnfuse_rope_auto|x[0-9]" "$W/rope_peers.log" | head -60 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 4. CLI A/B, producer off against on"
C='softmax(causal(scaled_dot_product(Q, K))) @ V'
CASES="$C|4,12,12,4096,4096,64;$C|4,12,12,16384,16384,64;softmax(scaled_dot_product(Q, K)) @ V|1,32,8,8192,8192,128;softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V|1,32,8,8192,8192,128;softmax(sliding_window(causal(scaled_dot_product(Q, K)), 1024)) @ V|1,32,8,8192,8192,128" \
  OUT=$W/cli ROUNDS=2 timeout "$(left 200)" bash bench/run_gpu_cli_ab.sh off=env:ATTNFUSE_CUDA_WGMMA_PRODUCER=0 base 2>&1 | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
