#!/usr/bin/env bash
# The eighteenth session's last device call, at the final tile rule (the 192-row tile for D = 64
# plain scores under no mask, causal or a causal window, with the producer; two-sided windows
# on 128 rows; the D = 128 two-sided window without the producer):
#   1. the three GPU tests the third call's time limit cut (shard 3);
#   2. CLI --check on the mask programs whose tile the final rule changed, at odd shapes.
# CAP bounds the whole (default 200 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-200}
say "== 1. the tests call 3 did not reach"
gpu_tests sparse 'CudaSparse.DocumentsDecodeSizedPackedBatch:CudaSparse.BlockSparseLargerBlocksAndOtherDtypes:CudaSparse.BlockSparsePlanCutsRowsLongerThanTheAverageLoad' "$(left 130)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. checks"
for c in 'softmax(sliding_window(causal(scaled_dot_product(Q, K)), 300)) @ V|2,12,4,1000,1000,64' \
  'softmax(sliding_window(causal(scaled_dot_product(Q, K)), 300)) @ V|1,6,6,300,1000,64' \
  'softmax(sliding_window(scaled_dot_product(Q, K), 200)) @ V|1,4,2,777,777,64' \
  'softmax(sliding_window(scaled_dot_product(Q, K), 200)) @ V|1,8,2,777,777,128' \
  'relu_attention(sliding_window(causal(scaled_dot_product(Q, K)), 100)) @ V|1,4,4,500,500,64'; do
  prog=${c%|*} shape=${c#*|}
  r=$(timeout "$(left 20)" .devcarry/attnfuse run "$prog" --shape $shape --dtype bf16 --device cuda --check 2>&1)
  echo "$c: $r" >> "$W/checks.log"
  say "$(echo "$r" | grep -E 'PASS|FAIL|error' | head -1 | cut -c1-60) [$c]"
done
tar czf "$OUT/logs.tgz" -C "$W" .
