#!/usr/bin/env bash
# Twenty-fifth session, second call, on fd587fa's build (lazy rescaling in every kernel):
#   1. the decode and sparse GPU tests on bench/experiments/decode_merge_acqrel.patch (the split
#      count as one acq_rel atomic by thread 0 instead of a fence in every thread, a relaxed
#      atomic and a second fence), through ATTNFUSE_KERNEL_DIR=.devcarry-abl/acqrel, 8 shards;
#   2. decode A/B, acqrel against the build, every decode cell, 2 rounds;
#   3. gpu_decode.py --suite decode with the peers (a second sweep on this build);
#   4. gpu_rope.py --suite peers (fused RoPE against the peers with a compiled pre-rotation);
#   5. gpu_rope.py --suite window up to 32k (rope_window on vs off).
# Build here: bash bench/make_device_carry.sh; rm -rf .devcarry-abl/acqrel && cp -r
# src/codegen/cuda/kernels .devcarry-abl/acqrel && patch -p1 -d .devcarry-abl/acqrel <
# bench/experiments/decode_merge_acqrel.patch. Device: carry [".devcarry", ".devcarry-abl"].
# CAP bounds the whole (default 520 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-520}
say "== 1. CudaDecode.*:CudaSparse.* on .devcarry-abl/acqrel, 8 shards"
GTEST_FILTER='CudaDecode.*:CudaSparse.*' ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/acqrel gpu_suite_sharded "$(left 150)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode A/B, acqrel vs build"
decode_ab "$(left 110)" build=.devcarry "acqrel=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/acqrel"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite decode"
peer_sweep decode decode "$(left 60)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. gpu_rope.py --suite peers"
timeout "$(left 120)" python3 bench/gpu_rope.py --lib .devcarry/lib/libattnfuse_c.so --cli .devcarry/attnfuse --suite peers \
  --out "$W/rope_peers.json" 2>&1 | grep -v Warning > "$W/rope_peers.log"
say "rc=$?"
grep -E "attnfuse_rope_auto|x[0-9]" "$W/rope_peers.log" | head -60 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 5. gpu_rope.py --suite window (N <= 32k)"
window_suite "$(left 130)" --max-n 32768
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
