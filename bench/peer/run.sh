#!/usr/bin/env bash
# bench/peer/run.sh — toy vs llama.cpp side by side on one GGUF, same machine, same threads.
#   bench/peer/run.sh MODEL.gguf [THREADS] [REPS]
# Installs node-llama-cpp 3.21.1 (prebuilt llama.cpp CPU binaries) into bench/peer/node_modules
# on first use. Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$1"; threads="${2:-2}"; reps="${3:-3}"
toy="${TOY_BIN:-$here/../../build/toy}"
[ -d "$here/node_modules/node-llama-cpp" ] || (cd "$here" && npm i -E --no-audit --no-fund node-llama-cpp@3.21.1 >/dev/null)
n_vocab=$("$toy" describe "$model" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokenizer"]["n_vocab"])')
peer=$(cd "$here" && node peer.mjs "$model" "$threads" "$n_vocab" "$reps")
mine=$("$toy" bench "$model" --threads "$threads" --reps "$reps" --json)
python3 - "$peer" "$mine" "$model" <<'PY'
import json, sys
peer, mine, model = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(f"{model}  ({mine['threads']} threads, median of {mine['reps']})")
print(f"{'':8}{'toy':>12}{'llama.cpp':>12}{'ratio':>8}")
for k in ("pp512", "tg128"):
    t, p = mine[k], peer[k]
    print(f"{k:8}{t:12.1f}{p:12.1f}{t / p:8.2f}")
print(f"toy generation at {100 * mine['roofline_fraction']:.0f}% of the {mine['bandwidth_gbs']:.1f} GB/s roofline; "
      f"llama.cpp at {100 * peer['tg128'] / mine['roofline_tok_s']:.0f}%")
PY
