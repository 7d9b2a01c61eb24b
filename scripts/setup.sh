#!/usr/bin/env bash
# scripts/setup.sh — install toy's build dependencies from Debian's packages and build it.
# Idempotent; works as root without a TTY (uses sudo when not root).
# Usage: scripts/setup.sh [build-dir [cmake options...]]   (scripts/test.sh adds -DTOY_WERROR=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build}"
shift || true

PACKAGES=(build-essential cmake ninja-build pkg-config git
          libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev libcpp-httplib-dev libcurl4-openssl-dev
          zlib1g-dev libpng-dev dataset-fashion-mnist  # IDX .gz and PNG images; toy train vit's data
          libopenmpi-dev openmpi-bin  # training over several processes (mpirun; docs/distributed.md)
          python3-jsonschema clang libclang-rt-14-dev clang-format  # tests: events schema; sanitizer build, format check
          libsimde-dev  # tests: the AVX-512 float tiles emulated on CPUs without AVX-512 (header-only)
          libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools)  # the Vulkan backend and its shader compiler; lavapipe runs it on the CPU (docs/vulkan.md)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/toy"
