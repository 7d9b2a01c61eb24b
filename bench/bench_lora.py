#!/usr/bin/env python3
"""bench/bench_lora.py — LoRA training step time, side by side: `toy train lora` on a frozen base,
`toy train from-scratch --init-weights` (full fine-tuning of the same base) and the same LoRA step
in plain PyTorch (bench/torch_lora.py).

The base is `toy init --preset smollm2-135m` (F32, random weights: the step time does not depend
on the values); the data random token ids (`--data-ids`), B 4 x T 256 by default. Each toy run
goes --warmup steps, then --steps timed ones: the driver reads toy's `step N` lines as they are
printed and takes the wall clock and the process's CPU time (user + sys of all threads, from
/proc/PID/stat) at the end of the warm-up and at the last step, then stops the run (its final
checkpoint is not part of a step). torch_lora.py times itself the same way. On a shared machine
the three run interleaved (lora, full, torch, lora, full, torch, ...) so that load falls on each
alike; CPU time per step is the figure that load changes least.

  bench/bench_lora.py --toy build/toy [--threads 2] [--rounds 2] [--steps 2] [--warmup 1]
                      [--batch 4] [--context 256] [--dir /tmp/toy-bench-lora]
Needs /usr/bin/python3 with torch for the PyTorch column (bench/setup_torch.sh); not part of CI.
"""
import argparse
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 49152  # SmolLM2-135M
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + sys CPU seconds of process pid, all threads (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def time_toy(cmd, warmup, steps):
    """Runs a `toy train` command; returns (wall ms, CPU ms) per step over the steps after warm-up."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marks = {}
    for line in p.stdout:
        if not line.startswith("step "):
            continue
        n = int(line.split()[1].rstrip(":"))
        marks[n] = (time.perf_counter(), cpu_seconds(p.pid))
        if n == warmup + steps:
            break
    p.send_signal(signal.SIGKILL)
    err = p.stderr.read()
    p.wait()
    if warmup + steps not in marks or warmup not in marks:
        sys.exit(f"{' '.join(cmd)} failed:\n{err}")
    (w0, c0), (w1, c1) = marks[warmup], marks[warmup + steps]
    return (w1 - w0) * 1e3 / steps, (c1 - c0) * 1e3 / steps


def time_torch(a):
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torch_lora.py"), "--batch", str(a.batch),
                          "--context", str(a.context), "--steps", str(a.steps), "--warmup", str(a.warmup),
                          "--threads", str(a.threads)], capture_output=True, text=True, check=True).stdout
    vals = dict(line.split() for line in out.splitlines())
    return float(vals["ms_per_step"]), float(vals["cpu_ms_per_step"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--toy", default="build/toy")
    ap.add_argument("--dir", default="/tmp/toy-bench-lora")
    for name, default in [("threads", 2), ("rounds", 2), ("steps", 2), ("warmup", 1), ("batch", 4), ("context", 256)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    base, ids = os.path.join(a.dir, "smollm2-135m-f32.gguf"), os.path.join(a.dir, "ids.i32")
    if not os.path.exists(base):
        subprocess.run([a.toy, "init", "--preset", "smollm2-135m", "-o", base], check=True)
    rng = random.Random(0)
    n = (a.warmup + a.steps) * a.batch * (a.context + 1)
    with open(ids, "wb") as f:
        f.write(struct.pack(f"<{n}i", *(rng.randrange(VOCAB) for _ in range(n))))
    runs = os.path.join(a.dir, "runs")
    common = ["--data-ids", ids, "--batch", str(a.batch), "--context", str(a.context), "--steps",
              str(a.warmup + a.steps), "--threads", str(a.threads), "--checkpoint-every", "0", "--runs-dir", runs]
    kinds = {
        "toy lora": lambda r: time_toy([a.toy, "train", "lora", "--base", base, "--run-id", f"lora{r}"] + common,
                                       a.warmup, a.steps),
        "toy full": lambda r: time_toy([a.toy, "train", "from-scratch", "--init-weights", base, "--run-id", f"full{r}"]
                                       + common, a.warmup, a.steps),
        "torch lora": lambda r: time_torch(a),
    }
    print(f"B {a.batch} x T {a.context}, threads {a.threads}, {a.warmup} warm-up + {a.steps} timed steps a run, "
          f"{a.rounds} rounds interleaved", flush=True)
    results = {k: [] for k in kinds}
    for r in range(a.rounds):
        for k, run in kinds.items():
            shutil.rmtree(runs, ignore_errors=True)
            wall, cpu = run(r)
            results[k].append((wall, cpu))
            print(f"round {r} {k:10s} wall {wall:9.0f} ms/step  cpu {cpu:9.0f} ms/step", flush=True)
    shutil.rmtree(runs, ignore_errors=True)
    print(f"\n{'':10s} {'wall ms/step':>13s} {'cpu ms/step':>12s}  (best of {a.rounds} rounds)")
    for k, v in results.items():
        print(f"{k:10s} {min(w for w, _ in v):13.0f} {min(c for _, c in v):12.0f}")


if __name__ == "__main__":
    main()
