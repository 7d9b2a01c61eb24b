#!/usr/bin/env bash
# tests/mpi_train.sh TOY MPIEXEC — data-parallel training over MPI (docs/distributed.md), run by
# CTest when CMake found MPI. On a tiny model, a few steps:
#   1. `toy train from-scratch` under mpirun -np 1, 2 and 4 and `toy train lora` under -np 2 and 4
#      print the same loss lines and write the same checkpoint bytes (model, adapter, optimizer
#      state) as the plain one-process run with the same global batch (--batch 1 --grad-accum 4).
#      Buckets of 1000 floats (TOY_GRAD_BUCKET), so that the gradient exchange has many, cut
#      across tensors, and the ones ready first start during the backward pass (the summary
#      line counts them: more than 0, and 0 with TOY_GRAD_OVERLAP=0, which gives the same bits).
#   2. Killing one rank mid-run ends the job within seconds with a non-zero exit; resuming its
#      last checkpoint on another number of ranks gives the bits of an uninterrupted run.
set -euo pipefail
toy=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# One machine: the isolated launcher, since Open MPI's default (rsh) refuses to start without an
# ssh or rsh program, which a container (CI's) need not have.
mpi() {
  local n=$1
  shift
  "$mpiexec" --oversubscribe --allow-run-as-root --bind-to none --mca plm isolated -np "$n" "$@"
}
same() {  # same FILE FILE: byte for byte
  cmp -s "$1" "$2" || fail "$1 and $2 differ"
}

export TOY_GRAD_BUCKET=1000
tiny="--d-model 32 --layers 2 --heads 4 --kv-heads 2 --ff 64 --context 16 --batch 1 --grad-accum 4 --lr 3e-3"
tiny+=" --eval-every 2 --checkpoint-every 2 --threads 1 --no-progress --runs-dir $dir/runs"

# 1. The same bits for N = 1, 2, 4 as without mpirun.
"$toy" train from-scratch $tiny --steps 4 --run-id one >"$dir/one.out"
[ "$(grep -c '^step ' "$dir/one.out")" = 4 ] || fail "one-process run: $(cat "$dir/one.out")"
base="$dir/runs/one/weights/final.gguf"
lora="--base $base --rank 2 --dropout 0.1 --targets attn_q,attn_v,ffn_up $tiny --steps 2"
"$toy" train lora $lora --run-id lora-one >"$dir/lora-one.out"
for n in 1 2 4; do
  mpi "$n" "$toy" train from-scratch $tiny --steps 4 --run-id np$n >"$dir/np$n.out" 2>"$dir/np$n.err" ||
    fail "mpirun -np $n exited with $?: $(cat "$dir/np$n.err")"
  same "$dir/one.out" "$dir/np$n.out"
  [ "$n" = 1 ] || grep -q "gradient exchange: [1-9][0-9]* of [0-9]* buckets in 4 steps started during the backward" \
    "$dir/np$n.err" || fail "np$n: no bucket started during the backward pass: $(cat "$dir/np$n.err")"
  for f in step-2.gguf step-4.gguf step-4.optim.gguf; do
    same "$dir/runs/one/weights/$f" "$dir/runs/np$n/weights/$f"
  done
  grep -q "\"world_size\":$n," "$dir/runs/np$n/events.jsonl" || fail "np$n: run_start has no world_size $n"
  [ "$n" = 1 ] && continue  # lora under mpirun -np 1 runs the same code as from-scratch does
  mpi "$n" "$toy" train lora $lora --run-id lora-np$n >"$dir/lora-np$n.out" || fail "lora: mpirun -np $n exited with $?"
  same "$dir/lora-one.out" "$dir/lora-np$n.out"
  same "$dir/runs/lora-one/adapters/step-2.gguf" "$dir/runs/lora-np$n/adapters/step-2.gguf"
  same "$dir/runs/lora-one/adapters/step-2.optim.gguf" "$dir/runs/lora-np$n/adapters/step-2.optim.gguf"
done

