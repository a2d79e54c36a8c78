#!/usr/bin/env bash
# Twenty-fifth session, after lazy rescaling landed (bench/experiments/lazy_rescale.patch, applied
# to src): its effect on decode and the peer tables, and where a split decode call's tail goes now.
# Build here: bash bench/make_device_carry.sh; the kernels before it in .devcarry-abl/eager:
#   mkdir -p .devcarry-abl/eager && git show 7ce5c15:src/codegen/cuda/kernels/<each file> > ...
#   (git archive 7ce5c15 src/codegen/cuda/kernels | tar -x --strip-components=4 -C .devcarry-abl/eager)
# Device: bash bench/sessions/run_gpu_session25_first.sh, carry [".devcarry", ".devcarry-abl"].
#   1. decode A/B, lazy (the build) against eager (7ce5c15's kernels), every decode cell, 2 rounds;
#   2. gpu_peers.py --suite full (causal and dense against SDPA cuDNN / FA2 and flex);
#   3. gpu_decode.py --suite all (decode with the peers, paged, BigBird, documents);
#   4. the decode phase probe (bench/run_gpu_decode_phases.sh) on this tree.
# CAP bounds the whole (default 480 s). Digest $OUT/digest.txt, logs in $OUT/logs.tgz.
set -uo pipefail
source "$(dirname "$0")/../device_env.sh"
digest_init
CAP=${CAP:-480}
say "== 1. decode A/B, lazy (build) vs eager (7ce5c15 kernels)"
decode_ab "$(left 110)" lazy=.devcarry "eager=.devcarry+ATTNFUSE_KERNEL_DIR=$PWD/.devcarry-abl/eager"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 2. gpu_peers.py --suite full"
timeout "$(left 120)" python3 bench/gpu_peers.py --lib .devcarry/lib/libattnfuse_c.so --suite full \
  --out "$W/peers_full.json" 2>&1 | grep -v Warning > "$W/peers_full.log"
grep -E "^(causal|dense|softcap|relu|additive)" "$W/peers_full.log" | head -60 >> "$D"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 3. gpu_decode.py --suite all"
peer_sweep all all "$(left 120)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "== 4. decode phase probe"
decode_phases "$(left 120)"
tar czf "$OUT/logs.tgz" -C "$W" .
say "done in ${SECONDS}s"
