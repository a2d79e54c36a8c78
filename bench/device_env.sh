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
# The whole GPU suite in four shards at once within LIMIT seconds, each with its own compile
# cache (the tests are bound by NVRTC on the host's cores, not by the GPU), into
# $W/tests_shard0..3.log; says each shard's summary and failures.
gpu_suite_sharded() {  # limit
  local i
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i ATTNFUSE_CACHE_DIR=/tmp/attnfuse-cache-shard$i \
      timeout "$1" .devcarry/test_gpu > "$W/tests_shard$i.log" 2>&1 &
  done
  wait
  for i in 0 1 2 3; do
    say "shard $i: $(grep -E '^\[  (PASSED|FAILED)' "$W/tests_shard$i.log" | tr '\n' ' ') $(grep -c '^\[       OK' "$W/tests_shard$i.log") ok"
    grep -E '^\[  FAILED|Failure|Expected|Which is' "$W/tests_shard$i.log" | head -10 >> "$D"
  done
}
# Seconds a step may take: at most $1, and what is left of CAP (seconds since the script began;
# a script sets its own default CAP before calling).
left() { local l=$((${CAP:-560} - SECONDS)); [ $l -lt 10 ] && l=1; echo $((l < $1 ? l : $1)); }
