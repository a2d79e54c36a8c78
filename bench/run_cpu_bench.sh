#!/usr/bin/env bash
# The one command that reruns the CPU benchmark against PyTorch: builds the CLI (Release), then
# runs bench/cpu_vs_torch.py (which sets up bench/.venv-bench with torch on first use).
# Usage: bench/run_cpu_bench.sh [--quick] [--threads N]   (BUILD=dir to use another build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
tools/install_deps.sh
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target attnfuse_cli -j "$(nproc)"
exec python3 bench/cpu_vs_torch.py --cli "$BUILD/bin/attnfuse" "$@"