# Without the overlap: no bucket starts early, and the bits are the same.
TOY_GRAD_OVERLAP=0 mpi 2 "$toy" train from-scratch $tiny --steps 4 --run-id serial >"$dir/serial.out" \
  2>"$dir/serial.err" || fail "TOY_GRAD_OVERLAP=0: mpirun -np 2 exited with $?: $(cat "$dir/serial.err")"
same "$dir/one.out" "$dir/serial.out"
same "$dir/runs/one/weights/step-4.optim.gguf" "$dir/runs/serial/weights/step-4.optim.gguf"
grep -q "gradient exchange: 0 of [1-9][0-9]* buckets" "$dir/serial.err" || fail "TOY_GRAD_OVERLAP=0: $(cat "$dir/serial.err")"

# A grad-accum the ranks cannot share is a usage error on every rank.
set +e
mpi 4 "$toy" train from-scratch $tiny --grad-accum 2 --steps 2 --run-id odd >"$dir/odd.out" 2>"$dir/odd.err"
code=$?
set -e
[ "$code" = 2 ] || fail "--grad-accum 2 over 4 ranks: exit $code, $(cat "$dir/odd.err")"
grep -q "does not split over 4 processes" "$dir/odd.err" || fail "--grad-accum 2 over 4 ranks: $(cat "$dir/odd.err")"
# So is a bucket size out of range.
set +e
TOY_GRAD_BUCKET=0 mpi 2 "$toy" train from-scratch $tiny --steps 2 --run-id bucket0 >/dev/null 2>"$dir/bucket0.err"
code=$?
set -e
[ "$code" = 2 ] || fail "TOY_GRAD_BUCKET=0: exit $code, $(cat "$dir/bucket0.err")"
grep -q "TOY_GRAD_BUCKET='0': expected a whole number from 256" "$dir/bucket0.err" || fail "$(cat "$dir/bucket0.err")"

# 2. Kill rank 1 after a checkpoint: the job ends within seconds, non-zero. A constant learning
# rate, so that the uninterrupted reference may stop at any step.
long="$tiny --schedule constant --steps 100000 --eval-every 0"
mpi 2 "$toy" train from-scratch $long --run-id killed >"$dir/killed.out" 2>"$dir/killed.err" &
job=$!
for _ in $(seq 200); do
  [ -e "$dir/runs/killed/weights/step-2.gguf" ] && break
  sleep 0.1
done
[ -e "$dir/runs/killed/weights/step-2.gguf" ] || fail "no checkpoint after 20 s: $(cat "$dir/killed.err")"
rank1=""
for p in $(pgrep -f "toy train from-scratch.*--run-id killed" || true); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$p
done
[ -n "$rank1" ] || fail "rank 1 not found"
kill -KILL "$rank1"
start=$SECONDS
set +e
wait "$job"
code=$?
set -e
ended=$((SECONDS - start))
((ended <= 15)) || fail "the job took $ended s to end after rank 1 died"
[ "$code" != 0 ] || fail "the job exited 0 after rank 1 died"

# Resume on 4 ranks for two more steps: the bits of an uninterrupted one-process run.
last=$(ls "$dir/runs/killed/weights" | sed -n 's/^step-\([0-9]*\)\.optim\.gguf$/\1/p' | sort -n | tail -1)
[ -n "$last" ] || fail "no resumable checkpoint left"
end=$((last + 2))
mpi 4 "$toy" train --resume "$dir/runs/killed" --steps $end --threads 1 >"$dir/resumed.out" ||
  fail "resume on 4 ranks exited with $?"
"$toy" train from-scratch $long --steps $end --run-id straight >"$dir/straight.out"
same "$dir/runs/straight/weights/step-$end.gguf" "$dir/runs/killed/weights/step-$end.gguf"
same "$dir/runs/straight/weights/step-$end.optim.gguf" "$dir/runs/killed/weights/step-$end.optim.gguf"
echo "mpi_train: N = 1, 2, 4 bit-identical to one process (from-scratch, lora); a dead rank ended the job in" \
  "$ended s; resumed at step $last on 4 ranks bit-identical"
