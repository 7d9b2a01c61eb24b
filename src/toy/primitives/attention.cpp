// primitives/attention.cpp — causal grouped-query attention (optional sliding window and
// soft-cap), with its hand-written gradient.
//
// For query head h (KV head g = h / (H/Hkv)) and query t at position p = S − T + t:
//   s_j = cap·tanh(scale·q·k_j / cap)  (or scale·q·k_j)   for visible keys j
//   P   = softmax(s),  o = Σ_j P_j v_j
// Backward (dO given):  dv_j += P_j dO;  dP_j = dO·v_j;  ds_j = P_j (dP_j − Σ P dP);
//   through the cap: ds_j *= 1 − (s_j/cap)²;  dq = scale Σ ds_j k_j;  dk_j += scale ds_j q.
//
// How it is computed. The dot products q·k_j and dO·v_j are laid out so that the vector unit
// works across keys j rather than across the Dh terms of one dot product: K (and, in backward,
// V) of one KV head is first transposed into [Dh, keys], and s_j += q_d·Kᵀ[d, j] runs over j.
// Every output still accumulates its terms in the same order as the plain loop
// (d = 0 … Dh−1, then j in order), with no fused multiply-add (ISO C++ mode: no contraction),
// so the AVX2 and the portable versions, any thread count and any blocking give the same bits.
// Work items: forward, (b, KV head, block of queries); backward, (b, KV head), which owns its
// dk and dv rows, so threads never write to the same memory.
#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

struct Geometry {
  int64_t B, T, S, H, Hkv, Dh;
  int64_t first_key(int64_t t, int64_t window) const {  // visible keys: [first_key, S − T + t]
    const int64_t p = S - T + t;
    return window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
  }
};

constexpr int64_t kQueryBlock = 16;  // queries per forward work item

// Raw pointers of one call, so that the loops below index plain arrays.
struct Views {
  const float *q, *k, *v;
  float* out;      // forward: o;  backward: dq
  float *P, *capped;
  const float* dout;
  float *dk, *dv;
};

// Copies rows [j0, j1) of head g of x ([B, S, Hkv, Dh], batch b) into xt[d·ld + j − j0].
inline void transpose_head(const float* x, const Geometry& g, int64_t b, int64_t kh, int64_t j0, int64_t j1, float* xt, int64_t ld) {
  for (int64_t j = j0; j < j1; ++j) {
    const float* xj = x + ((b * g.S + j) * g.Hkv + kh) * g.Dh;
    for (int64_t d = 0; d < g.Dh; ++d) xt[d * ld + (j - j0)] = xj[d];
  }
}

// Forward for queries [t0, t1) of every head of KV head kh in batch b.
__attribute__((always_inline)) inline void forward_item(const Views& w, const Geometry& g, const AttentionOptions& o,
                                                        int64_t b, int64_t kh, int64_t t0, int64_t t1,
                                                        std::vector<float>& kt_buf, std::vector<float>& s_buf) {
  const int64_t group = g.H / g.Hkv, Dh = g.Dh;
  const int64_t jlo = g.first_key(t0, o.window), jhi = g.S - g.T + t1;  // keys any query of the block sees
  const int64_t ld = jhi - jlo;
  kt_buf.resize(size_t(Dh * ld));
  s_buf.resize(size_t(ld));
  float* kt = kt_buf.data();
  transpose_head(w.k, g, b, kh, jlo, jhi, kt, ld);
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
    for (int64_t t = t0; t < t1; ++t) {
      const float* qi = w.q + ((b * g.T + t) * g.H + h) * Dh;
      const int64_t j0 = g.first_key(t, o.window) - jlo, j1 = g.S - g.T + t + 1 - jlo;  // visible, relative to jlo
      float* s = s_buf.data();
      for (int64_t j = j0; j < j1; ++j) s[j] = 0.0f;
      for (int64_t d = 0; d < Dh; ++d) {  // s_j = q·k_j, terms in order of d
        const float qd = qi[d];
        const float* ktd = kt + d * ld;
        for (int64_t j = j0; j < j1; ++j) s[j] += qd * ktd[j];
      }
      const size_t row = size_t(((b * g.H + h) * g.T + t) * g.S + jlo);
      float mx = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) {
        float x = o.scale * s[j];
        if (o.softcap > 0) {
          x = o.softcap * std::tanh(x / o.softcap);
          if (w.capped) w.capped[row + size_t(j)] = x;
        }
        s[j] = x;
        mx = std::max(mx, x);
      }
      double z = 0;
      for (int64_t j = j0; j < j1; ++j) {
        s[j] = std::exp(s[j] - mx);
        z += s[j];
      }
      const float inv = float(1.0 / z);
      float* oi = w.out + ((b * g.T + t) * g.H + h) * Dh;
      for (int64_t d = 0; d < Dh; ++d) oi[d] = 0.0f;
      for (int64_t j = j0; j < j1; ++j) {
        const float p = s[j] * inv;
        if (w.P) w.P[row + size_t(j)] = p;
        const float* vj = w.v + ((b * g.S + jlo + j) * g.Hkv + kh) * Dh;
        for (int64_t d = 0; d < Dh; ++d) oi[d] += p * vj[d];
      }
    }
}

