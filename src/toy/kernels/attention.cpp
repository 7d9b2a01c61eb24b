// kernels/attention.cpp — grouped-query attention (causal or bidirectional) on raw arrays, forward and backward
// (the math: primitives/attention.cpp; the API: kernels.h).
//
// How it is computed. Two paths, chosen by what is saved, never by the number of queries alone:
//
// Inference (nothing saved: prompts, decoding, scoring) and short training inputs take loops in
// the manner of flash-decoding. The keys are cut into chunks of kKeyChunk at fixed positions, and
// each work item (b, KV head, chunk) takes every query row of the group (its query heads × the T
// queries) against the chunk's keys, read in place (row j of K is Dh contiguous values):
// s_j = scale·q·k_j (kernels::scores), then m = max s_j, e_j = exp(s_j − m), z = Σ e_j
// (kernels::softmax_terms), õ = Σ e_j v_j (kernels::weighted_sum). The partials of a row are
// combined in chunk order:
//   M = max_c m_c,  w_c = exp(m_c − M) / Σ_c z_c exp(m_c − M),  o = Σ_c w_c õ_c,  P_j = w_c e_j.
// Chunks spread a long context's work over the threads (a model has few KV heads: SmolLM2 has
// 3); their size is fixed, so the results do not depend on the thread count. Nor does a row's
// arithmetic depend on the other rows: a prompt's row has the bits of the same row decoded
// alone, which the prompt cache, batched decoding and `echo` scoring rely on. (Prompts took the
// gemm path below until issue #37 found the difference; the loops measured no slower there:
// SmolLM2-135M Q8_0 pp512 on one thread of an AMD EPYC Zen 5 (family 26), best of three under
// load, 230 tokens/s for the gemm path, 279 for the loops.)
//
// Training's long inputs (T ≥ kGemmMinT queries, probabilities saved for backward) go through
// kernels::gemm on blocks of kBlock queries: for each (b, KV head, block), with the queries of
// that KV head's query heads stacked, Sc = Q·Kᵀ over the keys any query of the block sees (a
// band of the causal triangle), a masked softmax per row, O = P·V.
// Backward, per (b, h): dV_h += Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP)) (⊙ the cap's
// derivative) · scale, dQ = dS·K, dK_h += dSᵀ·Q; then per (b, KV head) the dK_h, dV_h of the
// group's heads are summed in head order. Every product runs inside one work item (nested
// parallel_for calls run on the calling thread), and partial sums are added in a fixed order,
// so the results do not depend on the thread count either.
//
// k and v may be IEEE halves (an F16 KV cache): the loop path's kernels widen them as they read
// them, the gemm path copies the keys and values a work item reads into f32 tiles; both share
// all the arithmetic with the f32 cache.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "toy/kernels/kernels.h"

