// kernels/reference.cpp — naive reference kernels (see reference.h).
#include "toy/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/tensor/quant.h"

namespace toy::kernels::reference {

void round_activations(DType wt, const float* x, float* out, int64_t K) {
  switch (activation_dtype(wt)) {
    case DType::F16:
      for (int64_t k = 0; k < K; ++k) out[k] = fp16_to_f32(f32_to_fp16(x[k]));
      return;
    case DType::BF16:
      for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(f32_to_bf16(x[k]));
      return;
    case DType::Q8_0: {
      std::vector<BlockQ8_0> q(size_t(K / 32));
      quantize_activations_q8_0(x, q.data(), K);
      dequantize(DType::Q8_0, q.data(), out, K);
      return;
    }
    case DType::Q8_K: {  // ggml's Q8_K quantizer is the reference one
      std::vector<uint8_t> q(size_t(row_bytes(DType::Q8_K, K)));
      quantize(DType::Q8_K, x, q.data(), K);
      dequantize(DType::Q8_K, q.data(), out, K);
      return;
    }
    default:
      std::copy(x, x + K, out);
  }
}

void quantize_activations_q8_0(const float* x, BlockQ8_0* out, int64_t K) {
  for (int64_t b = 0; b < K / 32; ++b, x += 32) {
    float amax = 0;
    for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float id = amax != 0 ? 127 / amax : 0;
    out[b].d = f32_to_fp16(amax / 127);
    for (int k = 0; k < 32; ++k) out[b].qs[k] = int8_t(std::nearbyint(x[k] * id));
  }
}

template <class T>
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K) {
  std::vector<float> xr(static_cast<size_t>(M * K)), wn(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) round_activations(wt, x + m * K, xr.data() + m * K, K);
  for (int64_t n = 0; n < N; ++n) {
    dequantize(wt, static_cast<const uint8_t*>(w) + n * row_bytes(wt, K), wn.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k) s += T(xr[size_t(m * K + k)]) * T(wn[size_t(k)]);
      y[m * N + n] = float(s);
    }
  }
}

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool acc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      T s = acc ? T(C[m * N + n]) : T(0);
      for (int64_t k = 0; k < K; ++k) s += T(ta ? A[k * M + m] : A[m * K + k]) * T(tb ? B[n * K + k] : B[k * N + n]);
      C[m * N + n] = float(s);
    }
}

// Index helpers: q and o [B, T, H, Dh], k and v [B, S, Hkv, Dh], P [B, H, T, S].
namespace {
struct Index {
  const AttentionGeometry& g;
  int64_t q(int64_t b, int64_t t, int64_t h) const { return ((b * g.T + t) * g.H + h) * g.Dh; }
  int64_t kv(int64_t b, int64_t j, int64_t h) const { return ((b * g.S + j) * g.Hkv + h / (g.H / g.Hkv)) * g.Dh; }
  int64_t p(int64_t b, int64_t h, int64_t t) const { return ((b * g.H + h) * g.T + t) * g.S; }
};

// The score of query (b, t, h) against key j, before and after the cap.
template <class T>
T score(const AttentionGeometry& g, const float* q, const float* k, int64_t b, int64_t t, int64_t h, int64_t j) {
  const Index at{g};
  T s = 0;
  for (int64_t d = 0; d < g.Dh; ++d) s += T(q[at.q(b, t, h) + d]) * T(k[at.kv(b, j, h) + d]);
  s *= T(g.scale);
  return g.softcap > 0 ? T(g.softcap) * std::tanh(s / T(g.softcap)) : s;
}
}  // namespace

template <class T>
void attention(const AttentionGeometry& g, const float* q, const float* k, const float* v, float* o, float* P) {
  const Index at{g};
  std::vector<T> s(size_t(g.S));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t t = 0; t < g.T; ++t) {
        const int64_t j0 = g.first_key(t), j1 = g.key_end(t);  // visible keys [j0, j1)
        T mx = -INFINITY, z = 0;
        for (int64_t j = j0; j < j1; ++j) mx = std::max(mx, s[size_t(j)] = score<T>(g, q, k, b, t, h, j));
        for (int64_t j = j0; j < j1; ++j) z += s[size_t(j)] = std::exp(s[size_t(j)] - mx);
        float* p = P + at.p(b, h, t);
        std::fill_n(p, g.S, 0.0f);
        for (int64_t j = j0; j < j1; ++j) p[j] = float(s[size_t(j)] / z);
        for (int64_t d = 0; d < g.Dh; ++d) {
          T od = 0;
          for (int64_t j = j0; j < j1; ++j) od += s[size_t(j)] / z * T(v[at.kv(b, j, h) + d]);
          o[at.q(b, t, h) + d] = float(od);
        }
      }
}

