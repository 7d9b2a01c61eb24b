#!/usr/bin/env bash
# scripts/test.sh — the whole test suite: release build with GCC + CTest, then the unit tests
# again built with clang under AddressSanitizer + UndefinedBehaviorSanitizer, then a short
# libFuzzer run of the fuzz targets built in that same tree; each phase prints the seconds so
# far. Both builds treat warnings as errors (TOY_WERROR), so the tree compiles without a warning
# on GCC and on clang. Fixtures come from $TOY_FIXTURES (default
# ../shared/fixtures); tests that need them skip with a message when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export TOY_FIXTURES="${TOY_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"

# llama.cpp for the tests that check toy's files in it (trained checkpoints, LoRA adapters):
# node-llama-cpp's prebuilt CPU binary for x86-64 (about 80 MB from the npm registry), fetched
# while toy builds. Without it those tests skip and say so.
peer_pid=""
if [ "$(uname -m)" = x86_64 ] && command -v npm >/dev/null && [ ! -d bench/peer/node_modules/node-llama-cpp ]; then
  (cd bench/peer && timeout 600 npm i -E --no-save --no-audit --no-fund --omit=optional \
     node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1) >/tmp/toy-peer-npm.log 2>&1 &
  peer_pid=$!
fi
scripts/setup.sh build -DTOY_WERROR=ON
if [ -n "$peer_pid" ] && ! wait "$peer_pid"; then
  echo "test.sh: installing node-llama-cpp failed (/tmp/toy-peer-npm.log); the llama.cpp checks will skip"
fi
echo "== release build done in $SECONDS s =="
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900

echo "== sanitizers and fuzzers (ASan + UBSan, clang; $SECONDS s so far) =="
# libFuzzer: clang and its runtime (libclang-rt-14-dev) come from scripts/setup.sh. The fuzz
# targets are built in the sanitizer tree (-DTOY_BUILD_FUZZ=ON), so the libraries compile once.
fuzz_ok() {
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > /tmp/toy_fuzz_probe.cpp
  clang++ -fsanitize=fuzzer /tmp/toy_fuzz_probe.cpp -o /tmp/toy_fuzz_probe 2>/dev/null
}
FUZZ=OFF
fuzz_ok && FUZZ=ON
# -O1 (AddressSanitizer's recommended level; the kernels keep -O2, CMakeLists.txt) and line tables
# only (stack traces keep file:line, without the types and variables a debugger would use):
# against -O2 -g, 13–25% less compile time a file (serve/tool_calls.cpp 33 → 25 s, cards/card.cpp
# 30 → 26 s, on a busy machine).
cmake -S . -B build-asan-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOY_SANITIZE=ON \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DTOY_BUILD_FUZZ=$FUZZ -DTOY_WERROR=ON >/dev/null
# The tests and the CLI they run (the benchmarks and examples are built, warning-free, by GCC above).
cmake --build build-asan-clang -j "$(nproc)" --target toy_cli toy_tests
# The unit and parity suites under the sanitizers; the slow end-to-end suites (training,
# serving, installing and building projects) and the memory measurement (ZeroCopy: the
# sanitizer's own heap would swamp it) run in the release build above.
ASAN_SUITES="Gguf*:Quant*:Kernel*:Tokenizer*:StreamDecoder*:Jinja*:ChatTemplate*:ChatFixtures*:LongReference*"
ASAN_SUITES+=":Gemma2*:Moe*:Olmoe*:Gpt2*:Archs*:Models*:Infer*:Cli.*:Style*"
ASAN_SUITES+=":BatchDecode*:KvCache*:Sampler*:Autograd*:GradCheck*:PrimitiveGradients*:Eval*:Card*:TrainData*:Attention*:Rope*:TensorStorage*:CliManifest*"
ASAN_SUITES+=":Idx*:Pgm*:Png*:DeltaRule*:DeltaNet*:JsonlData*"  # image readers, Gated DeltaNet, JSONL examples
ASAN_SUITES+=":Grammar*:Dragon*:VitAugment*"  # GBNF and its token mask, the Dragon architecture (Attention* covers its variants)
ASAN_SUITES+=":Vulkan*"  # the Vulkan backend's host code on lavapipe, each test on a context of its own
# Left to the release build: end-to-end runs whose code the unit suites above already cover
# (a 135M-parameter quantization; perplexity windows that start `toy eval` twenty times).
ASAN_SUITES+="-QuantFileTypes.InitWritesTheQ4_K_MMix:Eval.Perplexity*"
echo "== sanitizer suites ($SECONDS s so far) =="
# lavapipe under LeakSanitizer. The Vulkan loader unloads the driver when an instance is destroyed,
# and what the driver allocated once (under pthread_once) is then referenced from nowhere: loading
# the driver up front keeps it mapped. The tests on the process-wide device (*OnVulkan*) leave it
# open at exit and run with the driver's own allocations suppressed (scripts/lsan-lavapipe.supp);
# the Vulkan* suites close their contexts and run without it.
lavapipe="$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -1)"
[ -e "$lavapipe" ] || lavapipe=""
# The suites in gtest shards, one a core at a time, each shard's log printed and any failing shard
# failing the script. Four shards a core, so that a slow shard does not leave a core idle at the
# end: with one a core, the two ended after 164 s and 112 s. The device tests go first, in two
# shards of their own (the 200-token references on lavapipe are the slowest of all).
JOBS="$(nproc)"
SHARDS=$((4 * JOBS))
shard_pids=()
shard() {  # shard <log> <index> <count> <filter> [suppressions]
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
  LD_PRELOAD="$lavapipe" LSAN_OPTIONS="${5:+suppressions=$5}" ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1 TOY_BIN="$PWD/build-asan-clang/toy" \
    GTEST_TOTAL_SHARDS=$3 GTEST_SHARD_INDEX=$2 build-asan-clang/tests/toy_tests \
    --gtest_filter="$4" --gtest_brief=1 >"build-asan-clang/$1.log" 2>&1 &
  shard_pids+=("$!")
}
rm -f build-asan-clang/shard-*.log build-asan-clang/device-*.log
if [ -z "${TOY_ASAN_FILTER:-}" ]; then
  for i in 0 1; do shard "device-$i" "$i" 2 "*OnVulkan*-ServeSdk.*" "$PWD/scripts/lsan-lavapipe.supp"; done
fi
for ((i = 0; i < SHARDS; i++)); do
  shard "shard-$i" "$i" "$SHARDS" "${TOY_ASAN_FILTER:-$ASAN_SUITES:*OnVulkan*}"
done
failed=0
for pid in "${shard_pids[@]}"; do
  wait "$pid" || failed=1
done
cat build-asan-clang/device-*.log build-asan-clang/shard-*.log 2>/dev/null
[ "$failed" = 0 ] || { echo "sanitizer suites failed (logs above)" >&2; exit 1; }

if [ "$FUZZ" = ON ]; then
  echo "== fuzz (short run; $SECONDS s so far) =="
  TOY_FUZZ_BUILD=build-asan-clang scripts/fuzz.sh all 15  # each target 15 s from its seeds; longer campaigns: docs/fuzzing.md
else
  echo "== fuzz: skipped (clang with libFuzzer not available) =="
fi
echo "test.sh: all suites passed in $SECONDS s"
