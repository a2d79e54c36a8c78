#!/usr/bin/env bash
# Session 27, third device call: packed documents' decode tiles copy K/V by TMA too (varlen decode).
# Build here (bash bench/make_device_carry.sh) and keep the build before it as
# .devcarry-base/lib/libattnfuse_c.so (cafcb5e: documents by TMA in the wgmma tile only); carry
# .devcarry and .devcarry-base.
#   1. the GPU tests that run documents and decode (CudaSparse.*, CudaDecode.*) on the new build;
#   2. gpu_decode.py --suite documents, ours only, base / new, two interleaved rounds (the
#      prefill cells must not move; the varlen decode cell is the change);
#   3. the same suite with the peers on the new build.
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-560}
say "== 1. CudaSparse.*, CudaDecode.*"
gpu_tests sparse_decode 'CudaSparse.*:CudaDecode.*' "$(left 300)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. documents and varlen decode, ours only: base / new, two rounds"
docs_ab 60
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. documents and varlen decode with the peers, new build"
peer_sweep docs_peers documents "$(left 150)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
