#!/usr/bin/env bash
# bench/peer/native.sh — builds llama.cpp's own tools for this machine from the source that
# node-llama-cpp 3.21.1 ships (node_modules/node-llama-cpp/llama/gitRelease.bundle), so the
# side-by-side runs also have llama.cpp without node in the way: the prebuilt binaries target a
# generic x86-64 and node-llama-cpp runs each token through the JavaScript event loop, which on
# 2 cores competes with the compute threads. No network beyond npm; not part of CI.
#   bench/peer/native.sh                          -> bench/peer/llama.cpp/build/bin/llama-bench
#   bench/peer/native.sh llama-bench llama-server -> both (the server for bench/serve_vs_llama_server.sh)
# With VULKAN=1 it builds llama.cpp's Vulkan backend as well (-DGGML_VULKAN=ON; Debian's
# libvulkan-dev and glslc, which scripts/setup.sh installs, and spirv-headers, installed here) into
# llama.cpp/build-vulkan, for
# bench/peer/vulkan.sh: toy's Vulkan backend against llama.cpp's on the same device.
# The arguments are the CMake targets to build (default: llama-bench); bench/peer/run.sh and
# bench/serve_vs_llama_server.sh look for them in bench/peer/llama.cpp/build/bin/. A link
# bench/peer/llama.cpp -> an existing llama.cpp checkout with such a build works as well.
#
# For the CPU it runs on: GGML_NATIVE compiles with -march=native. Where /proc/cpuinfo lists AMX
# (amx_tile, amx_int8, amx_bf16) that also defines __AMX_INT8__ and enables ggml's AMX kernels,
# yet a VM may advertise AMX while the hypervisor does not enable its tile state, and the first
# tile instruction then traps (SIGILL). So with AMX flags present the build adds -mno-amx-tile
# -mno-amx-int8 -mno-amx-bf16 (GCC and Clang give an explicit -mno-* precedence over -march,
# whatever the order) and sets GGML_AMX_*=OFF (ggml's switches for builds without GGML_NATIVE).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(llama-bench)
[ -d "$here/node_modules/node-llama-cpp" ] || (cd "$here" && npm i -E --no-audit --no-fund node-llama-cpp@3.21.1 >/dev/null)
src="$here/llama.cpp"
[ -d "$src/.git" ] || git clone -q "$here/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src"
flags=""
amx=()
if grep -qwE 'amx_tile|amx_int8|amx_bf16' /proc/cpuinfo 2>/dev/null; then
  flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  amx=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  echo "native.sh: the CPU lists AMX; building without it ($flags)" >&2
fi
build="$src/build"
backend=()
if [ "${VULKAN:-0}" = 1 ]; then
  if ! dpkg-query -W -f='${Status}' spirv-headers 2>/dev/null | grep -q "install ok installed"; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends spirv-headers >/dev/null
  fi
  build="$src/build-vulkan"
  # Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings (1.3.261), which
  # ggml-vulkan uses only to turn on the validation layer's best-practice checks (a debugging
  # aid): without the newer headers, that setting is left out of the instance it creates.
  if ! grep -q "VkLayerSettingEXT" /usr/include/vulkan/vulkan_core.h; then
    python3 - "$src/ggml/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
s = re.sub(r"    VkBool32 enable_best_practice = layer_settings;\n.*?vk::LayerSettingsCreateInfoEXT layer_setting_info\(settings\);\n",
           "    (void)layer_settings;  // bench/peer/native.sh: no VK_EXT_layer_settings in these headers\n", s, flags=re.S)
s = s.replace("layers, extensions, &layer_setting_info);", "layers, extensions);")
open(p, "w").write(s)
PY
  fi
  backend=(-DGGML_VULKAN=ON)
fi
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON "${amx[@]}" "${backend[@]}" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}"
for t in "${targets[@]}"; do echo "built $build/bin/$t"; done
