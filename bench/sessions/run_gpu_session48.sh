#!/usr/bin/env bash
# Forty-eighth session, first call (carry .devcarry from bench/make_device_carry.sh at HEAD):
#   1. the whole GPU suite in 8 shards: eddddd5's BiasQuad has not run on a GPU, and dynamic and
#      longrope RoPE over device lengths (FwdParams::rope_len) are new;
#   1b. the README's dynamic-RoPE paged example on the GPU, and paged decode at Llama-3-8B B32 /
#      4k with plain RoPE against dynamic past its original context (the device-length rule), two
#      interleaved rounds;
#   2. on an H200 only: gpu_decode.py --suite all with the peers (decode, paged, BigBird,
#      documents with the ragged varlen split rule, never run on an H200).
# CAP bounds the whole (default 590 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-590}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 330)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 1b. dynamic RoPE over pages: the README example on the GPU, then its cost at Llama-3-8B B32 / 4k"
DYN="softmax(causal(rope(Q, K, rope_type=dynamic, factor=4, original_max_position_embeddings=256))) @ V"
PLAIN="softmax(causal(rope(Q, K))) @ V"
timeout "$(left 40)" .devcarry/attnfuse run "$DYN" --shape 4,32,8,1,1000,128 --page-size 16 --check --device cuda \
  --dtype bf16 > "$W/cli_dynamic.log" 2>&1
say "rc=$? $(grep -E 'PASS|FAIL' "$W/cli_dynamic.log" | tr '\n' ' ')"
for round in 1 2; do
  for v in plain dynamic; do
    prog=$PLAIN
    [ $v = dynamic ] && prog=$DYN
    timeout "$(left 40)" .devcarry/attnfuse bench "$prog" --shape 32,32,8,1,4096,128 --page-size 16 --device cuda \
      --dtype bf16 --reps 100 > "$W/bench_${v}_r$round.log" 2>&1
    say "r$round $v rc=$? $(grep -E 'PASS|FAIL' "$W/bench_${v}_r$round.log" | tr '\n' ' ') $(awk '$1=="fused"{print $2, $3}' "$W/bench_${v}_r$round.log")"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ "$(left 999)" -ge 120 ]; then
  say "== 2. gpu_decode.py --suite all with the peers"
  peer_sweep all all "$(left 400)"
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
