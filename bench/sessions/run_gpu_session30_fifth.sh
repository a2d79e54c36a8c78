#!/usr/bin/env bash
# The thirtieth session's fifth device call: unsplit decode calls on Hopper's 128-key tile take
# two stages instead of three (passes::cuda_decode_tile; the fourth call's sweep had it fastest at
# B32). Build: bash bench/make_device_carry.sh; the library before the change (the third and
# fourth calls') in .devcarry-base/lib. Carry .devcarry and .devcarry-base.
#   1. CudaDecode.*, 8 shards;
#   2. the decode and paged suites, ours only, two interleaved rounds, base against new;
#   3. the decode suite with SDPA-cuDNN on the new build.
# CAP bounds the whole (default 400 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-400}
say "== 1. CudaDecode.*, 8 shards"
GTEST_FILTER='CudaDecode.*' gpu_suite_sharded "$(left 150)" 8
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. decode and paged suites: three stages (base) / two (new) for unsplit 128-key tiles, ours only"
SUITE=decode AB=decode decode_ab "$(left 130)" base=.devcarry-base new=.devcarry
SUITE=paged AB=paged decode_ab "$(left 100)" base=.devcarry-base new=.devcarry
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. the decode suite with SDPA-cuDNN"
timeout "$(left 80)" python3 bench/gpu_decode.py --lib .devcarry/lib/libattnfuse_c.so --suite decode \
  --peers sdpa_cudnn --out "$W/peers" > "$W/peers.log" 2>&1
say "rc=$?"
grep -E '^llama.* (attnfuse|sdpa_cudnn) ' "$W/peers.log" | cut -c1-110 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
