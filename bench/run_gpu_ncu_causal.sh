#!/usr/bin/env bash
# Nsight Compute on one causal prefill launch of attnfuse and of SDPA-cuDNN at the same shape, the
# same sections for both, into one file ($OUT/ncu_causal.txt) plus a digest on stdout: where the
# D = 64 kernel loses to cuDNN (tensor-pipe share, L2 -> SM traffic, issue stalls, occupancy).
# Clocks are left alone (--clock-control none, METHOD.md). Expects .devcarry/ from
# bench/make_device_carry.sh. On the device, repo root:
#   SHAPE=4,12,12,32768,64 bash bench/run_gpu_ncu_causal.sh      # B,Hq,Hkv,N,D (GPT-2 at 32k)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
IFS=, read -r B HQ HKV N D <<< "${SHAPE:-4,12,12,32768,64}"
F="$OUT/ncu_causal.txt"
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
echo "== attnfuse causal B$B Hq$HQ Hkv$HKV N$N D$D" | tee "$F"
timeout 200 ncu --clock-control none -k regex:attnfuse --launch-skip 2 --launch-count 1 $SECTIONS \
  .devcarry/attnfuse bench 'softmax(causal(scaled_dot_product(Q, K))) @ V' --shape "$B,$HQ,$HKV,$N,$N,$D" \
  --dtype bf16 --device cuda >> "$F" 2>&1
echo "rc=$?"
echo "== sdpa cudnn causal, same shape" >> "$F"
timeout 200 ncu --clock-control none -k 'regex:(?i)sdpa|fmha|cudnn|attn' --launch-skip 2 --launch-count 1 $SECTIONS \
  python3 - "$B" "$HQ" "$N" "$D" >> "$F" 2>&1 <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
b, h, n, d = map(int, sys.argv[1:])
q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(4):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
torch.cuda.synchronize()
PY
echo "rc=$?"
grep -E "^== |^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Issue Slots Busy|Executed Ipc Active|No Eligible|Eligible Warps|Active Warps Per|Warp Cycles Per Issued|Stall|SM Busy|Mem Busy|Max Bandwidth|Dynamic Shared" "$F" | head -90
