#!/usr/bin/env bash
# bench/peer/vulkan.sh — toy's Vulkan backend against llama.cpp's on one GGUF and one device.
#   bench/peer/vulkan.sh MODEL.gguf [DEVICE] [REPS]      (DEVICE: vulkan:N, default vulkan:0)
# llama.cpp: llama-bench built with its Vulkan backend by `VULKAN=1 bench/peer/native.sh`
# (bench/peer/llama.cpp/build-vulkan), all layers offloaded (-ngl 99) to the same device index
# (GGML_VK_VISIBLE_DEVICES, which also makes ggml use a CPU device such as lavapipe: it skips
# those unless named). On lavapipe (Mesa's CPU driver) the figures say little about a GPU,
# but both backends run the same driver on the same cores. Prints one table; not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$(realpath "$1")"; device="${2:-vulkan:0}"; reps="${3:-3}"
toy="${TOY_BIN:-$here/../../build/toy}"
index="${device#vulkan:}"; [ "$index" = vulkan ] && index=0
llama_bench="$here/llama.cpp/build-vulkan/bin/llama-bench"
[ -x "$llama_bench" ] || { echo "vulkan.sh: $llama_bench missing: run VULKAN=1 bench/peer/native.sh" >&2; exit 1; }
native=$(GGML_VK_VISIBLE_DEVICES="$index" "$llama_bench" -m "$model" -ngl 99 -p 512 -n 128 -r "$reps" -o json 2>/dev/null)
mine=$("$toy" bench "$model" --device "$device" --reps "$reps" --json)
python3 - "$mine" "$model" "$native" <<'PY'
import json, statistics, sys
mine, model, native = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
nat = {}
for r in native:  # llama-bench: one record per test, samples_ts the tokens/s of each repetition
    key = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    nat[key] = statistics.median(r["samples_ts"])
    backend = f"{r.get('backends', '?')} on {r.get('gpu_info', '?')}"
print(f"{model} on {mine['device']} (median of {mine['reps']}); llama.cpp: {backend}")
print(f"{'':8}{'toy':>10}{'llama-bench':>13}{'ratio':>7}")
for k in ("pp512", "tg128"):
    t = mine[k]
    print(f"{k:8}{t:10.2f}{nat[k]:13.2f}{t / nat[k]:7.2f}" if t and k in nat else f"{k:8}{'—':>10}")
PY