template <class T>
void attention_backward(const AttentionGeometry& g, const float* q, const float* k, const float* v, const float* P,
                        const float* dout, float* dq, float* dk, float* dv) {
  const Index at{g};
  std::vector<T> gq(size_t(g.B * g.T * g.H * g.Dh)), gk(size_t(g.B * g.S * g.Hkv * g.Dh)), gv(gk.size()),
      dP(size_t(g.S));
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t t = 0; t < g.T; ++t) {
        const int64_t j0 = g.first_key(t), j1 = g.key_end(t);
        const float* p = P + at.p(b, h, t);
        const float* dO = dout + at.q(b, t, h);
        T pdp = 0;
        for (int64_t j = j0; j < j1; ++j) {  // dv_j += P_j dO;  dP_j = dO·v_j
          T dpj = 0;
          for (int64_t d = 0; d < g.Dh; ++d) {
            gv[size_t(at.kv(b, j, h) + d)] += T(p[j]) * T(dO[d]);
            dpj += T(dO[d]) * T(v[at.kv(b, j, h) + d]);
          }
          dP[size_t(j)] = dpj;
          pdp += T(p[j]) * dpj;
        }
        for (int64_t j = j0; j < j1; ++j) {  // ds_j = P_j (dP_j − Σ P dP), through the cap, then scale
          T ds = T(p[j]) * (dP[size_t(j)] - pdp);
          if (g.softcap > 0) {
            const T c = score<T>(g, q, k, b, t, h, j) / T(g.softcap);
            ds *= 1 - c * c;
          }
          ds *= T(g.scale);
          for (int64_t d = 0; d < g.Dh; ++d) {
            gq[size_t(at.q(b, t, h) + d)] += ds * T(k[at.kv(b, j, h) + d]);
            gk[size_t(at.kv(b, j, h) + d)] += ds * T(q[at.q(b, t, h) + d]);
          }
        }
      }
  std::transform(gq.begin(), gq.end(), dq, [](T x) { return float(x); });
  std::transform(gk.begin(), gk.end(), dk, [](T x) { return float(x); });
  std::transform(gv.begin(), gv.end(), dv, [](T x) { return float(x); });
}

template <class T>
void rms_norm(const float* x, const float* w, float eps, int64_t R, int64_t D, float* y) {
  for (int64_t r = 0; r < R; ++r) {
    T ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += T(x[r * D + d]) * T(x[r * D + d]);
    const T rs = 1 / std::sqrt(ss / T(D) + T(eps));
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = float(T(x[r * D + d]) * rs * T(w[d]));
  }
}

template <class T>
void rms_norm_backward(const float* x, const float* w, float eps, const float* dy, int64_t R, int64_t D, float* dx,
                       float* dw) {
  std::vector<T> gw(static_cast<size_t>(D));
  for (int64_t r = 0; r < R; ++r) {
    const float *xr = x + r * D, *dr = dy + r * D;
    T ss = 0, gx = 0;  // gx = mean(g·x̂) with g = dy·w
    for (int64_t d = 0; d < D; ++d) ss += T(xr[d]) * T(xr[d]);
    const T rs = 1 / std::sqrt(ss / T(D) + T(eps));
    for (int64_t d = 0; d < D; ++d) gx += T(dr[d]) * T(w[d]) * T(xr[d]) * rs;
    gx /= T(D);
    for (int64_t d = 0; d < D; ++d) {
      const T xh = T(xr[d]) * rs;
      dx[r * D + d] = float(rs * (T(dr[d]) * T(w[d]) - xh * gx));
      gw[size_t(d)] += T(dr[d]) * xh;
    }
  }
  std::transform(gw.begin(), gw.end(), dw, [](T v) { return float(v); });
}

// The row's mean and 1/sqrt(var + eps), in T.
template <class T>
std::pair<T, T> moments(const float* xr, int64_t D, float eps) {
  T mean = 0, var = 0;
  for (int64_t d = 0; d < D; ++d) mean += T(xr[d]);
  mean /= T(D);
  for (int64_t d = 0; d < D; ++d) var += (T(xr[d]) - mean) * (T(xr[d]) - mean);
  return {mean, 1 / std::sqrt(var / T(D) + T(eps))};
}

template <class T>
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t R, int64_t D, float* y) {
  for (int64_t r = 0; r < R; ++r) {
    const auto [mean, rs] = moments<T>(x + r * D, D, eps);
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = float((T(x[r * D + d]) - mean) * rs * T(w[d]) + T(b[d]));
  }
}