namespace toy::kernels {

namespace {

constexpr int64_t kBlock = 32;     // queries per gemm block
constexpr int64_t kGemmMinT = 8;   // from this many queries on, training takes the gemm path
constexpr int64_t kKeyChunk = 64;  // keys per work item of the loop path (K and V of a chunk stay in L1)

// Keys or values [B, S, Hkv, Dh]: F32, or IEEE halves (F16, a KV cache).
struct KvRows {
  const void* data;
  DType dtype;
  // Row j of KV head kh in batch b (Dh values; the next key's row is Hkv·Dh values further).
  const void* row(const AttentionGeometry& g, int64_t b, int64_t kh, int64_t j) const {
    const int64_t i = ((b * g.S + j) * g.Hkv + kh) * g.Dh;
    if (dtype == DType::F16) return static_cast<const uint16_t*>(data) + i;
    return static_cast<const float*>(data) + i;
  }
  // Rows [j0, j1) of KV head kh in batch b as a contiguous f32 [j1 − j0, Dh] matrix.
  void rows(const AttentionGeometry& g, int64_t b, int64_t kh, int64_t j0, int64_t j1, float* m) const {
    for (int64_t j = j0; j < j1; ++j) {
      const void* r = row(g, b, kh, j);
      float* out = m + (j - j0) * g.Dh;
      if (dtype == DType::F16)
        f16_to_f32(static_cast<const uint16_t*>(r), out, g.Dh);
      else
        std::copy_n(static_cast<const float*>(r), g.Dh, out);
    }
  }
};

// Raw pointers of one call, so that the loops below index plain arrays.
struct Views {
  const float* q;
  KvRows k, v;
  float* out;  // forward: o;  backward: dq
  float *P, *capped;
  const float* dout;
};

// Rows [r0, r1) of head h of x ([B, L, heads, Dh], batch b) <-> a contiguous [r1 − r0, Dh] matrix.
inline void gather_rows(const float* x, int64_t L, int64_t heads, int64_t Dh, int64_t b, int64_t h, int64_t r0,
                        int64_t r1, float* m) {
  for (int64_t r = r0; r < r1; ++r) std::copy_n(x + ((b * L + r) * heads + h) * Dh, Dh, m + (r - r0) * Dh);
}
inline void scatter_rows(const float* m, int64_t L, int64_t heads, int64_t Dh, int64_t b, int64_t h, int64_t r0,
                         int64_t r1, float* x) {
  for (int64_t r = r0; r < r1; ++r) std::copy_n(m + (r - r0) * Dh, Dh, x + ((b * L + r) * heads + h) * Dh);
}

// The loop path. A query row's partial over one chunk of keys: [m, z, õ[Dh]] (see the header).
int64_t partial_size(const AttentionGeometry& g) { return g.Dh + 2; }

// The visible keys of query t inside chunk c: [j0, j1), empty when j0 ≥ j1.
std::pair<int64_t, int64_t> chunk_keys(const AttentionGeometry& g, int64_t t, int64_t c) {
  return {std::max(c * kKeyChunk, g.first_key(t)), std::min((c + 1) * kKeyChunk, g.key_end(t))};
}

// Work item (b, kh, chunk c): the partials of the group's rows (head-major, then t) to part.
// Saved probabilities get e_j for now; combine() scales them.
void forward_chunk(const Views& w, const AttentionGeometry& g, int64_t b, int64_t kh, int64_t c, float* part) {
  const int64_t group = g.H / g.Hkv, Dh = g.Dh, stride = g.Hkv * Dh;
  float s[kKeyChunk];
  // The KV cache of a long context comes from DRAM (the weights stream through the caches in
  // between): all of this chunk's and the next chunk's rows are requested at once, which more
  // than halves the time the kernels wait for them (the next chunk is usually the other thread's).
  const int64_t k0 = std::max(c * kKeyChunk, g.first_key(0)), k1 = std::min((c + 2) * kKeyChunk, g.S);
  prefetch_rows(w.k.row(g, b, kh, k0), w.k.dtype, stride, k1 - k0, Dh);
  prefetch_rows(w.v.row(g, b, kh, k0), w.v.dtype, stride, k1 - k0, Dh);
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
    for (int64_t t = 0; t < g.T; ++t, part += partial_size(g)) {
      const auto [j0, j1] = chunk_keys(g, t, c);
      float &m = part[0], &z = part[1], *ot = part + 2;
      if (j0 >= j1) {  // a query before the chunk's first key, or a window ending before it
        m = -INFINITY, z = 0.0f;
        std::fill_n(ot, Dh, 0.0f);
        continue;
      }
      const int64_t n = j1 - j0;
      const size_t row = size_t(((b * g.H + h) * g.T + t) * g.S + j0);  // (b, h, t, j0) in P and capped
      scores(w.q + ((b * g.T + t) * g.H + h) * Dh, w.k.row(g, b, kh, j0), w.k.dtype, stride, n, Dh, g.scale, s);
      if (g.softcap > 0)
        for (int64_t j = 0; j < n; ++j) {
          s[j] = g.softcap * std::tanh(s[j] / g.softcap);
          if (w.capped) w.capped[row + size_t(j)] = s[j];
        }
      const SoftmaxTerms e = softmax_terms(s, n);  // s_j ← e_j
      m = e.max, z = e.sum;
      if (w.P) std::copy_n(s, n, w.P + row);
      weighted_sum(s, w.v.row(g, b, kh, j0), w.v.dtype, stride, n, Dh, ot);
    }
}

// Query row (b, h, t) from its partials over the chunks [c0, c0 + chunks), `step` floats apart.
void combine(const Views& w, const AttentionGeometry& g, int64_t b, int64_t h, int64_t t, int64_t c0, int64_t chunks,
             const float* part, int64_t step) {
  float M = -INFINITY, Z = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) M = std::max(M, part[c * step]);
  for (int64_t c = 0; c < chunks; ++c) Z += part[c * step + 1] * std::exp(part[c * step] - M);
  float* ot = w.out + ((b * g.T + t) * g.H + h) * g.Dh;
  std::fill_n(ot, g.Dh, 0.0f);
  for (int64_t c = 0; c < chunks; ++c) {
    const float* p = part + c * step;
    const float wc = std::exp(p[0] - M) / Z;
    for (int64_t d = 0; d < g.Dh; ++d) ot[d] += wc * p[2 + d];
    if (w.P) {
      const auto [j0, j1] = chunk_keys(g, t, c0 + c);
      float* P = w.P + ((b * g.H + h) * g.T + t) * g.S;
      for (int64_t j = j0; j < j1; ++j) P[j] *= wc;
    }
  }
}

// Scratch matrices of one gemm work item.
struct Scratch {
  std::vector<float> q, k, v, s, o, d;
  static float* sized(std::vector<float>& m, int64_t n) {
    m.resize(size_t(n));
    return m.data();
  }
};

// The gemm path, forward: queries [t0, t1) of the query heads of KV head kh in batch b, stacked
// into one matrix (head-major) so that K and V are gathered and packed once for the group. (An
// element of a gemm product does not depend on the other rows, so this changes no bits.)
void forward_block(const Views& w, const AttentionGeometry& g, int64_t b, int64_t kh, int64_t t0, int64_t t1,
                   Scratch& m) {
  const int64_t Dh = g.Dh, group = g.H / g.Hkv, tb = t1 - t0, rows = group * tb;
  const int64_t jlo = g.first_key(t0), jhi = g.key_end(t1 - 1), span = jhi - jlo;  // keys the block sees
  float* Q = Scratch::sized(m.q, rows * Dh);
  float* K = Scratch::sized(m.k, span * Dh);
  float* V = Scratch::sized(m.v, span * Dh);
  float* Sc = Scratch::sized(m.s, rows * span);
  float* O = Scratch::sized(m.o, rows * Dh);
  for (int64_t i = 0; i < group; ++i) gather_rows(w.q, g.T, g.H, Dh, b, kh * group + i, t0, t1, Q + i * tb * Dh);
  w.k.rows(g, b, kh, jlo, jhi, K);
  w.v.rows(g, b, kh, jlo, jhi, V);
  gemm(false, true, rows, span, Dh, Q, K, Sc, false);  // Sc = Q·Kᵀ   [rows, span]
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t h = kh * group + i / tb, t = t0 + i % tb;
    const int64_t j0 = g.first_key(t) - jlo, j1 = g.key_end(t) - jlo;
    float* s = Sc + i * span;
    const size_t row = size_t(((b * g.H + h) * g.T + t) * g.S + jlo);
    for (int64_t j = j0; j < j1; ++j) {
      float x = g.scale * s[j];
      if (g.softcap > 0) {
        x = g.softcap * std::tanh(x / g.softcap);
        if (w.capped) w.capped[row + size_t(j)] = x;
      }
      s[j] = x;
    }
    const float inv = 1.0f / softmax_terms(s + j0, j1 - j0).sum;                      // s_j ← exp(s_j − max)
    for (int64_t j = 0; j < span; ++j) s[j] = j >= j0 && j < j1 ? s[j] * inv : 0.0f;  // P, masked
    std::copy_n(s + j0, j1 - j0, w.P + row + size_t(j0));
  }
  gemm(false, false, rows, Dh, span, Sc, V, O, false);  // O = P·V   [rows, Dh]
  for (int64_t i = 0; i < group; ++i) scatter_rows(O + i * tb * Dh, g.T, g.H, Dh, b, kh * group + i, t0, t1, w.out);
}

