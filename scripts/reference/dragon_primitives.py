#!/usr/bin/env python3
"""Float64 reference of the Dragon primitives, forward and backward, for tests/test_dragon_reference.cpp.

Written from the papers and llama.cpp's GATED_DELTA_NET contract, not from toy's code, in PyTorch
(Debian's python3-torch; run with /usr/bin/python3 if another python3 comes first on PATH):
  /usr/bin/python3 scripts/reference/dragon_primitives.py > scripts/reference/dragon_primitives.json

Every input is a formula of its element index i (flat, row-major), rounded to float32 (the value
the C++ test stores), then computed in float64. Each case's output y is projected on a fixed
weight R (also a formula), L = sum(y * R), and torch.autograd gives dL/d(input) for every learned
or upstream input. The JSON holds, per case, y (flattened) and those gradients.

Cases:
  gated_delta_rule_{tiled,grouped}: a Gated DeltaNet's mixer from its raw projections.
    q, k = l2_norm(q_raw), l2_norm(k_raw)  (x / max(|x|, 1e-6) per head),
    beta = sigmoid(b),  g = ssm_a * softplus(alpha + dt_bias), ssm_a = -exp(A_log) (GGUF stores
    ssm_a; it is the leaf here), then per value head h, state S [Dk, Dv] from S0:
      S <- exp(g_t) S;  d = beta_t (v_t - S^T k_t);  S <- S + k_t d^T;  o_t = S^T q_t / sqrt(Dk).
    Value head h reads key head h % Hk (tiled, qwen35) or h // (Hv / Hk) (grouped, qwen3next).
    y = o [T, Hv, Dv]; also the final state. Gradients: q_raw, k_raw, v, alpha, b, dt_bias, ssm_a.
  causal_conv1d: y[t, c] = sum_j w[c, j] * [state0; x][t + j, c]. Gradients: x, w.
  differential_attention (Ye et al. 2024): per head q = [q1 | q2], k = [k1 | k2] (d = Dh/2),
    o = (softmax(q1 k1^T / sqrt(d)) - lam softmax(q2 k2^T / sqrt(d))) v, causal, GQA (head h reads
    KV head h // (H / Hkv)), lam = exp(lq1.lk1) - exp(lq2.lk2) + lam_init,
    lam_init = 0.8 - 0.6 exp(-0.3 layer); y = rms_norm(o, sub_norm_w, 1e-6) * (1 - lam_init).
    Gradients: q, k, v, lq1, lk1, lq2, lk2, sub_norm_w.
  scalable_softmax (Nakanishi, arXiv 2501.19399): causal attention whose logits of a query that
    attends n = t + 1 keys are s[h] log(n) q.k / sqrt(Dh). Gradients: q, k, v, s.
"""
import json
import math

import torch

torch.set_default_dtype(torch.float64)


def formula(shape, f):
    """Tensor of `shape` whose flat element i is f(i), rounded to float32, as float64."""
    n = math.prod(shape)
    return torch.tensor([f(i) for i in range(n)], dtype=torch.float32).double().reshape(shape)


def leaf(shape, f):
    return formula(shape, f).requires_grad_()


def weights(shape):  # the projection R of every case
    return formula(shape, lambda i: math.cos(0.53 * i + 0.4))


def values(t):  # 10 significant digits: far beyond the float32 values they are compared with
    return [float(f"{x:.10g}") for x in t.detach().flatten().tolist()]


def result(y, inputs):
    """y flattened and the gradients of sum(y * R) for the named leaves."""
    loss = (y * weights(y.shape)).sum()
    grads = torch.autograd.grad(loss, list(inputs.values()))
    return {"y": values(y), "grad": {k: values(g) for k, g in zip(inputs, grads)}}


# --- Gated DeltaNet -------------------------------------------------------------------------
GDN = dict(T=6, Hk=2, Hv=4, Dk=4, Dv=4)


def gated_delta_rule(tiled):
    T, Hk, Hv, Dk, Dv = GDN["T"], GDN["Hk"], GDN["Hv"], GDN["Dk"], GDN["Dv"]
    x = {
        "q_raw": leaf([T, Hk, Dk], lambda i: math.sin(0.37 * i + 0.1)),
        "k_raw": leaf([T, Hk, Dk], lambda i: math.cos(0.23 * i + 0.2)),
        "v": leaf([T, Hv, Dv], lambda i: 2.0 * math.sin(0.11 * i - 0.3)),
        "alpha": leaf([T, Hv], lambda i: math.sin(0.7 * i + 0.5)),
        "b": leaf([T, Hv], lambda i: 1.5 * math.cos(0.9 * i)),
        "dt_bias": leaf([Hv], lambda i: 0.2 * i - 0.3),
        "ssm_a": leaf([Hv], lambda i: -math.exp(0.4 * i - 0.6)),
    }
    S = formula([Hv, Dk, Dv], lambda i: 0.5 * math.sin(0.29 * i + 1.0))

    def l2(t):
        return t / t.norm(dim=-1, keepdim=True).clamp_min(1e-6)

    q, k = l2(x["q_raw"]), l2(x["k_raw"])
    beta = torch.sigmoid(x["b"])
    g = x["ssm_a"] * torch.nn.functional.softplus(x["alpha"] + x["dt_bias"])
    outs = []
    for t in range(T):
        o_t, S_next = [], []
        for h in range(Hv):
            kh = h % Hk if tiled else h // (Hv // Hk)
            s = S[h] * torch.exp(g[t, h])
            d = beta[t, h] * (x["v"][t, h] - s.T @ k[t, kh])
            s = s + torch.outer(k[t, kh], d)
            o_t.append(s.T @ q[t, kh] / math.sqrt(Dk))
            S_next.append(s)
        S = torch.stack(S_next)
        outs.append(torch.stack(o_t))
    r = result(torch.stack(outs), x)
    r["state"] = values(S)
    return r


