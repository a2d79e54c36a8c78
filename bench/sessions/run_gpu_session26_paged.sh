#!/usr/bin/env bash
# Twenty-sixth session, second call: where a paged decode call's extra time goes, and two ways
# to cut it (build here: bash bench/make_device_carry.sh, then the kernel variants below into
# .devcarry-abl/; carry .devcarry and .devcarry-abl).
# The first call's phase probe (bench/results/2026-12-03-h200-session26/call1/) put the paged
# 70B B1 / 32k overhead in the prologue (wait -> main loop): 1.4 us contiguous, 3.6 us at pages
# of 64, 7.7 us at pages of 16. Variants, kernel directories from this tree's kernels:
#   keep/  the page table (indptr, last_page_len, the staged page ids) read with an L2
#          evict_last policy, so the K/V stream of the call before does not evict it;
#   p1/    the producer warp (pages of 16 at 70B) issues only the first tile before the block
#          barrier, the rest after it (from the staged list), instead of all kStages tiles;
#   both/  the two together; and prodboth: both/ with ATTNFUSE_CUDA_DECODE_PRODUCER=1 (every
#          TMA decode tile takes the producer warp, pages of 64 included);
#   u16/   the split merge loads all 16 splits' partial rows with the LSEs (SplitMerge::kUnroll
#          16, was 8): the probe put 1.0-1.3 us of the 70B merge in its second round of loads.
#   1. decode_ab on SUITE=paged (contiguous and paged cells), base / keep / p1 / both / prodboth, 2 rounds;
#   2. decode_ab on SUITE=decode, base / u16, 2 rounds;
#   3. the phase probe (MERGE lines now printed after the tail's last timestamp) at 70B B1 /
#      32k, contiguous and paged, on the base kernels.
# CAP bounds the whole (default 540 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
A=$PWD/.devcarry-abl
say "== 1. paged A/B: base keep p1 both prodboth"
AB=paged SUITE=paged decode_ab "$(left 300)" base=.devcarry keep=".devcarry+ATTNFUSE_KERNEL_DIR=$A/keep" \
  p1=".devcarry+ATTNFUSE_KERNEL_DIR=$A/p1" both=".devcarry+ATTNFUSE_KERNEL_DIR=$A/both" \
  prodboth=".devcarry+ATTNFUSE_KERNEL_DIR=$A/both+ATTNFUSE_CUDA_DECODE_PRODUCER=1"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode A/B: base u16"
SUITE=decode decode_ab "$(left 120)" base=.devcarry u16=".devcarry+ATTNFUSE_KERNEL_DIR=$A/u16"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. phases at 70B B1 / 32k"
CELLS=1,64,8,32768 PDLS=1 decode_phases "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