// Backward for batch b, KV head kh: all its query heads and queries; writes dq of those heads
// and the dk, dv rows of kh.
__attribute__((always_inline)) inline void backward_item(const Views& w, const Geometry& g, const AttentionOptions& o,
                                                         int64_t b, int64_t kh, std::vector<float>& vt_buf,
                                                         std::vector<float>& ds_buf) {
  const int64_t group = g.H / g.Hkv, Dh = g.Dh, S = g.S;
  vt_buf.resize(size_t(Dh * S));
  ds_buf.resize(size_t(S));
  float *vt = vt_buf.data(), *ds = ds_buf.data();
  transpose_head(w.v, g, b, kh, 0, S, vt, S);
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
    for (int64_t t = 0; t < g.T; ++t) {
      const size_t row = size_t(((b * g.H + h) * g.T + t) * S);
      const float* Pi = w.P + row;
      const float* di = w.dout + ((b * g.T + t) * g.H + h) * Dh;
      const float* qi = w.q + ((b * g.T + t) * g.H + h) * Dh;
      float* dqi = w.out + ((b * g.T + t) * g.H + h) * Dh;
      const int64_t j0 = g.first_key(t, o.window), j1 = S - g.T + t + 1;
      for (int64_t j = j0; j < j1; ++j) ds[j] = 0.0f;
      for (int64_t d = 0; d < Dh; ++d) {  // dP_j = dO·v_j, terms in order of d
        const float dd = di[d];
        const float* vtd = vt + d * S;
        for (int64_t j = j0; j < j1; ++j) ds[j] += dd * vtd[j];
      }
      double pdp = 0;
      for (int64_t j = j0; j < j1; ++j) pdp += double(Pi[j]) * ds[j];
      const float fpdp = float(pdp);
      for (int64_t j = j0; j < j1; ++j) {
        float dsj = Pi[j] * (ds[j] - fpdp);
        if (o.softcap > 0) {
          const float c = w.capped[row + size_t(j)] / o.softcap;
          dsj *= 1.0f - c * c;
        }
        ds[j] = dsj * o.scale;
      }
      for (int64_t j = j0; j < j1; ++j) {
        const float dsj = ds[j], pj = Pi[j];
        const float* kj = w.k + ((b * S + j) * g.Hkv + kh) * Dh;
        float* dkj = w.dk + ((b * S + j) * g.Hkv + kh) * Dh;
        float* dvj = w.dv + ((b * S + j) * g.Hkv + kh) * Dh;
        for (int64_t d = 0; d < Dh; ++d) {
          dqi[d] += dsj * kj[d];
          dkj[d] += dsj * qi[d];
          dvj[d] += pj * di[d];
        }
      }
    }
}

// The same bodies compiled for AVX2 (chosen at run time with the kernels' SIMD switch).
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) void forward_item_avx2(const Views& w, const Geometry& g, const AttentionOptions& o, int64_t b,
                                                       int64_t kh, int64_t t0, int64_t t1, std::vector<float>& kt,
                                                       std::vector<float>& s) {
  forward_item(w, g, o, b, kh, t0, t1, kt, s);
}
__attribute__((target("avx2"))) void backward_item_avx2(const Views& w, const Geometry& g, const AttentionOptions& o, int64_t b,
                                                        int64_t kh, std::vector<float>& vt, std::vector<float>& ds) {
  backward_item(w, g, o, b, kh, vt, ds);
}
#endif

bool use_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return kernels::simd() == kernels::Simd::avx2;
#else
  return false;
#endif
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  auto [B, T, H, Dh] = q.dims<4>("attention: q");
  auto [Bk, S, Hkv, Dk] = k.dims<4>("attention: k");
  if (k.shape() != v.shape() || Bk != B || Dk != Dh || S < T || Hkv <= 0 || H % Hkv)
    throw ShapeError("attention: q " + to_string(q.shape()) + ", k " + to_string(k.shape()) + ", v " + to_string(v.shape()));
  const Geometry g{B, T, S, H, Hkv, Dh};
  const bool saving = needs_grad({&q, &k, &v});
  Tensor out = Tensor::empty(q.shape());
  Tensor P = saving ? Tensor::empty({B, H, T, S}) : Tensor();        // probabilities, for backward
  Tensor capped = saving && o.softcap > 0 ? Tensor::empty({B, H, T, S}) : Tensor();
  const Views w{.q = q.data(), .k = k.data(), .v = v.data(), .out = out.data_mut(),
                .P = saving ? P.data_mut() : nullptr, .capped = capped.defined() ? capped.data_mut() : nullptr,
                .dout = nullptr, .dk = nullptr, .dv = nullptr};
  const int64_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  const bool avx2 = use_avx2();
  kernels::parallel_for(B * Hkv * blocks, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kt, s;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / (Hkv * blocks), kh = i / blocks % Hkv, t0 = i % blocks * kQueryBlock, t1 = std::min(T, t0 + kQueryBlock);
#if defined(__x86_64__) || defined(__i386__)
      if (avx2) { forward_item_avx2(w, g, o, b, kh, t0, t1, kt, s); continue; }
#endif
      forward_item(w, g, o, b, kh, t0, t1, kt, s);
    }
  });

  if (saving)
    record(out, "attention", {q, k, v}, [q, k, v, P, capped, g, o](const Tensor& dout) {
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
      const Views w{.q = q.data(), .k = k.data(), .v = v.data(), .out = dq.data_mut(), .P = const_cast<float*>(P.data()),
                    .capped = capped.defined() ? const_cast<float*>(capped.data()) : nullptr, .dout = dout.data(),
                    .dk = dk.data_mut(), .dv = dv.data_mut()};
      const bool avx2 = use_avx2();
      kernels::parallel_for(g.B * g.Hkv, 1, [&](int64_t r0, int64_t r1) {
        std::vector<float> vt, ds;
        for (int64_t r = r0; r < r1; ++r) {
#if defined(__x86_64__) || defined(__i386__)
          if (avx2) { backward_item_avx2(w, g, o, r / g.Hkv, r % g.Hkv, vt, ds); continue; }
#endif
          backward_item(w, g, o, r / g.Hkv, r % g.Hkv, vt, ds);
        }
      });
      return std::vector<Tensor>{dq, dk, dv};
    });
  return out;
}

}  // namespace toy
