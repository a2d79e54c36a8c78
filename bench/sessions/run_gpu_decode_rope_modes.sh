#!/usr/bin/env bash
# Thirty-eighth session, prepared and not yet run (the device budget ran out): RoPE placement in
# decode calls. rope_mode=auto fuses decode calls (the
# cost model puts the fused rotation's extra at rho * work / F, tiny with one query row); this
# times plain decode (no RoPE), fused and prerotated RoPE at the Llama-3-8B (B1, B8) and
# Llama-3-70B (B1) geometries, 32k keys, to see what the fused rotation costs a decode call.
# Carry .devcarry (the tree's build; the CLI alone is used). Each mode is checked against the
# float64 reference at 4099 keys first.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-150}
PLAIN='softmax(causal(scaled_dot_product(Q, K))) @ V'
ROPE='softmax(causal(rope(Q, K, base=500000))) @ V'
cli=${CLI:-.devcarry/attnfuse}
run() {  # label program shape extra-args...
  local label=$1 prog=$2 shape=$3
  shift 3
  "$cli" bench "$prog" --shape "$shape" --dtype bf16 --device cuda "$@" > "$W/$label.log" 2>&1
  awk -v l="$label" '$1=="fused"{print l, $2, "ms"}' "$W/$label.log"
}
say "== checks (4099 keys)"
( run chk_plain "$PLAIN" 1,32,8,1,4099,128 --reps 5
  run chk_fused "$ROPE" 1,32,8,1,4099,128 --rope-mode fused --reps 5 ) > /dev/null &
run chk_pre "$ROPE" 1,32,8,1,4099,128 --rope-mode prerotate --reps 5 > /dev/null
wait
say "checks: $(grep -hcE '^ +PASS' "$W"/chk_*.log | tr '\n' ' ') (PASS lines: plain, fused, prerotate order by name)"
for round in 1 2; do
  for geo in 8b-B1:1,32,8,1,32768,128 8b-B8:8,32,8,1,32768,128 70b-B1:1,64,8,1,32768,128; do
    g=${geo%%:*} s=${geo#*:}
    [ "$(left 60)" -lt 15 ] && break 2
    say "round $round $(run ${g}_plain "$PLAIN" $s --reps 50 --no-check) | $(run ${g}_fused "$ROPE" $s --rope-mode fused --reps 50 --no-check) | $(run ${g}_prerotate "$ROPE" $s --rope-mode prerotate --reps 50 --no-check) | $(run ${g}_auto "$ROPE" $s --reps 50 --no-check)"
  done
done
tar czf "$OUT/logs.tgz" -C "$W" .
say "end in ${SECONDS}s"
