#!/usr/bin/env python3
"""Reference values of differential attention and Scalable-Softmax for tests/test_attention_variants.cpp.

Plain Python (floats are IEEE doubles), written from the papers, not from toy's code:
  Differential attention (Ye et al., "Differential Transformer", 2024, eq. 1-3 and the official
  multihead_diffattn.py): per head, q = [q1 | q2], k = [k1 | k2] of d = Dh/2 values each,
    o = (softmax(q1 k1^T / sqrt(d)) - lam * softmax(q2 k2^T / sqrt(d))) v,
    lam = exp(lq1 . lk1) - exp(lq2 . lk2) + lam_init,  lam_init = 0.8 - 0.6 exp(-0.3 * layer).
  Scalable-Softmax (Nakanishi, arXiv 2501.19399, eq. 2): logits z of a query that attends n keys
  become s * log(n) * z, s per head; here z = q.k / sqrt(Dh), causal, so n = t + 1.
The inputs are formulas of the element index (the test builds the same ones). Run:
  python3 scripts/reference/attention_variants.py
and paste the printed lists into the test.
"""
import math

T, H, HKV, DH = 3, 2, 1, 4  # one sequence; query head h reads KV head h // (H // HKV)
D = DH // 2
LAYER = 2


def q_at(i): return math.sin(0.37 * i + 0.1)
def k_at(i): return math.cos(0.23 * i + 0.2)
def v_at(i): return 2.0 * math.sin(0.11 * i - 0.3)
def lam_at(j, i): return 0.3 * math.sin(1.7 * i + j)  # vector j of (q1, k1, q2, k2), element i


def fl(x):  # the float32 value the test stores
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


q = [[[fl(q_at((t * H + h) * DH + e)) for e in range(DH)] for h in range(H)] for t in range(T)]
k = [[[fl(k_at((t * HKV + g) * DH + e)) for e in range(DH)] for g in range(HKV)] for t in range(T)]
v = [[[fl(v_at((t * HKV + g) * DH + e)) for e in range(DH)] for g in range(HKV)] for t in range(T)]
lam_vec = [[fl(lam_at(j, i)) for i in range(D)] for j in range(4)]
S_SSMAX = [fl(0.7), fl(1.3)]


def softmax(z):
    m = max(z)
    e = [math.exp(x - m) for x in z]
    s = sum(e)
    return [x / s for x in e]


def dot(a, b): return sum(x * y for x, y in zip(a, b))


def differential():
    lam_init = 0.8 - 0.6 * math.exp(-0.3 * LAYER)
    lam = math.exp(dot(lam_vec[0], lam_vec[1])) - math.exp(dot(lam_vec[2], lam_vec[3])) + lam_init
    out = []
    for t in range(T):
        for h in range(H):
            g = h // (H // HKV)
            qt = q[t][h]
            a1 = softmax([dot(qt[:D], k[j][g][:D]) / math.sqrt(D) for j in range(t + 1)])
            a2 = softmax([dot(qt[D:], k[j][g][D:]) / math.sqrt(D) for j in range(t + 1)])
            for e in range(DH):
                out.append(sum((a1[j] - lam * a2[j]) * v[j][g][e] for j in range(t + 1)))
    return lam, out


def ssmax():
    out = []
    for t in range(T):
        for h in range(H):
            g = h // (H // HKV)
            n = t + 1
            a = softmax([S_SSMAX[h] * math.log(n) * dot(q[t][h], k[j][g]) / math.sqrt(DH) for j in range(n)])
            for e in range(DH):
                out.append(sum(a[j] * v[j][g][e] for j in range(n)))
    return out


def show(name, xs):
    print(f"// {name}")
    print("{" + ", ".join(f"{x:.9g}" for x in xs) + "}")


lam, diff = differential()
show(f"lambda (layer {LAYER})", [lam])
show("differential attention o [T, H, Dh]", diff)
show("Scalable-Softmax attention o [T, H, Dh]", ssmax())
