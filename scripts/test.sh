#!/usr/bin/env bash
# scripts/test.sh — the whole test suite: release build with GCC + CTest, then the unit tests
# again built with clang under AddressSanitizer + UndefinedBehaviorSanitizer, then a short
# libFuzzer run. Both builds treat warnings as errors (TOY_WERROR), so the tree compiles
# without a warning on GCC and on clang. Fixtures come from $TOY_FIXTURES (default
# ../shared/fixtures); tests that need them skip with a message when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export TOY_FIXTURES="${TOY_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"

scripts/setup.sh build -DTOY_WERROR=ON
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900

echo "== sanitizers (ASan + UBSan, clang) =="
cmake -S . -B build-asan-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOY_SANITIZE=ON \
      -DTOY_WERROR=ON >/dev/null
cmake --build build-asan-clang -j "$(nproc)"  # everything, bench and examples included: clang's warnings
# The unit and parity suites under the sanitizers; the slow end-to-end suites (training,
# serving, installing and building projects) and the memory measurement (ZeroCopy: the
# sanitizer's own heap would swamp it) run in the release build above.
ASAN_SUITES="Gguf*:Quant*:Kernel*:Tokenizer*:StreamDecoder*:Jinja*:ChatTemplate*:ChatFixtures*:LongReference*"
ASAN_SUITES+=":Gemma2*:Moe*:Olmoe*:Gpt2*:Archs*:Models*:Infer*:Cli.*:Style*"
ASAN_SUITES+=":BatchDecode*:KvCache*:Sampler*:Autograd*:GradCheck*:PrimitiveGradients*:Eval*:Card*:TrainData*:Attention*:Rope*:TensorStorage*:CliManifest*"
ASAN_SUITES+=":Idx*:Pgm*:Png*:DeltaRule*:DeltaNet*:JsonlData*"  # image readers, Gated DeltaNet, JSONL examples
ASAN_SUITES+=":Grammar*:Dragon*:VitAugment*"  # GBNF and its token mask, the Dragon architecture (Attention* covers its variants)
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 TOY_BIN="$PWD/build-asan-clang/toy" \
  build-asan-clang/tests/toy_tests --gtest_filter="${TOY_ASAN_FILTER:-$ASAN_SUITES}" --gtest_brief=1

# libFuzzer: clang and its runtime (libclang-rt-14-dev) come from scripts/setup.sh.
fuzz_ok() {
  command -v clang++ >/dev/null || return 1
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > /tmp/toy_fuzz_probe.cpp
  clang++ -fsanitize=fuzzer /tmp/toy_fuzz_probe.cpp -o /tmp/toy_fuzz_probe 2>/dev/null
}
if fuzz_ok; then
  echo "== fuzz (short run) =="
  scripts/fuzz.sh all 15  # each target 15 s from its seeds; longer campaigns: docs/fuzzing.md
else
  echo "== fuzz: skipped (clang with libFuzzer not available) =="
fi
echo "test.sh: all suites passed"
