#!/usr/bin/env bash
# Twenty-sixth session, fourth call. The last call's A/B had this session's final build slower
# than the base at the split decode cells (8B B1 4k 0.0105 -> 0.0126 ms), while the second call's
# variants (the same changes, but the split merge's loads past the last part clamped to a valid
# part instead of predicated off) were level or faster. Kernel directories (carry .devcarry,
# .devcarry-base and .devcarry-abl):
#   unpred/  the final tree's kernels with the clamped loads (call2's u16 form);
#   k8/      the final tree's kernels with bf52371's combine.cuh (the merge as before).
#   1. decode_ab at 8B B1 4k / 32k, B8 4k and 70B B1 / 32k: base, final, unpred, k8, 2 rounds;
#   2. decode_ab on SUITE=paged (the last call also had 8B B32 pages of 16 0.929x): base, k8,
#      unpred, 2 rounds;
#   3. the decode and sparse GPU tests on unpred/ (8 shards), in what time is left.
# CAP bounds the whole (default 420 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-420}
A=$PWD/.devcarry-abl
say "== 1. decode A/B: base final unpred k8"
CELLS="1,32,8,4096;1,32,8,32768;8,32,8,4096;1,64,8,32768" AB=decode SUITE=decode decode_ab "$(left 160)" \
  base=.devcarry-base final=.devcarry unpred=".devcarry+ATTNFUSE_KERNEL_DIR=$A/unpred" \
  k8=".devcarry+ATTNFUSE_KERNEL_DIR=$A/k8"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. paged A/B: base k8 unpred"
SUITE=paged decode_ab "$(left 140)" base=.devcarry-base k8=".devcarry+ATTNFUSE_KERNEL_DIR=$A/k8" \
  unpred=".devcarry+ATTNFUSE_KERNEL_DIR=$A/unpred"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode and sparse GPU tests on unpred/"
ATTNFUSE_KERNEL_DIR=$A/unpred GTEST_FILTER='CudaDecode.*:CudaSparse.*' gpu_suite_sharded "$(left 170)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
