#!/usr/bin/env bash
# Session 28, second and third device calls. New build (.devcarry): call2, decode tiles sum the
# probabilities as P V reads them (rounded to the element type; not kept: the LSE took their
# rounding); call3, decode tiles keep the eager maximum instead of the lazy one. Base
# (.devcarry-base): 38f8c72's libattnfuse_c.so.
#   1. the seed that failed CudaDecode.DtypesAndHeadDims in session 27 (call4, replayed in call5),
#      replayed on the new build: it must pass now (call3: with the new test on those inputs);
#   2. the whole GPU suite, 8 shards, new build;
#   3. decode A/B base / new, two rounds (the quick decode cells and the 70B one): level expected;
#   4. gpu_decode.py --suite all with the peers on the new build (the README's tables).
# Build here first: cp the old .devcarry/lib/libattnfuse_c.so to .devcarry-base/lib/, then
# bash bench/make_device_carry.sh; carry .devcarry and .devcarry-base. Digest $OUT/digest.txt,
# logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-575}
say "== 1. CudaDecode.DtypesAndHeadDims at seed 4447857088062076409"
ATTNFUSE_TEST_SEED=4447857088062076409 gpu_tests replay \
  'CudaDecode.DtypesAndHeadDims:CudaDecode.PeakedRows*' "$(left 90)"
say "== 2. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 300)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. decode A/B base / new"
CELLS=${AB_CELLS:-"1,32,8,4096;1,32,8,32768;8,32,8,32768;32,32,8,32768;1,64,8,32768"} SUITE=decode AB=round \
  decode_ab "$(left 200)" base=.devcarry-base new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
if [ "${SWEEP:-1}" = 1 ]; then
  say "== 4. gpu_decode.py --suite all"
  peer_sweep all all "$(left 600)"
fi
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
