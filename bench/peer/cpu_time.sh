#!/usr/bin/env bash
# bench/peer/cpu_time.sh — toy and llama.cpp by CPU time, for a machine too loaded for wall-clock
# figures: each tool processes a 512-token prompt (pp512) and generates 64 tokens (tg64) in its own
# process, under /usr/bin/time; the CPU seconds (user + sys) of a 1-token run (loading the model)
# are subtracted, and tokens / CPU second is reported, the median of ROUNDS interleaved rounds.
#   LLAMA_BENCH=path/to/llama-bench bench/peer/cpu_time.sh MODEL.gguf [ROUNDS] [THREADS]
# With THREADS > 1 the CPU time includes what threads spend waiting on each other. Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="$1"; rounds="${2:-3}"; threads="${3:-1}"
toy="${TOY_BIN:-$here/../../build/toy}"
llama_bench="${LLAMA_BENCH:-$here/llama.cpp/build/bin/llama-bench}"
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
  l0=$(cpu "$llama_bench" -m "$model" -t "$threads" -p 1 -n 0 -r 1 --no-warmup)
  lp=$(cpu "$llama_bench" -m "$model" -t "$threads" -p 512 -n 0 -r 1 --no-warmup)
  lg=$(cpu "$llama_bench" -m "$model" -t "$threads" -p 1 -n 64 -r 1 --no-warmup)
  echo "$r $load $t0 $tp $tg $l0 $lp $lg"
done | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin]
f = lambda i, b, n: statistics.median(n / (r[i] - r[b]) for r in rows)
print("rounds", len(rows), "- load average at the start of each:", ", ".join(f"{r[1]:.1f}" for r in rows))
print("CPU s of the 1-token runs: toy", ", ".join(f"{r[2]:.2f}" for r in rows),
      "| llama-bench", ", ".join(f"{r[5]:.2f}" for r in rows))
print("CPU s of pp512: toy", ", ".join(f"{r[3]:.1f}" for r in rows), "| llama-bench", ", ".join(f"{r[6]:.1f}" for r in rows))
print("CPU s of tg64: toy", ", ".join(f"{r[4]:.1f}" for r in rows), "| llama-bench", ", ".join(f"{r[7]:.1f}" for r in rows))
print(f"pp512 tokens per CPU second: toy {f(3, 2, 511):.1f}, llama.cpp {f(6, 5, 511):.1f}")
print(f"tg64 tokens per CPU second: toy {f(4, 2, 64):.1f}, llama.cpp {f(7, 5, 64):.1f}")
'
rm -f /tmp/cpu_time.$$
