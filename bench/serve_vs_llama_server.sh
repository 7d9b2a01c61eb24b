#!/bin/sh
# bench/serve_vs_llama_server.sh — the load benchmark side by side: `toy serve` and llama.cpp's
# `llama-server` on the same GGUF, 16 slots each (KV cache F16, both servers' default or close to
# it; 512 tokens per slot; every core), driven by bench/bench_serve at 1, 4, 8 and 16 concurrent
# streams, the two servers alternating level by level for ROUNDS rounds so that both see the
# same load of a shared machine. Prints the load average before each run.
#
# usage: bench/serve_vs_llama_server.sh TOY LLAMA_SERVER MODEL [ROUNDS] [REQUESTS] [TOKENS]
# e.g.   bench/serve_vs_llama_server.sh build/toy bench/peer/llama.cpp/build/bin/llama-server smollm2-q8_0.gguf
# where `bench/peer/native.sh llama-bench llama-server` builds llama-server for this CPU (the same
# tree bench/peer/run.sh takes llama-bench from; a link bench/peer/llama.cpp to a built checkout also works).
set -eu
toy=${1:?usage: $0 TOY LLAMA_SERVER MODEL [ROUNDS] [REQUESTS] [TOKENS]}
llama=${2:?usage}
model=${3:?usage}
rounds=${4:-2}
requests=${5:-2}
tokens=${6:-32}
bench=$(dirname "$toy")/bench/bench_serve
[ -x "$bench" ] || bench=build/bench/bench_serve
threads=$(nproc)
toy_port=18801
llama_port=18802

"$toy" serve "$model" --parallel 16 --ctx 512 --kv-type f16 --conns-per-client 64 --threads "$threads" \
  --port $toy_port --quiet >/tmp/bench_toy_serve.log 2>&1 &
toy_pid=$!
"$llama" -m "$model" -np 16 -c 8192 -t "$threads" --host 127.0.0.1 --port $llama_port \
  >/tmp/bench_llama_server.log 2>&1 &
llama_pid=$!
trap 'kill $toy_pid $llama_pid 2>/dev/null || true' EXIT
for port in $toy_port $llama_port; do
  i=0
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 600 ] || { echo "the server on port $port did not start" >&2; exit 1; }
    sleep 0.1
  done
done
for round in $(seq "$rounds"); do
  for level in 1 4 8 16; do
    for server in toy llama-server; do
      port=$toy_port
      [ $server = toy ] || port=$llama_port
      echo "round $round, $server, $level streams, load average $(cut -d' ' -f1-3 /proc/loadavg)"
      "$bench" "$model" --port $port --levels $level --requests "$requests" --max-tokens "$tokens" \
        --prompt-words 16 | tail -1
    done
  done
done