template <class T>
void layer_norm_backward(const float* x, const float* w, float eps, const float* dy, int64_t R, int64_t D, float* dx,
                         float* dw, float* db) {
  std::vector<T> gw(static_cast<size_t>(D)), gb(static_cast<size_t>(D));
  for (int64_t r = 0; r < R; ++r) {
    const float *xr = x + r * D, *dr = dy + r * D;
    const auto [mean, rs] = moments<T>(xr, D, eps);
    T mg = 0, mgx = 0;
    for (int64_t d = 0; d < D; ++d) {
      mg += T(dr[d]) * T(w[d]);
      mgx += T(dr[d]) * T(w[d]) * (T(xr[d]) - mean) * rs;
    }
    mg /= T(D), mgx /= T(D);
    for (int64_t d = 0; d < D; ++d) {
      const T xh = (T(xr[d]) - mean) * rs;
      dx[r * D + d] = float(rs * (T(dr[d]) * T(w[d]) - mg - xh * mgx));
      gw[size_t(d)] += T(dr[d]) * xh;
      gb[size_t(d)] += T(dr[d]);
    }
  }
  std::transform(gw.begin(), gw.end(), dw, [](T v) { return float(v); });
  std::transform(gb.begin(), gb.end(), db, [](T v) { return float(v); });
}

template <class T>
void gated_delta_rule(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v, const float* gate,
                      const float* beta, float* S, float* o) {
  const T scale = T(1) / std::sqrt(T(g.Dk));
  for (int64_t h = 0; h < g.Hv; ++h) {
    const int64_t hk = g.key_head(h);
    std::vector<T> s(S + h * g.Dk * g.Dv, S + (h + 1) * g.Dk * g.Dv), d(size_t(g.Dv));  // s[i·Dv + j]
    for (int64_t t = 0; t < g.T; ++t) {
      const float* qt = q + (t * g.Hk + hk) * g.Dk;
      const float* kt = k + (t * g.Hk + hk) * g.Dk;
      const float* vt = v + (t * g.Hv + h) * g.Dv;
      const T decay = std::exp(T(gate[t * g.Hv + h])), b = beta[t * g.Hv + h];
      for (T& x : s) x *= decay;
      for (int64_t j = 0; j < g.Dv; ++j) {  // d = β(v − Sᵀk)
        T u = 0;
        for (int64_t i = 0; i < g.Dk; ++i) u += s[size_t(i * g.Dv + j)] * T(kt[i]);
        d[size_t(j)] = b * (T(vt[j]) - u);
      }
      for (int64_t i = 0; i < g.Dk; ++i)
        for (int64_t j = 0; j < g.Dv; ++j) s[size_t(i * g.Dv + j)] += T(kt[i]) * d[size_t(j)];
      for (int64_t j = 0; j < g.Dv; ++j) {  // o = Sᵀq / √Dk
        T acc = 0;
        for (int64_t i = 0; i < g.Dk; ++i) acc += s[size_t(i * g.Dv + j)] * T(qt[i]);
        o[(t * g.Hv + h) * g.Dv + j] = float(acc * scale);
      }
    }
    std::transform(s.begin(), s.end(), S + h * g.Dk * g.Dv, [](T x) { return float(x); });
  }
}

template void matmul_wt<float>(const float*, const void*, DType, float*, int64_t, int64_t, int64_t);
template void matmul_wt<double>(const float*, const void*, DType, float*, int64_t, int64_t, int64_t);
template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);

#define TOY_REFERENCE(T)                                                                                              \
  template void attention<T>(const AttentionGeometry&, const float*, const float*, const float*, float*, float*);     \
  template void attention_backward<T>(const AttentionGeometry&, const float*, const float*, const float*,             \
                                      const float*, const float*, float*, float*, float*);                            \
  template void rms_norm<T>(const float*, const float*, float, int64_t, int64_t, float*);                             \
  template void rms_norm_backward<T>(const float*, const float*, float, const float*, int64_t, int64_t, float*,       \
                                     float*);                                                                         \
  template void layer_norm<T>(const float*, const float*, const float*, float, int64_t, int64_t, float*);             \
  template void layer_norm_backward<T>(const float*, const float*, float, const float*, int64_t, int64_t, float*,     \
                                       float*, float*);                                                               \
  template void gated_delta_rule<T>(const DeltaRuleGeometry&, const float*, const float*, const float*, const float*, \
                                    const float*, float*, float*);
TOY_REFERENCE(float)
TOY_REFERENCE(double)
#undef TOY_REFERENCE

}  // namespace toy::kernels::reference
