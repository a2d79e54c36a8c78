#!/usr/bin/env bash
# Nsight Compute on one causal prefill launch of attnfuse and of SDPA-cuDNN at the same shape, the
# same sections for both, into one file ($OUT/ncu_causal.txt) plus a digest on stdout: where the
# D = 64 kernel loses to cuDNN (tensor-pipe share, L2 -> SM traffic, issue stalls, occupancy).
# Clocks are left alone (--clock-control none, METHOD.md). Expects .devcarry/ from
# bench/make_device_carry.sh. On the device, repo root:
#   SHAPE=4,12,12,32768,64 bash bench/run_gpu_ncu_causal.sh      # B,Hq,Hkv,N,D (GPT-2 at 32k)
# Decode: NQ queries against N keys (default NQ = N). With NQ < N the peer runs without a mask
# (a bottom-right-aligned single query sees every key; SDPA's is_causal would align it top-left), with
# enable_gqa, and PEER_LAUNCHES (default 1) of its kernels are profiled, for a split + reduce pair:
#   NQ=1 PEER_LAUNCHES=2 SHAPE=32,32,8,32768,128 bash bench/run_gpu_ncu_causal.sh   # 8B B32 decode
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
IFS=, read -r B HQ HKV N D <<< "${SHAPE:-4,12,12,32768,64}"
NQ=${NQ:-$N}
F="$OUT/ncu_causal.txt"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
echo "== attnfuse causal B$B Hq$HQ Hkv$HKV Nq$NQ Nk$N D$D" | tee "$F"
timeout 200 ncu --clock-control none -k regex:attnfuse --launch-skip 2 --launch-count 1 $SECTIONS \
  .devcarry/attnfuse bench 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape "$B,$HQ,$HKV,$NQ,$N,$D" \
  --dtype bf16 --device cuda >> "$F" 2>&1
echo "rc=$?"
echo "== sdpa cudnn causal, same shape" >> "$F"
P=${PEER_LAUNCHES:-1}
timeout 200 ncu --clock-control none -k 'regex:(?i)sdpa|fmha|cudnn|attn' --launch-skip $((2 * P)) --launch-count "$P" \
  $SECTIONS python3 - "$B" "$HQ" "$HKV" "$NQ" "$N" "$D" >> "$F" 2>&1 <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
b, hq, hkv, nq, n, d = map(int, sys.argv[1:])
q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=nq == n, enable_gqa=hq != hkv)
torch.cuda.synchronize()
PY
echo "rc=$?"
grep -E "^== |^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Issue Slots Busy|Executed Ipc Active|No Eligible|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Stall|SM Busy|Mem Busy|Max Bandwidth|Dynamic Shared" "$F" | head -90
