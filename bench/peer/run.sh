#!/usr/bin/env bash
# bench/peer/run.sh — toy vs llama.cpp side by side on one GGUF, same machine, same threads.
#   [PEERS="node native"] bench/peer/run.sh MODEL.gguf [THREADS] [REPS]
# Peers: node-llama-cpp 3.21.1 (prebuilt llama.cpp CPU binaries; installed into
# bench/peer/node_modules on first use) and, once bench/peer/native.sh has built it, llama.cpp's
# own llama-bench compiled from the same source for this CPU. PEERS=native skips node-llama-cpp
# (for big models, where each peer costs minutes). Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$(realpath "$1")"; threads="${2:-2}"; reps="${3:-3}"
toy="${TOY_BIN:-$here/../../build/toy}"
peers="${PEERS:-node native}"
peer="{}"
if [[ " $peers " == *" node "* ]]; then
  [ -d "$here/node_modules/node-llama-cpp" ] || (cd "$here" && npm i -E --no-audit --no-fund node-llama-cpp@3.21.1 >/dev/null)
  n_vocab=$("$toy" describe "$model" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokenizer"]["n_vocab"])')
  peer=$(cd "$here" && node peer.mjs "$model" "$threads" "$n_vocab" "$reps")
fi
native="[]"
llama_bench="$here/llama.cpp/build/bin/llama-bench"
[[ " $peers " == *" native "* && -x "$llama_bench" ]] && native=$("$llama_bench" -m "$model" -t "$threads" -p 512 -n 128 -r "$reps" -o json 2>/dev/null)
mine=$("$toy" bench "$model" --threads "$threads" --reps "$reps" --json)
python3 - "$peer" "$mine" "$model" "$native" <<'PY'
import json, statistics, sys
peer, mine, model, native = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
# llama-bench: one record per test; its samples are tokens/s of each repetition.
nat = {}
for r in native:
    key = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    nat[key] = statistics.median(r["samples_ts"])
print(f"{model}  ({mine['threads']} threads, median of {mine['reps']})")
print(f"toy's path: {mine['isa']['level']} (CPU: {mine['isa']['cpu']}); "
      + ", ".join(f"{d} {k}" for d, k in mine["kernels"].items()))
head = f"{'':8}{'toy':>10}"
if peer: head += f"{'node-llama-cpp':>16}{'ratio':>7}"
if nat: head += f"{'llama-bench':>13}{'ratio':>7}"
print(head)
for k in ("pp512", "tg128"):
    t = mine[k]
    line = f"{k:8}{t:10.1f}"
    if peer: line += f"{peer[k]:16.1f}{t / peer[k]:7.2f}"
    if k in nat: line += f"{nat[k]:13.1f}{t / nat[k]:7.2f}"
    print(line)
roof = mine["roofline_tok_s"]
print(f"generation as share of the {mine['bandwidth_gbs']:.1f} GB/s roofline: toy {100 * mine['roofline_fraction']:.0f}%"
      + (f", node-llama-cpp {100 * peer['tg128'] / roof:.0f}%" if peer else "")
      + (f", llama-bench {100 * nat['tg128'] / roof:.0f}%" if "tg128" in nat else ""))
PY
