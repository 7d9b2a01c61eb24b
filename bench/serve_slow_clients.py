#!/usr/bin/env python3
"""bench/serve_slow_clients.py: how `toy serve` answers while slow clients hold connections.

Starts TOY serve MODEL on an ephemeral loopback port, then measures GET /health from 127.0.0.1
(4 client threads, a new connection per request, 2 s timeout each): requests/s and latency,
first with no other load, then while N slow clients from 127.0.0.2 each send a request a byte
a second ("slowloris"). Prints one table; the server is stopped at the end. Bounded: about
2 x SECONDS plus start-up.

    bench/serve_slow_clients.py TOY MODEL [--slow 50] [--seconds 5] [-- extra serve flags]
"""
import argparse
import http.client
import re
import socket
import subprocess
import threading
import time


def start_server(toy, model, extra):
    proc = subprocess.Popen([toy, "serve", model, "--host", "127.0.0.1", "--port", "0", "--quiet"] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on http://[^:]+:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit("the server did not start: " + line)
    return proc, int(m.group(1))


def measure(port, seconds):
    """GET /health from 4 threads for `seconds`: (answered, failed, latencies in ms)."""
    lock = threading.Lock()
    answered, failed, latencies = [0], [0], []
    end = time.monotonic() + seconds

    def client():
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
            except OSError:
                ok = False
            with lock:
                if ok:
                    answered[0] += 1
                    latencies.append(1000 * (time.monotonic() - t0))
                else:
                    failed[0] += 1

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answered[0], failed[0], sorted(latencies)


def slow_clients(port, n, stop):
    """N sockets from 127.0.0.2, each sending a request one byte a second until `stop` is set."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        socks.append(s)
    request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096
    k = 0
    while not stop.is_set():
        for s in socks:
            try:
                s.send(request[k:k + 1])
            except OSError:
                pass  # refused or closed by the server
        k += 1
        stop.wait(1.0)
    for s in socks:
        s.close()


def row(label, seconds, result):
    answered, failed, lat = result
    p50 = lat[len(lat) // 2] if lat else float("nan")
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan")
    print(f"{label:<28} {answered / seconds:>10.1f} {failed:>8} {p50:>10.1f} {p99:>10.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("toy")
    ap.add_argument("model")
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    proc, port = start_server(a.toy, a.model, a.extra)
    try:
        print(f"{'GET /health':<28} {'req/s':>10} {'failed':>8} {'p50 ms':>10} {'p99 ms':>10}")
        row("no load", a.seconds, measure(port, a.seconds))
        stop = threading.Event()
        t = threading.Thread(target=slow_clients, args=(port, a.slow, stop))
        t.start()
        time.sleep(1.0)
        row(f"{a.slow} slow clients", a.seconds, measure(port, a.seconds))
        stop.set()
        t.join()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
