#!/usr/bin/python3
"""scripts/reference/samplers.py: the sampling chain written a second time, plainly, as the reference
that tests/test_sampler.cpp holds toy's Sampler to. It writes samplers.json next to itself.

Each sampler follows its published definition, as llama.cpp implements it (src/llama-sampler.cpp):
every stage sorts the whole candidate list where it needs an order, and DRY finds its repeats by
direct comparison (toy uses the Z-function). Nothing here is shared with the C++.

The shared conventions, so that both draw the same tokens:
  * candidates stay in id order; a softmax runs in float64 with exp(z - max) summed in id order;
  * logits are float32, and the stages that move them (bias, penalties, DRY, temperature) round
    to float32 as the C++ does;
  * the random stream is std::mt19937_64 seeded with the case's seed (written out below); a
    uniform number in [0, 1) is its output's top 53 bits; XTC draws one when it is on, the final
    draw one;
  * ties in likelihood go to the lower id.
The logits of step t are made from a second mt19937_64 stream (seed + 1): z_v = spread * (2u - 1),
rounded to float32 (to whole numbers first, for the cases with ties).

Run: /usr/bin/python3 scripts/reference/samplers.py   (Debian's python3-numpy)
"""
import json
import math
import os

import numpy as np

MASK = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 as the C++ standard defines it ([rand.predef])."""

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = 312

    def next(self):
        if self.index >= 312:
            for i in range(312):
                x = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                self.mt[i] = self.mt[(i + 156) % 312] ^ xa
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK

    def uniform(self):
        return (self.next() >> 11) * 2.0**-53


def _check_stream():  # the standard's check value: the 10000th output of a default-seeded engine
    g = MT19937_64(5489)
    for _ in range(9999):
        g.next()
    assert g.next() == 9981545732273789042


f32 = np.float32


def softmax(z):
    top = max(float(x) for x in z)
    e = [math.exp(float(x) - top) for x in z]
    total = 0.0
    for x in e:
        total += x
    return [x / total for x in e]


def ranked(ids, z):
    """Positions of the candidates, likeliest first, ties to the lower id."""
    return sorted(range(len(ids)), key=lambda i: (-float(z[i]), ids[i]))


def keep(ids, z, positions):
    positions = sorted(positions)
    return [ids[i] for i in positions], np.array([z[i] for i in positions], dtype=f32)


def penalties(ids, z, cfg, history):
    n = cfg["repeat_last_n"]
    if n == 0 or (cfg["repeat_penalty"] == 1 and cfg["frequency_penalty"] == 0 and cfg["presence_penalty"] == 0):
        return z
    w = history if n < 0 else history[-n:] if n > 0 else []
    z = z.copy()
    rp, fp, pp = f32(cfg["repeat_penalty"]), f32(cfg["frequency_penalty"]), f32(cfg["presence_penalty"])
    for i, v in enumerate(ids):
        count = w.count(v)
        if count == 0:
            continue
        z[i] = z[i] * rp if z[i] <= 0 else z[i] / rp
        z[i] = z[i] - (f32(count) * fp + pp)
    return z


def dry(ids, z, cfg, history):
    mult, base, allowed, last_n = cfg["dry_multiplier"], cfg["dry_base"], cfg["dry_allowed_length"], cfg["dry_penalty_last_n"]
    if mult == 0 or base < 1 or last_n == 0:
        return z
    w = history if last_n < 0 else history[-last_n:]
    n = len(w)
    if n <= allowed:
        return z
    breakers = cfg["dry_sequence_breakers"]
    # The longest repeat may not reach back over the last breaker: scanning back from the end, the
    # first token that starts a breaker whose whole sequence is in the window sets the limit.
    limit = n
    for i in range(n):  # w[n-1-i]: i tokens before the last
        matches = [len(b) - 1 for b in breakers if b[0] == w[n - 1 - i] and len(b) - 1 <= i
                   and all(b[1 + o] == w[n - 1 - i + 1 + o] for o in range(len(b) - 1))]
        if matches:
            limit = i - max(matches)
            break
    if limit < allowed:
        return z
    longest = {}
    for end in range(n - 1):  # a repeat of the window's last tokens ending at `end`
        length = 0
        while length <= end and w[end - length] == w[n - 1 - length]:
            length += 1
        length = min(length, limit)
        if length >= allowed:
            nxt = w[end + 1]
            longest[nxt] = max(longest.get(nxt, 0), length)
    single = {b[0] for b in breakers if len(b) == 1}
    max_exponent = int(f32(88.7228391) / f32(math.log(f32(base)))) if f32(base) > f32(1.000001) else 0
    z = z.copy()
    for i, v in enumerate(ids):
        if v in longest and v not in single:
            exponent = longest[v] - allowed
            if max_exponent > 0:
                exponent = min(exponent, max_exponent)
            z[i] = f32(float(z[i]) - float(f32(mult)) * math.pow(float(f32(base)), exponent))
    return z


def top_n_sigma(ids, z, n):
    if n <= 0 or len(ids) <= 1:
        return ids, z
    vals = [float(x) for x in z]
    top, total = max(vals), 0.0
    for x in vals:
        total += x
    mean = total / len(vals)
    squares = 0.0
    for x in vals:
        squares += (x - mean) * (x - mean)
    cut = top - float(f32(n)) * math.sqrt(squares / len(vals))
    return keep(ids, z, [i for i, x in enumerate(vals) if x >= cut])


def top_k(ids, z, k):
    if k <= 0:
        return ids, z
    return keep(ids, z, ranked(ids, z)[:k])


def top_p(ids, z, p, min_keep):
    if f32(p) >= 1:
        return ids, z
    prob, order, mass = softmax(z), ranked(ids, z), 0.0
    for i, pos in enumerate(order):
        mass += prob[pos]
        if mass >= float(f32(p)) and i + 1 >= min_keep:
            return keep(ids, z, order[: i + 1])
    return ids, z


def min_p(ids, z, p, min_keep):
    if p <= 0:
        return ids, z
    prob = softmax(z)
    cut = float(f32(p)) * max(prob)
    kept = [i for i in range(len(ids)) if prob[i] >= cut]
    if len(kept) < min_keep:
        kept = ranked(ids, z)[:min_keep]
    return keep(ids, z, kept)


def typical_p(ids, z, p, min_keep):
    if f32(p) >= 1:
        return ids, z
    prob = softmax(z)
    entropy = -sum(q * math.log(q) for q in prob if q > 0)
    order = sorted(range(len(ids)), key=lambda i: (abs(-math.log(prob[i]) - entropy) if prob[i] > 0 else math.inf, i))
    mass = 0.0
    for i, pos in enumerate(order):
        mass += prob[pos]
        if mass > float(f32(p)) and i + 1 >= min_keep:
            return keep(ids, z, order[: i + 1])
    return keep(ids, z, order)


def xtc(ids, z, threshold, min_keep):
    prob, order = softmax(z), ranked(ids, z)
    above = 0  # how many of the likeliest have p >= threshold
    while above < len(ids) and prob[order[above]] >= float(f32(threshold)):
        above += 1
    if above < 2 or len(ids) - (above - 1) < min_keep:
        return ids, z
    return keep(ids, z, order[above - 1 :])


def draw(ids, prob, u):
    mass = 0.0
    for i, q in enumerate(prob):
        mass += q
        if u < mass:
            return i
    return len(ids) - 1


class Reference:
    def __init__(self, cfg):
        self.cfg = cfg
        self.rng = MT19937_64(cfg["seed"])
        self.mu = 2.0 * float(f32(cfg["mirostat_tau"]))

    def sample(self, logits, history):
        cfg = self.cfg
        z = np.array(logits, dtype=f32)
        for tok, bias in cfg["logit_bias"]:
            z[tok] = z[tok] + f32(bias)
        ids = [v for v in range(len(z)) if z[v] > -np.inf]
        z = np.array([z[v] for v in ids], dtype=f32)
        chain = cfg["chain"] if cfg["mirostat"] == 0 else []
        min_keep = max(cfg["min_keep"], 0)
        if cfg["temperature"] <= 0:
            for stage in chain:
                if stage == "penalties":
                    z = penalties(ids, z, cfg, history)
                if stage == "dry":
                    z = dry(ids, z, cfg, history)
            return ids[ranked(ids, z)[0]]
        for stage in chain:
            if stage == "penalties":
                z = penalties(ids, z, cfg, history)
            elif stage == "dry":
                z = dry(ids, z, cfg, history)
            elif stage == "top_n_sigma":
                ids, z = top_n_sigma(ids, z, cfg["top_n_sigma"])
            elif stage == "top_k":
                ids, z = top_k(ids, z, cfg["top_k"])
            elif stage == "typ_p":
                ids, z = typical_p(ids, z, cfg["typical_p"], min_keep)
            elif stage == "top_p":
                ids, z = top_p(ids, z, cfg["top_p"], min_keep)
            elif stage == "min_p":
                ids, z = min_p(ids, z, cfg["min_p"], min_keep)
            elif stage == "xtc":
                if cfg["xtc_probability"] > 0 and f32(cfg["xtc_threshold"]) <= f32(0.5) and len(ids) >= 2:
                    if self.rng.uniform() <= float(f32(cfg["xtc_probability"])):
                        ids, z = xtc(ids, z, cfg["xtc_threshold"], min_keep)
            elif stage == "temperature":
                z = (z / f32(cfg["temperature"])).astype(f32)
        if cfg["mirostat"] != 0:
            z = (z / f32(cfg["temperature"])).astype(f32)
            prob, order = softmax(z), ranked(ids, z)
            if cfg["mirostat"] == 1:  # Zipf exponent from the 100 likeliest, then k from mu
                st = tt = 0.0
                for i in range(min(100, len(ids)) - 1):
                    t = math.log((i + 2) / (i + 1))
                    st += t * math.log(prob[order[i]] / prob[order[i + 1]])
                    tt += t * t
                k = 1.0
                if tt > 0:
                    s = st / tt
                    eps = s - 1
                    k = math.pow(eps * math.pow(2.0, self.mu) / (1 - math.pow(len(logits), -eps)), 1 / s)
                n = int(min(max(k, 1.0), len(ids))) if math.isfinite(k) else len(ids)
            else:  # v2: the likeliest whose surprise is at most mu
                n = 1
                while n < len(ids) and -math.log2(prob[order[n]]) <= self.mu:
                    n += 1
            ids, z = keep(ids, z, order[:n])
        prob = softmax(z)
        pick = draw(ids, prob, self.rng.uniform())
        if cfg["mirostat"] != 0:
            surprise = -math.log2(prob[pick])
            self.mu -= float(f32(cfg["mirostat_eta"])) * (surprise - float(f32(cfg["mirostat_tau"])))
        return ids[pick]


def logits_stream(seed, vocab, spread, ties):
    g = MT19937_64(seed + 1)
    while True:
        row = []
        for _ in range(vocab):
            x = spread * (2 * g.uniform() - 1)
            row.append(float(f32(math.floor(x + 0.5) if ties else x)))
        yield row


DEFAULTS = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, typical_p=1.0, top_n_sigma=-1.0,
                xtc_probability=0.0, xtc_threshold=0.1, min_keep=0, repeat_penalty=1.0, repeat_last_n=64,
                frequency_penalty=0.0, presence_penalty=0.0, dry_multiplier=0.0, dry_base=1.75,
                dry_allowed_length=2, dry_penalty_last_n=64, dry_sequence_breakers=[], mirostat=0,
                mirostat_tau=5.0, mirostat_eta=0.1, logit_bias=[],
                chain=["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"])
OFF = dict(top_k=0, top_p=1.0, min_p=0.0)  # the default cuts off, to look at one sampler alone

REPEATING = [1, 2, 3, 4, 5, 1, 2, 3, 9, 9, 1, 2, 3, 4, 7, 8, 1, 2, 3]  # ends in a repeat of "1 2 3"

CASES = [
    ("defaults", dict(), 64, 4.0, False, []),
    ("defaults, a large vocabulary", dict(), 3000, 6.0, False, []),
    ("top-p alone", dict(OFF, temperature=1.0, top_p=0.9), 1000, 3.0, False, []),
    ("min-p alone", dict(OFF, temperature=0.7, min_p=0.1), 64, 3.0, False, []),
    ("typical-p", dict(OFF, temperature=1.0, typical_p=0.5), 64, 3.0, False, []),
    ("typical-p with min_keep", dict(OFF, temperature=1.0, typical_p=0.2, min_keep=5), 64, 3.0, True, []),
    ("top-n-sigma", dict(OFF, temperature=1.0, top_n_sigma=1.0), 500, 4.0, False, []),
    ("XTC", dict(OFF, temperature=1.0, xtc_probability=0.5, xtc_threshold=0.05), 64, 3.0, False, []),
    ("XTC with min_keep and ties", dict(OFF, temperature=1.0, xtc_probability=0.9, xtc_threshold=0.02, min_keep=40),
     64, 3.0, True, []),
    ("penalties", dict(OFF, temperature=1.0, repeat_penalty=1.3, frequency_penalty=0.2, presence_penalty=0.5,
                       repeat_last_n=16), 32, 3.0, False, REPEATING),
    ("penalties over the whole history", dict(OFF, temperature=1.0, repeat_penalty=1.1, repeat_last_n=-1), 32, 3.0,
     False, REPEATING),
    ("DRY", dict(OFF, temperature=1.0, dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
                 dry_sequence_breakers=[[9], [7, 8]]), 16, 2.0, False, REPEATING),
    ("DRY, a short window, a steep base", dict(OFF, temperature=1.0, dry_multiplier=2.0, dry_base=3.0,
                                               dry_allowed_length=1, dry_penalty_last_n=12,
                                               dry_sequence_breakers=[[11, 12, 13]]), 16, 2.0, False, REPEATING),
    ("mirostat v1", dict(mirostat=1, mirostat_tau=3.0, mirostat_eta=0.1, temperature=1.0), 1000, 6.0, False, []),
    ("mirostat v2", dict(mirostat=2, mirostat_tau=3.0, mirostat_eta=0.2, temperature=0.9), 200, 5.0, False, []),
    ("toy's old order", dict(temperature=1.5, chain=["temperature", "top_k", "min_p", "top_p"]), 64, 4.0, False, []),
    ("logit bias", dict(OFF, temperature=1.0, logit_bias=[[3, 5.0], [10, "-inf"], [11, -2.5]]), 16, 2.0, False, []),
    ("greedy after penalties and DRY", dict(temperature=0.0, repeat_penalty=1.5, dry_multiplier=1.0), 16, 1.0, True,
     REPEATING),
    ("every sampler", dict(temperature=1.2, top_k=50, top_p=0.97, min_p=0.01, typical_p=0.95, top_n_sigma=2.5,
                           xtc_probability=0.3, xtc_threshold=0.08, repeat_penalty=1.1, frequency_penalty=0.1,
                           presence_penalty=0.1, dry_multiplier=0.5, dry_sequence_breakers=[[0]]), 128, 4.0, False,
     REPEATING),
]
STEPS = 60


def main():
    _check_stream()
    out = []
    for index, (name, over, vocab, spread, ties, history) in enumerate(CASES):
        cfg = dict(DEFAULTS, **over, seed=1000 + index)
        cfg["logit_bias"] = [[t, -math.inf if b == "-inf" else b] for t, b in cfg["logit_bias"]]
        ref, rows, hist, tokens = Reference(cfg), logits_stream(cfg["seed"], vocab, spread, ties), list(history), []
        for _ in range(STEPS):
            tok = ref.sample(next(rows), hist)
            tokens.append(tok)
            hist.append(tok)
        cfg["logit_bias"] = [[t, "-inf" if b == -math.inf else b] for t, b in cfg["logit_bias"]]
        out.append(dict(name=name, config=cfg, vocab=vocab, spread=spread, ties=ties, history=history, tokens=tokens))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "samplers.json")
    with open(path, "w") as f:
        json.dump(dict(made_by="scripts/reference/samplers.py", steps=STEPS, cases=out), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
