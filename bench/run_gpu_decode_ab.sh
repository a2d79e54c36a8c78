#!/usr/bin/env bash
# A/B of carried builds on bench/gpu_decode.py's own cells (ours only, validated before timed),
# interleaved round by round so that clock drift falls on every variant alike. Each argument is
# "name=DIR[+VAR=VALUE...]": the C library of a build carried in DIR (e.g. .devcarry-base from an
# earlier commit, next to .devcarry), optionally with some of the runtime's knobs set (values
# without '+'). The first
# variant is the reference of the ratios. One row per (round, variant, cell) in
# $OUT/decode_ab.txt, medians with ratios on stdout.
# Usage on the device: SUITE=paged ROUNDS=2 bash bench/run_gpu_decode_ab.sh old=.devcarry-base new=.devcarry
# Env: SUITE (decode|paged|bigbird|documents; default decode), ROUNDS (2), QUICK (1: --quick),
# CELLS (decode: gpu_decode.py --cells, "B,Hq,Hkv,KV;...").
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
F="$OUT/decode_ab.txt"
: > "$F"
Q=""; [ "${QUICK:-1}" = 1 ] && Q="--quick"
for round in $(seq "${ROUNDS:-2}"); do
  for v in "$@"; do
    name=${v%%=*} spec=${v#*=} envs=()
    [[ "$spec" == *+* ]] && IFS=+ read -ra envs <<< "${spec#*+}"
    dir=${spec%%+*}
    env "${envs[@]}" timeout 300 python3 bench/gpu_decode.py --lib "$dir/lib/libattnfuse_c.so" --suite "${SUITE:-decode}" \
      $Q ${CELLS:+--cells "$CELLS"} --ours-only --out "$(mktemp -d)" 2>&1 | awk -v r="$round" -v n="$name" '
        / attnfuse/ && !/^(#|==)/ { print r "|" n "|" $0 }' >> "$F"
  done
done
python3 - "$F" <<'PY'
import re, sys, statistics
rows = [l.rstrip("\n").split("|", 2) for l in open(sys.argv[1]) if l.strip()]
cells, names, t = [], [], {}
for rnd, name, line in rows:
    m = re.match(r"\s*(.*?)\s+(attnfuse\S*)\s+([0-9.]+)", line)
    if not m: continue
    cell, ms = f"{m.group(1)} {m.group(2)}", float(m.group(3))
    if cell not in cells: cells.append(cell)
    if name not in names: names.append(name)
    t.setdefault((cell, name), []).append(ms)
for cell in cells:
    ref = statistics.median(t[(cell, names[0])]) if (cell, names[0]) in t else None
    out = []
    for n in names:
        v = t.get((cell, n))
        if not v: out.append(f"{n} failed"); continue
        m = statistics.median(v)
        out.append(f"{n} {m:.4f} ms" + (f" ({ref / m:.3f}x)" if ref and n != names[0] else "") +
                   f" [{', '.join(f'{x:.4f}' for x in v)}]")
    print(f"{cell:56} " + " | ".join(out))
PY
