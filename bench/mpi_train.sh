#!/usr/bin/env bash
# bench/mpi_train.sh TOY [ROUNDS] — tokens/s of `toy train from-scratch` on one process with 2
# threads against 2 processes of 1 thread under mpirun: with the gradient exchange overlapping the
# backward pass, without it (TOY_GRAD_OVERLAP=0), and overlapping with buckets of 64 Ki floats
# instead of 256 Ki. The configurations alternate, ROUNDS times (default 3), so that a noisy
# machine slows them alike. Per run: the median step (events.jsonl), the tokens/s at that median,
# the whole run's wall and CPU seconds (user + system, all ranks), the bytes rank 0 sent a step
# (run_end's gradient_exchange), the buckets started during the backward pass, and rank 0's wait
# for the exchange after its backward pass: the median, and the least (a step where rank 0's
# backward pass ended last: the exchange alone, without waiting for the other rank).
# Results: docs/training.md, "Several processes and machines".
set -euo pipefail
toy=$1
rounds=${2:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args="--batch 4 --grad-accum 2 --steps 16 --eval-every 0 --checkpoint-every 0 --no-progress --runs-dir $dir"
mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca plm isolated -np 2"

run() {  # run NAME THREADS [LAUNCHER…]: one run, one line of results
  local name=$1 threads=$2 id="$1-$round"
  shift 2
  /usr/bin/time -f "%e %U %S" -o "$dir/time" "$@" "$toy" train from-scratch $args --threads "$threads" \
    --run-id "$id" >/dev/null 2>&1
  python3 - "$dir/$id/events.jsonl" "$dir/time" "$name" <<'EOF'
import json, statistics, sys
events = [json.loads(l) for l in open(sys.argv[1])]
steps = [e for e in events if e["kind"] == "step"][2:]  # after two warm-up steps
first = [e for e in events if e["kind"] == "step"][0]
tokens = first["tokens"] / first["step"]  # a step's
end = events[-1]
wall, user, sys_ = map(float, open(sys.argv[2]).read().split())
x = end.get("gradient_exchange")
median = statistics.median(e["wall_us"] for e in steps) / 1e3
line = f"{sys.argv[3]:<12} median {median:7.1f} ms/step  {tokens / median * 1e3:7.0f} tok/s  run: wall {wall:5.1f} s, CPU {user + sys_:5.1f} s"
if x:
    waits = [e["exchange_wait_us"] / 1e3 for e in steps]
    line += (f"  sent {x['bytes_sent'] / x['sums'] / 1e6:.3f} MB/step, {x['buckets_started_in_backward']}/{x['buckets']}"
             f" buckets early, wait after backward: median {statistics.median(waits):.1f}, least {min(waits):.1f} ms")
print(line, flush=True)
EOF
}

for round in $(seq "$rounds"); do
  run 1x2 2
  run 2x1-overlap 1 $mpi
  TOY_GRAD_OVERLAP=0 run 2x1-serial 1 $mpi
  TOY_GRAD_BUCKET=65536 run 2x1-64Ki 1 $mpi  # 14 buckets instead of 4
done
