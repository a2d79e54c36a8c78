#!/usr/bin/env bash
# Session 27, one device call: packed documents on Hopper copy K/V by TMA in the wgmma tile (the
# producer warpgroup at D = 128), where they used cp.async and the lockstep loop.
#   1. the whole GPU suite, 8 shards, on the new build (.devcarry), with the new test
#      CudaSparse.DocumentsKeepTheirNeighboursNonFiniteValuesOut;
#   2. gpu_decode.py --suite documents, ours only, two interleaved rounds of the build before
#      (.devcarry-base: 96e4d0a's libattnfuse_c.so) and the new one; Llama-3-8B and GPT-2 cells;
#   3. the same suite with the peers (flex, FA2 varlen) on the new build.
# Build here first: cp the old .devcarry/lib/libattnfuse_c.so to .devcarry-base/lib/, then
# bash bench/make_device_carry.sh; carry .devcarry and .devcarry-base. Digest $OUT/digest.txt,
# logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-540}
say "== 1. the whole GPU suite, 8 shards"
gpu_suite_sharded "$(left 240)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. documents, ours only: base / new, two rounds"
docs_ab 60
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. documents with the peers, new build"
peer_sweep docs_peers documents "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