// The gemm path, backward for head h of batch b: dq rows of h, and this head's share of dk, dv
// ([S, Dh] each, to be summed over the group).
void backward_head(const Views& w, const AttentionGeometry& g, int64_t b, int64_t h, float* dK, float* dV, Scratch& m) {
  const int64_t Dh = g.Dh, S = g.S, kh = h / (g.H / g.Hkv);
  float* K = Scratch::sized(m.k, S * Dh);
  float* V = Scratch::sized(m.v, S * Dh);
  w.k.rows(g, b, kh, 0, S, K);
  w.v.rows(g, b, kh, 0, S, V);
  std::fill(dK, dK + S * Dh, 0.0f);
  std::fill(dV, dV + S * Dh, 0.0f);
  for (int64_t t0 = 0; t0 < g.T; t0 += kBlock) {
    const int64_t t1 = std::min(g.T, t0 + kBlock), tb = t1 - t0;
    const int64_t jlo = g.first_key(t0), jhi = g.key_end(t1 - 1), span = jhi - jlo;
    float* Q = Scratch::sized(m.q, tb * Dh);
    float* dO = Scratch::sized(m.o, tb * Dh);
    float* Pb = Scratch::sized(m.s, 2 * tb * span);
    float* dS = Pb + tb * span;
    float* dQ = Scratch::sized(m.d, tb * Dh);
    gather_rows(w.q, g.T, g.H, Dh, b, h, t0, t1, Q);
    gather_rows(w.dout, g.T, g.H, Dh, b, h, t0, t1, dO);
    for (int64_t r = 0; r < tb; ++r) std::copy_n(w.P + ((b * g.H + h) * g.T + t0 + r) * S + jlo, span, Pb + r * span);
    gemm(true, false, span, Dh, tb, Pb, dO, dV + jlo * Dh, true);  // dV += Pᵀ·dO
    gemm(false, true, tb, span, Dh, dO, V + jlo * Dh, dS, false);  // dP = dO·Vᵀ
    for (int64_t r = 0; r < tb; ++r) {
      const int64_t t = t0 + r, j0 = g.first_key(t) - jlo, j1 = g.key_end(t) - jlo;
      const float* p = Pb + r * span;
      float* ds = dS + r * span;
      double pdp = 0;
      for (int64_t j = j0; j < j1; ++j) pdp += double(p[j]) * ds[j];
      const float fpdp = float(pdp);
      const float* cap = g.softcap > 0 ? w.capped + ((b * g.H + h) * g.T + t) * S + jlo : nullptr;
      for (int64_t j = 0; j < span; ++j) {
        if (j < j0 || j >= j1) {
          ds[j] = 0.0f;
          continue;
        }
        float dsj = p[j] * (ds[j] - fpdp);
        if (cap) {
          const float c = cap[j] / g.softcap;
          dsj *= 1.0f - c * c;
        }
        ds[j] = dsj * g.scale;
      }
    }
    gemm(false, false, tb, Dh, span, dS, K + jlo * Dh, dQ, false);  // dQ = dS·K
    scatter_rows(dQ, g.T, g.H, Dh, b, h, t0, t1, w.out);
    gemm(true, false, span, Dh, tb, dS, Q, dK + jlo * Dh, true);  // dK += dSᵀ·Q
  }
}

}  // namespace

