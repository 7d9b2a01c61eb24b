#!/usr/bin/env bash
# bench/peer/native.sh — builds llama.cpp's own `llama-bench` for this machine from the source
# that node-llama-cpp 3.21.1 ships (node_modules/node-llama-cpp/llama/gitRelease.bundle), so the
# side-by-side run also has llama.cpp without node in the way: the prebuilt binaries target a
# generic x86-64 and node-llama-cpp runs each token through the JavaScript event loop, which on
# 2 cores competes with the compute threads. No network beyond npm; not part of CI.
#   bench/peer/native.sh            -> bench/peer/llama.cpp/build/bin/llama-bench
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ -d "$here/node_modules/node-llama-cpp" ] || (cd "$here" && npm i -E --no-audit --no-fund node-llama-cpp@3.21.1 >/dev/null)
src="$here/llama.cpp"
[ -d "$src/.git" ] || git clone -q "$here/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src"
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$src/build" --target llama-bench
echo "built $src/build/bin/llama-bench"
