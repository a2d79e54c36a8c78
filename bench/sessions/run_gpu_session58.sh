#!/usr/bin/env bash
# Fifty-eighth session, on any card (the card goes to the digest). Carry .devcarry from
# bench/make_device_carry.sh, with the kernels of 9cd0168 (before the landing code) beside it:
#   BASE_KERNELS=9cd0168 bash bench/make_device_carry.sh
# Ran at feb09b7 in the fifty-ninth session (bench/results/2026-12-07-h100-session59/). The landing
# knob was removed after it: the land / landp arms need bench/experiments/decode_merge_landing.patch.
# PARTS picks, in order (default "land tests landp abd merge"; CAP bounds the whole, default 570 s):
#   land:  gpu_decode.py --suite decode, ours only, two interleaved rounds of three arms:
#          ATTNFUSE_CUDA_MERGE_LANDING=0 (the default), =1 (the split merge's parts landed in
#          shared memory at once), and the kernels of 9cd0168 (ATTNFUSE_KERNEL_DIR=.devcarry/basek),
#          which times what the landing code's presence moved in the default path (registers 1-4);
#   tests: CudaDecode.* with ATTNFUSE_CUDA_MERGE_LANDING=1 (the in-kernel merge bit for bit against
#          the combine kernel), then CudaDecode.* and CudaMergeStates.* as built;
#   landp: --suite paged, the landing knob 0 / 1, two rounds;
#   abd:   --suite decode, ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0 (every stage hinted, the first tile,
#          none), two rounds: on the H200 every-stage hints read level to 1% slower, on H100s
#          1.4-4.7% faster (bench/results/2026-12-07-h200-session57/, -h100-session56/);
#   merge: gpu_merge_states.py --graph, ours only, the 16-bit entry (the default) against
#          ATTNFUSE_CUDA_MERGE_HALF=0, two rounds; then with the peers, graphed (JSON).
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
land_ab() {  # suite, limit per run, arms
  local suite=$1 limit=$2 arms=$3 round arm name setting kdir=""
  for round in 1 2; do
    for arm in $arms; do
      if [ "$arm" = base ]; then
        [ -f .devcarry/basek/attention_fwd.cuh ] || { say "no .devcarry/basek: the base arm is skipped"; continue; }
        kdir=$PWD/.devcarry/basek
      fi
      name="${suite}_land_${arm}_r$round"
      case $arm in
        off) setting=ATTNFUSE_CUDA_MERGE_LANDING=0 ;;
        on) setting=ATTNFUSE_CUDA_MERGE_LANDING=1 ;;
        base) setting=ATTNFUSE_KERNEL_DIR=$kdir ;;
      esac
      env "$setting" timeout "$(left "$limit")" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so \
        --suite "$suite" --ours-only --out "$W/$name" > "$W/$name.log" 2>&1
      say "r$round $arm rc=$? $(grep -E '^[a-z].* attnfuse' "$W/$name.log" | tr -s ' ' | cut -d' ' -f1-7 | tr '\n' ';')"
    done
  done
}
for part in ${PARTS:-land tests landp abd merge}; do
  case $part in
    land)
      say "== land: --suite decode, ATTNFUSE_CUDA_MERGE_LANDING 0 / 1 / the kernels of 9cd0168"
      land_ab decode 60 "off on base"
      ;;
    tests)
      say "== tests: CudaDecode.* with the landing on, then CudaDecode.* and CudaMergeStates.*"
      ATTNFUSE_CUDA_MERGE_LANDING=1 gpu_tests decode_landing 'CudaDecode.*' "$(left 150)"
      gpu_tests decode_merge 'CudaDecode.*:CudaMergeStates.*' "$(left 150)"
      ;;
    landp)
      say "== landp: --suite paged, ATTNFUSE_CUDA_MERGE_LANDING 0 / 1"
      land_ab paged 45 "off on"
      ;;
    abd)
      say "== abd: ATTNFUSE_CUDA_EARLY_L2 16 / 1 / 0"
      knob_ab ATTNFUSE_CUDA_EARLY_L2 "16 1 0" decode 60
      ;;
    merge) merge_part ;;
  esac
  tar czf "$OUT/logs.tgz" -C "$W" .
done
say "done in ${SECONDS}s"
