#!/usr/bin/env bash
# Forty-eighth session, second call (carry .devcarry from bench/make_device_carry.sh at HEAD): the
# GPU tests of length-dependent RoPE over device lengths, twice each with fresh seeds, and the
# other document tests, after the LSE tolerance took DESIGN §3's 2 x naive rule where that is
# larger (gpu_harness.hpp lse_tolerance; call 1 failed a longrope call's LSE by 0.0136 against
# 0.0116 allowed, its naive LSE 0.03-0.04 off). CAP bounds the whole (default 200 s).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
digest_init
CAP=${CAP:-200}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== the length-dependent RoPE tests (twice) and the document tests, 4 shards"
GTEST_REPEAT=2 GTEST_FILTER='CudaSparse.Documents*:CudaDecode.PagedLengthDependentRopeScalings' \
  gpu_suite_sharded "$(left 170)" 4
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
