#!/usr/bin/env bash
# The wgmma prefill's 192-row tile at D = 64 (three computing warpgroups, FlashAttention-3's
# hdim-64 shape), through ATTNFUSE_CUDA_WGMMA_TILE=block_k,min_blocks,stages,192 before any rule
# picks it:
#   1. CLI --check runs with it on odd shapes (every mask, a modifier, rope prerotated, GQA,
#      chunked prefill) and compute-sanitizer racecheck on one;
#   2. the CudaForward and CudaRope GPU tests with it (stages 3, so that D = 128 still fits);
#   3. CLI A/B against the 128-row tile at the GPT-2 geometry (causal 4k-32k, dense and
#      causal+alibi 8k), with and without the producer warpgroup.
# CAP bounds the whole (default 480 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-480}
K192=128,1,4,192
CLI=.devcarry/attnfuse

say "== 1. checks with the 192-row tile"
for prog in 'softmax(causal(scaled_dot_product(Q, K))) @ V' 'softmax(scaled_dot_product(Q, K)) @ V' \
  'softmax(sliding_window(causal(scaled_dot_product(Q, K)), 300)) @ V' \
  'softmax(sliding_window(scaled_dot_product(Q, K), 200)) @ V' \
  'softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V' 'softmax(softcap(causal(scaled_dot_product(Q, K)), 30)) @ V' \
  'relu_attention(causal(scaled_dot_product(Q, K))) @ V' 'softmax(causal(rope(Q, K, base=10000))) @ V'; do
  for shape in 2,12,4,1000,1000,64 1,6,6,300,1000,64 1,4,2,193,193,64; do
    r=$(ATTNFUSE_CUDA_WGMMA_TILE=$K192 timeout "$(left 30)" $CLI run "$prog" --shape $shape --dtype bf16 \
      --device cuda --rope-mode prerotate --check 2>&1)
    echo "$prog $shape: $r" >> "$W/checks.log"
    say "rc=$? $(echo "$r" | grep -E 'PASS|FAIL|error' | head -1 | cut -c1-100) [$prog $shape]"
  done
done
ATTNFUSE_CUDA_WGMMA_TILE=$K192 timeout "$(left 60)" compute-sanitizer --tool racecheck --error-exitcode 9 \
  $CLI run 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape 1,2,2,700,700,64 --dtype bf16 --device cuda \
  --check > "$W/race192.log" 2>&1
say "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|PASS|FAIL' "$W/race192.log" | head -2 | tr '\n' ' ')"
ATTNFUSE_CUDA_WGMMA_TILE=128,1,4,192 ATTNFUSE_CUDA_WGMMA_PRODUCER=0 timeout "$(left 60)" compute-sanitizer --tool racecheck \
  --error-exitcode 9 $CLI run 'softmax(scaled_dot_product(Q, K)) @ V' --shape 1,2,2,700,700,64 --dtype bf16 \
  --device cuda --check > "$W/race192_dense_noproducer.log" 2>&1
say "racecheck (dense, no producer) exit $?: $(grep -E 'RACECHECK SUMMARY|PASS|FAIL' "$W/race192_dense_noproducer.log" | head -2 | tr '\n' ' ')"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 2. GPU tests with the 192-row tile"
ATTNFUSE_CUDA_WGMMA_TILE=128,1,3,192 gpu_tests forward192 'CudaForward.*:CudaRope.*' "$(left 170)"
tar czf "$OUT/logs.tgz" -C "$W" .

say "== 3. CLI A/B"
C='softmax(causal(scaled_dot_product(Q, K))) @ V'
P='softmax(scaled_dot_product(Q, K)) @ V'
A='softmax(alibi(causal(scaled_dot_product(Q, K)))) @ V'
G=4,12,12
CASES="$C|$G,32768,32768,64;$C|$G,16384,16384,64;$C|$G,8192,8192,64;$C|$G,4096,4096,64;$P|$G,8192,8192,64;$A|$G,8192,8192,64" \
  ROUNDS=2 OUT=$W timeout "$(left 240)" bash bench/run_gpu_cli_ab.sh base r192=env:ATTNFUSE_CUDA_WGMMA_TILE=$K192 \
  r192_noprod=env:ATTNFUSE_CUDA_WGMMA_TILE=$K192+ATTNFUSE_CUDA_WGMMA_PRODUCER=0 > "$W/cli_ab_summary.txt" 2>&1
cat "$W/cli_ab_summary.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