void attention(const AttentionGeometry& g, const float* q, const void* k, const void* v, DType kv, float* o, float* P,
               float* capped) {
  const int64_t B = g.B, T = g.T, S = g.S, H = g.H, Hkv = g.Hkv;
  if (P) std::fill_n(P, B * H * T * S, 0.0f);
  if (capped) std::fill_n(capped, B * H * T * S, 0.0f);
  const Views w{.q = q, .k = {k, kv}, .v = {v, kv}, .out = o, .P = P, .capped = capped, .dout = nullptr};
  if (P && T >= kGemmMinT) {
    const int64_t blocks = (T + kBlock - 1) / kBlock;
    parallel_for(B * Hkv * blocks, 1, [&](int64_t i0, int64_t i1) {
      Scratch m;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = i / (Hkv * blocks), kh = i / blocks % Hkv, t0 = i % blocks * kBlock;
        forward_block(w, g, b, kh, t0, std::min(T, t0 + kBlock), m);
      }
    });
    return;
  }
  const int64_t c0 = g.first_key(0) / kKeyChunk, chunks = (S - 1) / kKeyChunk + 1 - c0;  // chunks any query sees
  const int64_t rows = H / Hkv * T, step = partial_size(g);                              // rows of a work item
  std::vector<float> part(size_t(B * Hkv * chunks * rows * step));                       // [B, Hkv, chunks, rows, step]
  parallel_for(B * Hkv * chunks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      forward_chunk(w, g, i / (Hkv * chunks), i / chunks % Hkv, c0 + i % chunks, part.data() + i * rows * step);
  });
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t kh = h / (H / Hkv), r = h % (H / Hkv) * T + t;  // r: the row in its work items
        combine(w, g, b, h, t, c0, chunks, part.data() + ((b * Hkv + kh) * chunks * rows + r) * step, rows * step);
      }
}

void attention_backward(const AttentionGeometry& g, const float* q, const float* k, const float* v, const float* P,
                        const float* capped, const float* dout, float* dq, float* dk, float* dv) {
  const Views w{.q = q,
                .k = {k, DType::F32},
                .v = {v, DType::F32},
                .out = dq,
                .P = const_cast<float*>(P),
                .capped = const_cast<float*>(capped),
                .dout = dout};
  const int64_t B = g.B, H = g.H, Hkv = g.Hkv, S = g.S, Dh = g.Dh, group = H / Hkv;
  std::unique_ptr<float[]> part(new float[size_t(B * H * 2 * S * Dh)]);  // per head: dK_h, dV_h [S, Dh]
  parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    Scratch m;
    for (int64_t i = i0; i < i1; ++i) {
      float* dK = part.get() + i * 2 * S * Dh;
      backward_head(w, g, i / H, i % H, dK, dK + S * Dh, m);
    }
  });
  // dk, dv of KV head kh: the group's heads summed in order.
  std::fill_n(dk, B * S * Hkv * Dh, 0.0f);
  std::fill_n(dv, B * S * Hkv * Dh, 0.0f);
  parallel_for(B * Hkv, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / Hkv, kh = i % Hkv;
      for (int64_t j = 0; j < S; ++j) {
        float* dkj = dk + ((b * S + j) * Hkv + kh) * Dh;
        float* dvj = dv + ((b * S + j) * Hkv + kh) * Dh;
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
          const float* src = part.get() + (b * H + h) * 2 * S * Dh + j * Dh;
          for (int64_t d = 0; d < Dh; ++d) dkj[d] += src[d], dvj[d] += src[S * Dh + d];
        }
      }
    }
  });
}

}  // namespace toy::kernels
