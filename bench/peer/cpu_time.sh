#!/usr/bin/env bash
# bench/peer/cpu_time.sh — toy and llama.cpp (node-llama-cpp 3.21.1, peer_cpu.mjs) by CPU time, for
# a machine too loaded for wall-clock figures, ROUNDS rounds taking turns. toy: a 512-token prompt
# (pp512) and 64 generated tokens (tg64), each its own process under /usr/bin/time, less the CPU
# seconds (user + sys) of a 1-token run (loading the model). llama.cpp: the CPU seconds of the same
# work inside one process (process.cpuUsage). Prints tokens per CPU second of each round.
#   bench/peer/cpu_time.sh MODEL.gguf [ROUNDS] [THREADS]
# With THREADS > 1 the CPU time includes what threads spend waiting on each other. Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$1"; rounds="${2:-2}"; threads="${3:-1}"
toy="${TOY_BIN:-$here/../../build/toy}"
[ -d "$here/node_modules/node-llama-cpp" ] || (cd "$here" && npm i -E --no-audit --no-fund node-llama-cpp@3.21.1 >/dev/null)
n_vocab=$("$toy" describe "$model" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokenizer"]["n_vocab"])')
ids=$(python3 -c "print(','.join(str(3 + i * 7919 % 30000) for i in range(512)))")
cpu() {  # CPU seconds (user + sys) of a command
  /usr/bin/time -f "%U %S" -o /tmp/cpu_time.$$ "$@" > /dev/null 2>&1
  awk '{print $1 + $2}' /tmp/cpu_time.$$
}
for r in $(seq 1 "$rounds"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(cpu "$toy" infer "$model" --ids 3 -n 1 --temp 0 --threads "$threads")
  tp=$(cpu "$toy" infer "$model" --ids "$ids" -n 1 --temp 0 --threads "$threads")
  tg=$(cpu "$toy" infer "$model" --ids 3 -n 65 --ignore-eos --temp 0 --threads "$threads")
  peer=$(cd "$here" && node peer_cpu.mjs "$model" "$threads" "$n_vocab" 1)
  echo "round $r load $load toy_cpu_s $t0 $tp $tg peer $peer"
  python3 -c '
import json, sys
r, load, t0, tp, tg = sys.argv[1:6]
peer = json.loads(sys.argv[6])
pp, gen = peer["pp512"][0], peer["tg64"][0]
t0, tp, tg = float(t0), float(tp), float(tg)
print(f"round {r} (load average {load}): tokens per CPU s, pp512 toy {511 / (tp - t0):.1f} llama.cpp {pp:.1f}; "
      f"tg64 toy {64 / (tg - t0):.2f} llama.cpp {gen:.2f}")' "$r" "$load" "$t0" "$tp" "$tg" "$peer"
done
rm -f /tmp/cpu_time.$$