# --- causal convolution ---------------------------------------------------------------------
CONV = dict(T=5, C=3, K=4)


def causal_conv1d():
    T, C, K = CONV["T"], CONV["C"], CONV["K"]
    x = {"x": leaf([T, C], lambda i: math.sin(0.41 * i + 0.3)), "w": leaf([C, K], lambda i: 0.5 * math.cos(0.8 * i))}
    state0 = formula([K - 1, C], lambda i: math.cos(0.6 * i + 0.7))
    window = torch.cat([state0, x["x"]])  # [K - 1 + T, C]
    y = torch.stack([(x["w"].T * window[t : t + K]).sum(0) for t in range(T)])
    return result(y, x)


# --- attention variants ---------------------------------------------------------------------
ATT = dict(T=4, H=2, Hkv=1, Dh=4, layer=2)


def attention_inputs():
    T, H, Hkv, Dh = ATT["T"], ATT["H"], ATT["Hkv"], ATT["Dh"]
    return {
        "q": leaf([T, H, Dh], lambda i: math.sin(0.37 * i + 0.1)),
        "k": leaf([T, Hkv, Dh], lambda i: math.cos(0.23 * i + 0.2)),
        "v": leaf([T, Hkv, Dh], lambda i: 2.0 * math.sin(0.11 * i - 0.3)),
    }


def attend(q, k, v, scale, logit_factor=None):
    """Causal GQA softmax attention; logit_factor(t, h) multiplies the logits of query t, head h."""
    T, H = q.shape[0], q.shape[1]
    rows = []
    for t in range(T):
        heads = []
        for h in range(H):
            g = h // (H // k.shape[1])
            z = (k[: t + 1, g] @ q[t, h]) * scale
            if logit_factor is not None:
                z = z * logit_factor(t, h)
            heads.append(torch.softmax(z, 0) @ v[: t + 1, g])
        rows.append(torch.stack(heads))
    return torch.stack(rows)


def differential_attention():
    Dh, layer = ATT["Dh"], ATT["layer"]
    d = Dh // 2
    x = attention_inputs()
    for j, name in enumerate(["lq1", "lk1", "lq2", "lk2"]):
        x[name] = leaf([d], lambda i, j=j: 0.3 * math.sin(1.7 * i + j))
    x["sub_norm_w"] = leaf([Dh], lambda i: 1.0 + 0.1 * i)
    lam_init = 0.8 - 0.6 * math.exp(-0.3 * layer)
    lam = torch.exp(x["lq1"] @ x["lk1"]) - torch.exp(x["lq2"] @ x["lk2"]) + lam_init
    q, k, v = x["q"], x["k"], x["v"]
    o = attend(q[..., :d], k[..., :d], v, 1 / math.sqrt(d)) - lam * attend(q[..., d:], k[..., d:], v, 1 / math.sqrt(d))
    y = o / torch.sqrt((o * o).mean(-1, keepdim=True) + 1e-6) * x["sub_norm_w"] * (1 - lam_init)
    r = result(y, x)
    r["lambda"] = lam.item()
    r["lambda_init"] = lam_init
    return r


def scalable_softmax():
    Dh = ATT["Dh"]
    x = attention_inputs()
    x["s"] = leaf([ATT["H"]], lambda i: 0.7 + 0.6 * i)
    y = attend(x["q"], x["k"], x["v"], 1 / math.sqrt(Dh), lambda t, h: x["s"][h] * math.log(t + 1))
    return result(y, x)


out = {
    "about": "float64 reference made by scripts/reference/dragon_primitives.py (PyTorch " + torch.__version__ + ")",
    "gated_delta_rule": GDN,
    "gated_delta_rule_tiled": gated_delta_rule(True),
    "gated_delta_rule_grouped": gated_delta_rule(False),
    "conv": CONV,
    "causal_conv1d": causal_conv1d(),
    "attention": ATT,
    "differential_attention": differential_attention(),
    "scalable_softmax": scalable_softmax(),
}
print(json.dumps(out, separators=(",", ":")))
