#!/usr/bin/env bash
# A/B of kernel-template directories with the CLI's own timer (`attnfuse bench`, CUDA-graph
# medians), interleaved round by round so that clock drift falls on every variant alike. Each
# argument is "name=dir" (dir: a copy of src/codegen/cuda/kernels, read through
# ATTNFUSE_KERNEL_DIR), "name=file.patch" (the templates with that patch applied, as
# run_gpu_kernel_ab.sh does), "name=env:VAR=VALUE[+VAR=VALUE...]" (the embedded templates with
# those environment variables set, for the runtime's knobs), "name=bin:DIR[+VAR=VALUE]" (the CLI of another carried build,
# e.g. .devcarry-base, optionally with a knob) or "base" (the templates embedded in .devcarry). One line per (round,
# case, variant) in $OUT/cli_ab.txt, medians over the rounds on stdout.
# Usage on the device (expects .devcarry/ from bench/make_device_carry.sh):
#   ROUNDS=2 bash bench/run_gpu_cli_ab.sh base tree=src/codegen/cuda/kernels \
#     steps=bench/experiments/wgmma_stepped_descriptors.patch
# CASES: "program|B,Hq,Hkv,Nq,Nk,D" entries separated by ";" (default: causal and dense at the
# GPT-2 and Llama-3-8B geometries).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"  # cd to the repo root, $OUT, carried libraries, device.txt
C='softmax(causal(scaled_dot_product(Q, K))) @ V'
P='softmax(scaled_dot_product(Q, K)) @ V'
CASES=${CASES:-"$C|4,12,12,32768,32768,64;$C|4,12,12,8192,8192,64;$P|4,12,12,8192,8192,64;$C|1,32,8,8192,8192,128;$C|1,32,8,32768,32768,128"}
F="$OUT/cli_ab.txt"
: > "$F"
variants=()
for v in "$@"; do
  if [[ "$v" == *=*.patch ]]; then
    d=$(mktemp -d)/kernels
    cp -r src/codegen/cuda/kernels "$d"
    patch -s -p5 -d "$d" < "${v#*=}" || { echo "${v#*=} does not apply"; exit 2; }
    v="${v%%=*}=$d"
  fi
  variants+=("$v")
done
for round in $(seq "${ROUNDS:-2}"); do
  IFS=';' read -ra cases <<< "$CASES"
  for c in "${cases[@]}"; do
    prog=${c%|*} shape=${c#*|}
    for v in "${variants[@]}"; do
      name=${v%%=*} dir="" envs=() cli=.devcarry/attnfuse
      [ "$v" != base ] && dir=${v#*=}
      if [[ "$dir" == env:* ]]; then IFS=+ read -ra envs <<< "${dir#env:}"; dir=""; fi
      if [[ "$dir" == bin:* ]]; then
        dir=${dir#bin:}
        [[ "$dir" == *+* ]] && envs=("${dir#*+}")
        cli="${dir%%+*}/attnfuse" dir=""
      fi
      ms=$(env "${envs[@]}" ATTNFUSE_KERNEL_DIR=$dir timeout 120 "$cli" bench "$prog" --shape "$shape" \
        --dtype bf16 --device cuda ${EXTRA_ARGS:-} 2>&1 | awk '$1 == "fused" {print $2}')
      echo "$round|$prog|$shape|$name|${ms:-failed}" | tee -a "$F" > /dev/null
    done
  done
done
python3 - "$F" <<'PY'
import sys, statistics
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1]) if l.strip()]
cases, names, t = [], [], {}
for rnd, prog, shape, name, ms in rows:
    key = (prog, shape)
    if key not in cases: cases.append(key)
    if name not in names: names.append(name)
    if ms != "failed": t.setdefault((key, name), []).append(float(ms))
for key in cases:
    base = statistics.median(t[(key, names[0])]) if (key, names[0]) in t else None
    cells = []
    for n in names:
        v = t.get((key, n))
        m = statistics.median(v) if v else None
        cells.append(f"{n} {m:.3f} ms" + (f" ({base / m:.3f}x)" if base and m and n != names[0] else "") if m else f"{n} failed")
    print(f"{key[0][:40]:40} {key[1]:22} " + " | ".join(cells))
PY
