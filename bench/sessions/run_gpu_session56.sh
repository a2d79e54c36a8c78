#!/usr/bin/env bash
# Fifty-sixth session, on an H200 only unless ANY_CARD=1 (exit 3 elsewhere: the decode ties, the
# 70B B1 / 32k cell and the merge gap are the H200's). Carry .devcarry from
# bench/make_device_carry.sh. The merge A/B's kernel directories .devcarry/merge_variants/spread/
# (the templates with ../experiments/merge_states_spread_runs_w16half.patch: the spread runs rebased
# onto the 16-bit entry, which keeps its contiguous chunks) and lb4/ (kMinBlocks 4) are made on the
# device where the carry lacks them.
# PARTS picks, in order (default "tests ab sweep"):
#   tests: CudaDecode.* (the decode and paged GPU tests), then under compute-sanitizer memcheck the
#          chained-call tests, where the early L2 hints run before the grid dependency wait
#          (FwdKernel::early_l2, ATTNFUSE_CUDA_EARLY_L2);
#   suite: the whole GPU suite in 8 shards (ATTNFUSE_TEST_MARGINS=1);
#   ab:    gpu_decode.py --suite decode and --suite paged, ours only, ATTNFUSE_CUDA_EARLY_L2 1 / 0,
#          two interleaved rounds;
#   sweep: gpu_decode.py --suite all with the peers;
#   merge: run_gpu_session54.sh's merge A/B, graphed, over MERGE_VARIANTS (default: new half spread
#          lb4), with CudaMergeStates.* under ATTNFUSE_CUDA_MERGE_HALF=1 first, memcheck, the peers.
# CAP bounds the whole (default 570 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
if [ -z "${ANY_CARD:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200"
  exit 3
fi
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
for part in ${PARTS:-tests ab sweep}; do
  case $part in
    tests)
      say "== tests: CudaDecode.*"
      gpu_tests decode 'CudaDecode.*' "$(left 200)"
      say "== tests: the chained calls under memcheck"
      memcheck_tests chain_memcheck \
        'CudaDecode.*ChainCallsOnOneStream:CudaDecode.PagedTableWrittenByTheKernelAheadIsReadAfterIt' "$(left 150)"
      ;;
    suite)
      say "== suite: the whole GPU suite, 8 shards (ATTNFUSE_TEST_MARGINS=1)"
      ATTNFUSE_TEST_MARGINS=1 gpu_suite_sharded "$(left 300)" 8
      ;;
    ab)
      say "== ab: ATTNFUSE_CUDA_EARLY_L2 1 / 0"
      knob_ab ATTNFUSE_CUDA_EARLY_L2 "1 0" decode 60
      knob_ab ATTNFUSE_CUDA_EARLY_L2 "1 0" paged 30
      ;;
    sweep)
      say "== sweep: gpu_decode.py --suite all with the peers"
      peer_sweep sweep_all all "$(left 150)"
      ;;
    merge)
      # The kernel directories, where the carry lacks them: the templates with the spread patch
      # (rebased onto the 16-bit entry), and with kMinBlocks 4.
      for v in spread lb4; do
        dir=.devcarry/merge_variants/$v
        [ -d "$dir" ] && continue
        mkdir -p "$dir" && cp src/codegen/cuda/kernels/*.cuh "$dir/"
        case $v in
          spread) patch -s -d "$dir" -p5 < bench/experiments/merge_states_spread_runs_w16half.patch ;;
          lb4) sed -i 's/kMinBlocks = 1;/kMinBlocks = 4;/' "$dir/merge_states.cuh" ;;
        esac
        say "made $dir: $(grep -c 'load_runs\|kMinBlocks = 4' "$dir/merge_states.cuh") marker lines"
      done
      say "== merge: the merge A/B (run_gpu_session54.sh, ONLY_MERGE=1 GRAPH=1)"
      CAP=$(left 999) ONLY_MERGE=1 GRAPH=1 MERGE_VARIANTS="${MERGE_VARIANTS:-new half spread lb4}" \
        OUT="$OUT/merge" bash "$(dirname "$0")/run_gpu_session54.sh" > "$W/merge_session.log" 2>&1
      say "rc=$?"
      cat "$OUT/merge/digest.txt" >> "$D" 2>/dev/null
      ;;
  esac
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "done in ${SECONDS}s"
