#!/usr/bin/env bash
# Fifty-fourth session (carry .devcarry from bench/make_device_carry.sh, plus
# .devcarry/merge_variants/head/libattnfuse_c.so, the library of 46aa670, and
# .devcarry/merge_variants/cs/, the kernel templates with streaming loads and stores in the merge):
#   1. the whole GPU suite in 8 shards (the merge kernel now has an entry per chunk width, chunks of
#      16 elements, and multiply-high index splits), unless SKIP_SUITE=1, with the twelve checks
#      nearest their O bound (ATTNFUSE_TEST_MARGINS=1) in the digest;
#   2. on an H200: gpu_decode.py --suite all with the peers and gpu_rope.py --suite window to 32k
#      (the session-49 sweeps), unless SKIP_SWEEPS=1;
#   3. with REPLAY_SEED: CudaSparse.DocumentsLengthDependentRopeScalings at that seed (call 1's
#      failure), then with REPLAY_FRESH=1 at 8 fresh seeds, with ATTNFUSE_TEST_MARGINS=1 (each
#      check's share of its bound);
#   4. when at least 150 s are left (or ONLY_MERGE=1, which skips 1 and 2): the merge A/B, two
#      interleaved rounds of bench/gpu_merge_states.py --ours-only (validated first) over
#      MERGE_VARIANTS: head (46aa670's library), new (this build), new8 or wN
#      (ATTNFUSE_CUDA_MERGE_CHUNK=8 or N), nopdl (ATTNFUSE_CUDA_PDL=0: the merges in stream order,
#      session 55), half (ATTNFUSE_CUDA_MERGE_HALF=1: the 16-bit states' entry, session 55; the
#      merge tests then run with it first), or a kernel dir (cs: streaming loads and stores); with
#      GRAPH=1 each timed as CUDA graphs (--graph), and the peers run both ways;
#      then CudaMergeStates.* under compute-sanitizer memcheck, and the bench with the peers.
# CAP bounds the whole (default 560 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
if [ -z "${ONLY_MERGE:-}" ]; then
  if [ -z "${SKIP_SUITE:-}" ]; then
    say "== 1. the whole GPU suite, 8 shards (ATTNFUSE_TEST_MARGINS=1)"
    ATTNFUSE_TEST_MARGINS=1 gpu_suite_sharded "$(left 300)" 8
    # The checks nearest their O bound, with their tests: where a seed could next cross it.
    say "the largest margins of the O bound:"
    awk '/^\[ RUN/ {t = $NF} /^margin / {print $2, t, $0}' "$W"/tests_shard*.log | sort -k1,1 -n -r |
      head -12 | cut -c1-230 | tee -a "$D"
    tar czf "$OUT/logs.tgz" -C "$W" .
  fi
  if [ -z "${SKIP_SWEEPS:-}" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 &&
    [ "$(left 999)" -ge 120 ]; then
    say "== 2. gpu_decode.py --suite all with the peers"
    peer_sweep all all "$(left 200)"
    tar czf "$OUT/logs.tgz" -C "$W" .
    if [ "$(left 999)" -ge 90 ]; then
      say "== 2b. gpu_rope.py --suite window up to 32k"
      window_sweep "$(left 120)" 32768
      tar czf "$OUT/logs.tgz" -C "$W" .
    fi
  fi
fi
if [ -n "${REPLAY_SEED:-}" ]; then
  say "== CudaSparse.DocumentsLengthDependentRopeScalings: seed $REPLAY_SEED, then 8 fresh seeds (margins)"
  ATTNFUSE_TEST_SEED=$REPLAY_SEED ATTNFUSE_TEST_MARGINS=1 gpu_tests replay \
    'CudaSparse.DocumentsLengthDependentRopeScalings' "$(left 60)"
  if [ -n "${REPLAY_FRESH:-}" ]; then
    ATTNFUSE_TEST_MARGINS=1 timeout "$(left 120)" .devcarry/test_gpu --gtest_repeat=8 \
      --gtest_filter='CudaSparse.DocumentsLengthDependentRopeScalings' > "$W/fresh.log" 2>&1
    say "rc=$? $(grep -c '^\[       OK' "$W/fresh.log") ok, $(grep -c '^\[  FAILED  \] CudaSparse' "$W/fresh.log") failed"
  fi
  for f in replay ${REPLAY_FRESH:+fresh}; do
    say "$f: the largest margins $(grep -o 'margin [0-9.]* of the O bound ([^;]*' "$W/$f.log" | sort -k2 -n -r | head -4 | tr '\n' ';')"
  done
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
if [ -n "${ONLY_MERGE:-}" ] || [ "$(left 999)" -ge 150 ]; then
  say "== 4. merge A/B: ${MERGE_VARIANTS:=head new new8 cs}"
  if [[ " $MERGE_VARIANTS " == *" half "* ]]; then
    ATTNFUSE_CUDA_MERGE_HALF=1 gpu_tests merge_half 'CudaMergeStates.*' "$(left 60)"
  fi
  for round in 1 2; do
    for v in $MERGE_VARIANTS; do
      lib=.devcarry/lib/libattnfuse_c.so knobs=()
      case $v in
        head) lib=.devcarry/merge_variants/head/libattnfuse_c.so ;;
        new) ;;
        new8) knobs=(ATTNFUSE_CUDA_MERGE_CHUNK=8) ;;
        w*) knobs=(ATTNFUSE_CUDA_MERGE_CHUNK=${v#w}) ;;  # that width wherever the rows allow it
        nopdl) knobs=(ATTNFUSE_CUDA_PDL=0) ;;
        half) knobs=(ATTNFUSE_CUDA_MERGE_HALF=1) ;;
        *) knobs=(ATTNFUSE_KERNEL_DIR=$PWD/.devcarry/merge_variants/$v) ;;
      esac
      env "${knobs[@]}" timeout "$(left 40)" python3 bench/gpu_merge_states.py --lib "$lib" --ours-only \
        ${GRAPH:+--graph} > "$W/ab_${v}_r$round.log" 2>&1
      say "r$round $v rc=$? $(grep -E '^(cascade|16|64)' "$W/ab_${v}_r$round.log" | sed -E 's/ +([0-9.]+ MB): attnfuse ([0-9.]+ us).*/: \2/' | tr '\n' ';')"
    done
  done
  tar czf "$OUT/logs.tgz" -C "$W" .
  memcheck_tests merge_memcheck 'CudaMergeStates.*' "$(left 60)"
  say "== the merge with the peers"
  timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so \
    --json "$OUT/merge_states.json" > "$W/merge_bench.log" 2>&1
  say "rc=$?"
  grep -E '^(#|cascade|16|64)' "$W/merge_bench.log" >> "$D"
  if [ -n "${GRAPH:-}" ]; then
    say "== the merge with the peers, graphed"
    timeout "$(left 90)" python3 bench/gpu_merge_states.py --lib .devcarry/lib/libattnfuse_c.so --graph \
      --json "$OUT/merge_states_graphed.json" > "$W/merge_bench_graphed.log" 2>&1
    say "rc=$?"
    grep -E '^(#|cascade|16|64|Traceback|[A-Za-z]*Error)' "$W/merge_bench_graphed.log" >> "$D"
  fi
  tar czf "$OUT/logs.tgz" -C "$W" .
fi
say "done in ${SECONDS}s"
