#!/usr/bin/env bash
# The thirty-second session's third device call, on the first call's build (carry .devcarry):
# 8B B32 at 4k / 16k / 128k, ours only, two interleaved rounds, the runtime's choice against fixed
# split counts 2 and 3 (the cells where decode sits 0.3-0.7% under cuDNN). The three 64-key tile
# variants as first run named no key_warps (16,64,4,S needs key warps 4: 16,64,4,S,4), so the
# knob refused them and they timed nothing; they are kept as run.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
say "== B32 4k / 128k: split counts and tiles, ours only, 2 rounds"
OUT=$W/ab QUICK=0 ROUNDS=2 SUITE=decode CELLS="32,32,8,4096;32,32,8,131072;32,32,8,16384" timeout 300 \
  bash bench/run_gpu_decode_ab.sh auto=.devcarry s2=.devcarry+ATTNFUSE_CUDA_DECODE_SPLITS=2 \
  s3=.devcarry+ATTNFUSE_CUDA_DECODE_SPLITS=3 t64s2=.devcarry+ATTNFUSE_CUDA_DECODE_TILE=16,64,4,2 \
  t64s3=.devcarry+ATTNFUSE_CUDA_DECODE_TILE=16,64,4,3 t64s4=.devcarry+ATTNFUSE_CUDA_DECODE_TILE=16,64,4,4 > "$W/ab.txt" 2>&1
say "rc=$?"
cut -c1-220 "$W/ab.txt" >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
