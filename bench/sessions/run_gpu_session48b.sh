#!/usr/bin/env bash
# Forty-eighth session, second call (carry .devcarry from bench/make_device_carry.sh at HEAD): the
# GPU tests of length-dependent RoPE over device lengths (the documents one three times, fresh
# seeds), after the LSE tolerance took DESIGN §3's 2 x naive rule where that is
# larger (gpu_harness.hpp lse_tolerance; call 1 failed a longrope call's LSE by 0.0136 against
# 0.0116 allowed, its naive LSE 0.03-0.04 off). CAP bounds the whole (default 150 s).
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-150}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$D"
say "== CudaSparse.DocumentsLengthDependentRopeScalings three times (fresh seeds), then the paged one"
GTEST_REPEAT=3 gpu_tests docs_length 'CudaSparse.DocumentsLengthDependentRopeScalings' "$(left 90)"
gpu_tests paged_length 'CudaDecode.PagedLengthDependentRopeScalings' "$(left 60)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
