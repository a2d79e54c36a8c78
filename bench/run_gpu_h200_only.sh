#!/usr/bin/env bash
# Runs the given bench/run_gpu_*.sh script only on an H200, whose figures the issue-5 targets
# name; on any other card it prints the card and exits at once, so a call that was lent another
# card costs its start and not the sweep (the same sweep on an H100 is in
# bench/results/2026-12-07-h100-session51/call1/).
#   CAP=450 bash bench/run_gpu_h200_only.sh bench/sessions/run_gpu_session49b.sh
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" != *H200* ]]; then
  echo "not an H200 ($name): nothing run"
  exit 0
fi
exec bash "$@"
