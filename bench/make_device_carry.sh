#!/usr/bin/env bash
# Builds the GPU-side binaries here (portable x86-64, no -march=native) and gathers them with the
# shared libraries the device image lacks into .devcarry/, which the device call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNFUSE_NATIVE=OFF >/dev/null
cmake --build build-dev --target test_gpu attnfuse_c dispatch_bench attnfuse_cli -j"$(nproc)"
rm -rf .devcarry && mkdir -p .devcarry/lib
cp build-dev/bin/test_gpu build-dev/bin/dispatch_bench build-dev/bin/attnfuse .devcarry/
cp build-dev/lib/libattnfuse_c.so .devcarry/lib/
for l in libfmt.so.9 libgomp.so.1 libcrypto.so.3; do cp -L "/usr/lib/x86_64-linux-gnu/$l" .devcarry/lib/; done
# BASE_KERNELS=<commit>: that commit's kernel templates beside the build, in .devcarry/basek, for
# an A/B through ATTNFUSE_KERNEL_DIR against the embedded ones (FwdParams' layout must match).
if [ -n "${BASE_KERNELS:-}" ]; then
  mkdir -p .devcarry/basek
  git archive "$BASE_KERNELS" src/codegen/cuda/kernels | tar -x --strip-components=4 -C .devcarry/basek
fi
du -sh .devcarry
