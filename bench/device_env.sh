# Sourced by the bench/run_gpu*.sh device scripts: the repo root as working directory, $OUT for
# the logs that come back, the carried libraries (.devcarry/lib) and a compile cache that
# outlives one script on a warm machine, and $OUT/device.txt (date, GPU, clocks, cores, torch).
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
OUT=${OUT:-/tmp/attnfuse-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}"
export ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  echo "cores $(nproc)"
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
} > "$OUT/device.txt" 2>&1
# For a one-call script: a scratch folder ($W, tarred into $OUT by the script) and the digest
# ($D = $OUT/digest.txt, emptied here) that `say` echoes into as well as to stdout.
digest_init() {
  W=$(mktemp -d)
  D="$OUT/digest.txt"
  : > "$D"
}
say() { echo "$*" | tee -a "$D"; }
# GPU tests FILTER within LIMIT seconds into $W/NAME.log; says the summary and the failures.
# Environment assignments written before the call reach the tests (KNOB=1 gpu_tests ...).
gpu_tests() {  # name, filter, limit
  timeout "$3" .devcarry/test_gpu --gtest_filter="$2" > "$W/$1.log" 2>&1
  say "rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$W/$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/$1.log" | head -20 >> "$D"
}
# The same under compute-sanitizer memcheck (error exit 9), into $W/NAME.log; says rc, the error
# summary and the tests' summary.
memcheck_tests() {  # name, filter, limit
  timeout "$3" compute-sanitizer --tool memcheck --error-exitcode 9 .devcarry/test_gpu --gtest_filter="$2" \
    > "$W/$1.log" 2>&1
  say "memcheck rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$W/$1.log" | tr '\n' ' ')"
}
# The whole GPU suite in SHARDS shards at once (default 4) within LIMIT seconds, each with its
# own compile cache (the tests are bound by NVRTC on the host's cores, not by the GPU), into
# $W/tests_shard0.. ; says each shard's summary and failures. BIN: another carried build's tests.
gpu_suite_sharded() {  # limit [shards [bin]]; $FILTER (a --gtest_filter) runs part of the suite
  local i n=${2:-4} bin=${3:-.devcarry/test_gpu}
  for ((i = 0; i < n; ++i)); do
    ( GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-shard$i \
        timeout "$1" "$bin" ${FILTER:+--gtest_filter="$FILTER"} > "$W/tests_shard$i.log" 2>&1
      echo $? > "$W/tests_shard$i.rc" ) &
  done
  wait
  # A shard the limit cut prints no summary: say so, with the test it was in (the whole suite
  # needs ~250 s with 8 shards on a fresh device, where every kernel compiles cold).
  for ((i = 0; i < n; ++i)); do
    local cut=""
    [ "$(cat "$W/tests_shard$i.rc" 2>/dev/null)" = 124 ] &&
      cut="CUT by the ${1} s limit in $(grep '^\[ RUN' "$W/tests_shard$i.log" | tail -1 | sed 's/.*RUN *\] //')"
    say "shard $i: $(grep -E '^\[  (PASSED|FAILED)' "$W/tests_shard$i.log" | tr '\n' ' ') $(grep -c '^\[       OK' "$W/tests_shard$i.log") ok $cut"
    grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/tests_shard$i.log" | head -10 >> "$D"
  done
}
# bench/gpu_decode.py --suite SUITE, ours only, over two interleaved rounds of the base build
# (.devcarry-base) and the new one (.devcarry), each run within LIMIT seconds: logs in
# $W/SUITE_{base,new}_r{1,2}.log; says each run's attnfuse rows whose case matches ROWS (an
# extended regex on the row's start). Extra arguments go to gpu_decode.py.
suite_ab() {  # suite, rows, limit [gpu_decode.py args...]
  local suite=$1 rows=$2 limit=$3 round v lib
  shift 3
  for round in 1 2; do
    for v in base new; do
      lib=.devcarry/lib/libattnfuse_c.so
      [ $v = base ] && lib=.devcarry-base/lib/libattnfuse_c.so
      timeout "$(left "$limit")" python3 bench/gpu_decode.py --lib $lib --suite "$suite" --ours-only \
        --out "$W/${suite}_${v}_r$round" "$@" > "$W/${suite}_${v}_r$round.log" 2>&1
      say "r$round $v rc=$? $(grep -E "^($rows).* attnfuse " "$W/${suite}_${v}_r$round.log" | tr -s ' ' | cut -d' ' -f1-7 | tr '\n' ';')"
    done
  done
}
# bench/gpu_decode.py --suite SUITE, ours only, on the carried build with the environment knob
# KNOB at each of VALUES (a space-separated list), two interleaved rounds, each run within LIMIT
# seconds: logs in $W/SUITE_KNOB=VALUE_r{1,2}.log; says each run's attnfuse rows. Extra
# arguments go to gpu_decode.py.
knob_ab() {  # knob, values, suite, limit [gpu_decode.py args...]; $ROUNDS interleaved rounds (2)
  local knob=$1 values=$2 suite=$3 limit=$4 round v name
  shift 4
  for ((round = 1; round <= ${ROUNDS:-2}; ++round)); do
    for v in $values; do
      name="${suite}_${knob}=${v}_r$round"
      env "$knob=$v" timeout "$(left "$limit")" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so \
        --suite "$suite" --ours-only --out "$W/$name" "$@" > "$W/$name.log" 2>&1
      say "r$round $knob=$v rc=$? $(grep -E '^[a-z].* attnfuse ' "$W/$name.log" | tr -s ' ' | cut -d' ' -f1-7 | tr '\n' ';')"
    done
  done
}
# The documents suite (documents and varlen decode rows) through suite_ab.
docs_ab() { suite_ab documents 'documents|varlen' "$1"; }  # limit
# bench/gpu_decode.py --suite SUITE on the carried build, with the peers, within LIMIT seconds:
# its log in $W/NAME.log and results in $W/NAME/; says its exit status; every timed row goes
# to the digest.
peer_sweep() {  # name, suite, limit
  timeout "$3" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite "$2" \
    --out "$W/$1" > "$W/$1.log" 2>&1
  say "rc=$?"
  grep -E 'attnfuse|cudnn|flex|flash|done in|graph' "$W/$1.log" | cut -c1-150 >> "$D"
}
# bench/gpu_rope.py --suite window to MAX_N (default 128k) within LIMIT seconds: rope_window on and
# off against its 2/(1+s) ceiling, into $W/rope_window.{json,log}; says gpu_rope.py's exit status
# and puts the log's last rows in the digest.
window_sweep() {  # limit [max_n]
  timeout "$1" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so --cli .devcarry/attnfuse \
    --suite window --max-n "${2:-131072}" --out "$W/rope_window.json" 2>&1 | grep -v Warning > "$W/rope_window.log"
  say "rc=${PIPESTATUS[0]}"
  grep -vE '^\s*$' "$W/rope_window.log" | tail -30 | cut -c1-160 >> "$D"
}
# bench/run_gpu_decode_ab.sh (every decode cell, two rounds) on VARIANTS ("name=DIR[+VAR=VALUE]")
# within LIMIT seconds: its logs in $W/ab, its summary in $W/decode_ab_summary.txt and the digest;
# AB=NAME keeps a script's several A/Bs apart ($W/ab_NAME, $W/decode_ab_NAME.txt).
decode_ab() {  # limit variant...
  local limit=$1 dir=$W/ab sum=$W/decode_ab_summary.txt
  shift
  [ -n "${AB:-}" ] && dir=$W/ab_$AB sum=$W/decode_ab_$AB.txt
  OUT=$dir QUICK=0 ROUNDS=2 timeout "$limit" bash bench/run_gpu_decode_ab.sh "$@" > "$sum" 2>&1
  cut -c1-170 "$sum" | tee -a "$D"
}
# bench/run_gpu_decode_phases.sh (the decode phase probe) within LIMIT seconds: its logs in
# $W/phases, its medians appended to the digest.
decode_phases() {  # limit
  OUT=$W/phases CAP=$1 bash bench/run_gpu_decode_phases.sh > "$W/phases.log" 2>&1
  cat "$W/phases/digest.txt" >> "$D" 2>/dev/null
}
# The 70B B1 / 32k decode call under the phase probe with the producer warp's stamps
# (bench/experiments/producer_stamps.patch): 40 graph-captured calls with the templates in KDIR,
# over a contiguous cache (PAGES 0) or pages of PAGES rows (a trailing s: a settled table), within
# LIMIT seconds: $W/NAME.raw; thread 0's phases and the producer's to the digest.
producer_probe() {  # name, kernel dir, pages, limit
  local settled=() paged=() ps=$3
  [[ $ps == *s ]] && settled=(--settled) && ps=${ps%s}
  [ "$ps" != 0 ] && paged=(--page-size "$ps")
  ATTNFUSE_KERNEL_DIR=$2 ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-$(basename "$2") \
    timeout "$(left "$4")" python3 bench/ncu_decode_target.py ours 1,64,8,32768 --calls 40 --sets 2 --graph \
    "${paged[@]}" "${settled[@]}" --lib .devcarry/lib/libattnfuse_c.so > "$W/$1.raw" 2>&1
  say "== 1,64,8,32768 $1"
  python3 bench/decode_phase_probe.py "$W/$1.raw" --warmup 4 2>&1 | grep -E "pre|loop  " | tee -a "$D"
  python3 bench/experiments/producer_probe_summary.py "$W/$1.raw" --warmup 4 2>&1 | tee -a "$D"
}
# The merge_states A/B: gpu_merge_states.py --graph, ours only, the 16-bit entry (the default)
# against ATTNFUSE_CUDA_MERGE_HALF=0, two interleaved rounds; then with the peers, graphed
# ($OUT/merge_states_graphed.json).
merge_run() {  # name, round [env...]
  local name=$1 round=$2
  shift 2
  env "$@" timeout "$(left 40)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so --ours-only \
    --graph > "$W/merge_${name}_r$round.log" 2>&1
  say "r$round $name rc=$? $(grep -E '^(cascade|16|64)' "$W/merge_${name}_r$round.log" |
    sed -E 's/ +([0-9.]+ MB): attnfuse ([0-9.]+ us).*/: \2/' | tr '\n' ';')"
}
merge_part() {
  local round
  say "== merge: the 16-bit entry (default) / ATTNFUSE_CUDA_MERGE_HALF=0, graphed, ours only"
  for round in 1 2; do
    merge_run half "$round"
    merge_run full "$round" ATTNFUSE_CUDA_MERGE_HALF=0
  done
  say "== the merge with the peers, graphed"
  timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so --graph \
    --json "$OUT/merge_states_graphed.json" > "$W/merge_bench_graphed.log" 2>&1
  say "rc=$?"
  grep -E '^(#|cascade|16|64|Traceback|[A-Za-z]*Error)' "$W/merge_bench_graphed.log" >> "$D"
}
# Seconds a step may take: at most $1, and what is left of CAP (seconds since the script began;
# a script sets its own default CAP before calling).
left() { local l=$((${CAP:-560} - SECONDS)); [ $l -lt 10 ] && l=1; echo $((l < $1 ? l : $1)); }
# The Llama-3.2-3B rope parameters (for window_bench programs: rope(Q, K, $LLAMA32_ROPE)).
LLAMA32_ROPE="base=500000, rope_type=llama3, factor=32, low_freq_factor=1, high_freq_factor=4, original_max_position_embeddings=8192"
# attnfuse bench's median and min ms of PROGRAM at B1 Hq24 Hkv8 N x N D128 (the Llama-3.2-3B
# rope_window geometry), bf16, rope_mode auto, unchecked (ablation kernels are wrong by design),
# with the kernels of .devcarry-abl/KDIR (or the carried build's, KDIR -), within what is left of
# 60 s: $W/abl_LABEL_N_r$round.{log,json}; says one line. SHAPE (B,Hq,Hkv,Nq,Nk,D) replaces the
# geometry where given.
window_bench() {  # label, kernel dir or -, program, N [shape] (and $round)
  local env=()
  [ "$2" != - ] && env=(ATTNFUSE_KERNEL_DIR="$PWD/.devcarry-abl/$2")
  env "${env[@]}" timeout "$(left 60)" .devcarry/attnfuse bench "$3" --shape "${5:-1,24,8,$4,$4,128}" --dtype bf16 \
    --rope-mode auto --no-check --reps 20 --json "$W/abl_$1_$4_r$round.json" > "$W/abl_$1_$4_r$round.log" 2>&1
  local rc=$?
  say "r$round N=$4 $1: rc $rc $(grep -E '^ +[a-z][a-z_ +-]* +[0-9.]+ +[0-9.]+ +[0-9]+ ' "$W/abl_$1_$4_r$round.log" | head -1 | tr -s ' ' | cut -d' ' -f2-4)"
}
# bench/gpu_rope.py --suite window (rope_window on vs off at every N, validated first) with the
# carried build within LIMIT seconds, plus any extra arguments: $W/window.{log,json}; its timed
# rows and speedups go to the digest.
window_suite() {  # limit [gpu_rope.py args...]
  local limit=$1
  shift
  timeout "$limit" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so --cli .devcarry/attnfuse \
    --suite window --out "$W/window.json" "$@" > "$W/window.log" 2>&1
  say "rc=$?"
  grep -E "attnfuse_rope|speedup" "$W/window.log" | cut -c1-160 >> "$D"
}

# Old / new CLI A/B (the carry recipe puts the old build at .devcarry/old/attnfuse, a third one
# where a script compares three at .devcarry/base/attnfuse).
ab_cli() { case $1 in old) echo .devcarry/old/attnfuse ;; base) echo .devcarry/base/attnfuse ;; *) echo .devcarry/attnfuse ;; esac; }
fused_ms() {  # cli program shape [bench args...]: the median ms of the fused placement (30 reps)
  local c=$1 p=$2 s=$3
  shift 3
  timeout 60 "$c" bench "$p" --shape "$s" --dtype bf16 --device cuda --rope-mode fused --reps 30 --no-check "$@" 2>&1 |
    awk '$1=="fused"{print $2}'
}
ab_check() {  # version program shape [bench args...]: appends a checked run to $W/check_<version>.log
  local v=$1 p=$2 s=$3
  shift 3
  "$(ab_cli "$v")" bench "$p" --shape "$s" --dtype bf16 --device cuda --rope-mode fused --reps 3 "$@" >> "$W/check_$v.log" 2>&1
}
