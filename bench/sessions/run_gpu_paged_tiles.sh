#!/usr/bin/env bash
# Prepared in the thirtieth session, not yet run: the paged decode tile at pages of 16, the one
# paged cell of Llama-3-8B still above 5% (B8 / 32k, +5.1%; staging 1024 page ids did not move
# it). Its calls take 64-key tiles in three stages (two blocks per SM) where the contiguous call
# takes 128 keys; the thirtieth session found two stages of 128 keys fastest for unsplit
# contiguous calls, and 128-key tiles at pages of 16 were last timed in three stages (fifteenth
# session, 70B) and with the producer warp (nineteenth, B8). bench/decode_tile_sweep.sh over the
# quick paged cells (8B B8, 70B B1; every row of the suite takes the named tile, the contiguous
# one included, so compare the _ps16 rows' ms across tiles), two interleaved rounds of:
#   auto, 16,128,4,2,4, 16,128,4,3,4, 16,64,4,4,4.
# Carry .devcarry. CAP bounds the whole (default 300 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-300}
SUITES=paged ROUNDS=2 OUT=$W/tiles timeout "$(left 290)" bash bench/decode_tile_sweep.sh \
  auto 16,128,4,2,4 16,128,4,3,4 16,64,4,4,4 > "$W/tiles.log" 2>&1
say "rc=$?"
grep -E "ps16|attnfuse " "$W/tiles/decode_tile_sweep.txt" | cut -c1-150 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
