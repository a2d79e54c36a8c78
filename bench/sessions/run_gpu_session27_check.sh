#!/usr/bin/env bash
# Session 27, second device call, on the final tree's build (bash bench/make_device_carry.sh;
# carry .devcarry and .devcarry-abl):
#   1. CudaSparse.Documents* (the new neighbours test among them) on the final kernels;
#   2. the neighbours test against kernels whose zero_foreign_v_rows returns at once
#      (.devcarry-abl/nozero: a copy of src/codegen/cuda/kernels/ with `|| true` added to its
#      early return): it must fail, or it tests nothing;
#   3. the README's CUDA document example (attnfuse run ... --device cuda --check).
# Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-300}
say "== 1. CudaSparse.Documents*, final kernels"
gpu_tests docs 'CudaSparse.Documents*' "$(left 150)"
say "== 2. the neighbours test without the zeroing (expected to FAIL)"
ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/nozero gpu_tests nozero 'CudaSparse.DocumentsKeepTheirNeighboursNonFiniteValuesOut' "$(left 100)"
say "== 3. the README's CUDA document example"
timeout "$(left 60)" .devcarry/attnfuse run "softmax(document(causal(scaled_dot_product(Q, K)))) @ V" \
  --shape 1,32,8,4096,4096,128 --dtype bf16 --seed 3 --check --device cuda > "$W/readme_docs.log" 2>&1
say "rc=$?"
tail -8 "$W/readme_docs.log" | tee -a "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
