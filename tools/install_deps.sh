#!/usr/bin/env bash
# Installs what building and testing attnfuse needs on a fresh Debian machine (as root), and
# nothing when everything is already there. Called by `make demo` / `make test`.
set -euo pipefail

packages=(cmake ninja-build gcc g++ binutils make pkg-config libgtest-dev libgmock-dev libssl-dev
          libcli11-dev libfmt-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# OpenMP ships with g++ (libgomp); nothing else to fetch. gcc compiles the C callers of the ABI
# tests (tests/runtime/capi_c_callers.c). binutils (a dependency of gcc, named for what it is used
# for): ld -r and objcopy make the CPU kernel's per-level objects, nm and objdump check them.
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
