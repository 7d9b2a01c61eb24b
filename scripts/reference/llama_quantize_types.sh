#!/usr/bin/env bash
# scripts/reference/llama_quantize_types.sh — the dtype llama-quantize gives each matrix of the
# hybrid and mixture-of-experts fixtures (qwen35, qwen3next, olmoe) in the file types whose rules
# depend on the layer, the expert count or a fused attn_qkv; tests/test_quantize.cpp checks
# gguf::tensor_dtype against this table (scripts/reference/llama_quantize_types.txt).
#   scripts/reference/llama_quantize_types.sh LLAMA_QUANTIZE TOY > scripts/reference/llama_quantize_types.txt
# LLAMA_QUANTIZE: llama.cpp's llama-quantize built from the source node-llama-cpp 3.21.1 ships
# (bench/peer/native.sh builds that tree; `ninja -C bench/peer/llama.cpp/build llama-quantize`).
# TOY: a toy binary, only to list each file's tensors (`toy describe --json`).
set -euo pipefail
quantize=$1 toy=$2
fixtures=${TOY_FIXTURES:-$(dirname "$0")/../../../shared/fixtures}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# family type tensor=dtype … (every tensor of two or more dimensions), from $(basename "$quantize") <f32 fixture> OUT TYPE 1"
for family in qwen35 qwen3next olmoe; do
  for type in Q4_K_M Q4_K_S Q5_K_M Q4_0; do
    "$quantize" "$fixtures/models/$family/$family-f32.gguf" "$tmp/out.gguf" "$type" 1 >/dev/null 2>&1
    "$toy" describe "$tmp/out.gguf" --json | python3 -c '
import json, sys
tensors = json.load(sys.stdin)["tensors"]
print(sys.argv[1], sys.argv[2], " ".join(t["name"] + "=" + t["dtype"] for t in tensors if len(t["shape"]) >= 2))' "$family" "$type"
  done
done
