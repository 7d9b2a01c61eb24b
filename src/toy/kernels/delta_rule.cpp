// kernels/delta_rule.cpp — the Gated DeltaNet loops: the chunked gated delta rule, the short
// causal convolution in front of it and the L2 norm of its queries and keys (kernels.h states
// the math; reference.cpp has the token-by-token recurrence it is tested against).
//
// The chunked form (Yang et al., "Gated Delta Networks", §3; the WY / UT transform of the
// flash-linear-attention kernels). Within a chunk, with γ_t = g_1 + … + g_t and the state S₀ it
// starts from, the delta-rule updates d_t satisfy
//   d_t = β_t (v_t − e^{γ_t} S₀ᵀk_t − Σ_{s<t} e^{γ_t−γ_s} (k_t·k_s) d_s),
// a unit lower-triangular system (I + A) D = β⊙V − β⊙e^γ⊙(K S₀) with A[t,s] = β_t e^{γ_t−γ_s} k_t·k_s.
// Solving it once for U = (I + A)⁻¹(β⊙V) and W = (I + A)⁻¹(β⊙e^γ⊙K) gives D = U − W S₀, then
//   o_t = e^{γ_t} S₀ᵀq_t + Σ_{s≤t} e^{γ_t−γ_s} (q_t·k_s) d_s,
//   S   = e^{γ_n} S₀ + Σ_t e^{γ_n−γ_t} k_t d_tᵀ.
// Every exponent is a difference γ_t − γ_s ≤ 0 (g ≤ 0), so nothing overflows. The solve is by
// the inverse T = (I + A)⁻¹ (n³/6 multiply-adds), so that U and W, like every other product of a
// chunk, are matrix products through gemm (the UT transform of flash-linear-attention).
#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/delta_net_grad.h"
#include "toy/kernels/kernels.h"

namespace toy::kernels {

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The recurrence for tokens [t0, t1) of value head h, two passes over the state per token:
// S ← e^{g}·S and u = Sᵀk together, then S ← S + k dᵀ and o = Sᵀq·scale together.
void delta_rule_tokens(const DeltaRuleGeometry& g, int64_t h, int64_t t0, int64_t t1, const float* q, const float* k,
                       const float* v, const float* gate, const float* beta, float* s, float* o) {
  const int64_t Dk = g.Dk, Dv = g.Dv, hk = g.key_head(h);
  const float scale = 1.0f / std::sqrt(float(Dk));
  std::vector<float> d(static_cast<size_t>(Dv));
  for (int64_t t = t0; t < t1; ++t) {
    const float *qt = q + (t * g.Hk + hk) * Dk, *kt = k + (t * g.Hk + hk) * Dk, *vt = v + (t * g.Hv + h) * Dv;
    float* ot = o + (t * g.Hv + h) * Dv;
    const float decay = std::exp(gate[t * g.Hv + h]), b = beta[t * g.Hv + h];
    std::fill(d.begin(), d.end(), 0.0f);  // u = Sᵀk, then d = β(v − u)
    for (int64_t i = 0; i < Dk; ++i) {
      float* si = s + i * Dv;
      for (int64_t j = 0; j < Dv; ++j) d[size_t(j)] += (si[j] *= decay) * kt[i];
    }
    for (int64_t j = 0; j < Dv; ++j) d[size_t(j)] = b * (vt[j] - d[size_t(j)]), ot[j] = 0;
    for (int64_t i = 0; i < Dk; ++i) {
      float* si = s + i * Dv;
      for (int64_t j = 0; j < Dv; ++j) ot[j] += (si[j] += kt[i] * d[size_t(j)]) * qt[i];
    }
    for (int64_t j = 0; j < Dv; ++j) ot[j] *= scale;
  }
}

// One value head over every chunk; s: its state [Dk, Dv], updated in place. Each chunk of n
// tokens is gathered into contiguous rows so that its products run through gemm:
//   KK = K Kᵀ, QK = Q Kᵀ                                   [n, n]
//   T = (I + A)⁻¹, A[t, r] = β_t e^{γ_t−γ_r} KK[t, r] (r < t)  [n, n], unit lower triangular
//   U = T (β ⊙ V),  W = T (β e^γ ⊙ K),  D = U − W S₀          [n, Dv]
//   O = scale·(e^γ ⊙ Q S₀ + P D),  P[t, r] = e^{γ_t−γ_r} QK[t, r] (r ≤ t)
//   S = e^{γ_n} S₀ + (e^{γ_n−γ} ⊙ K)ᵀ D
void delta_rule_head(const DeltaRuleGeometry& g, int64_t h, const float* q, const float* k, const float* v,
                     const float* gate, const float* beta, float* s, float* o, int64_t chunk) {
  const int64_t Dk = g.Dk, Dv = g.Dv, hk = g.key_head(h);
  const float scale = 1.0f / std::sqrt(float(Dk));
  const auto L = static_cast<size_t>(chunk);
  std::vector<float> gamma(L), Kc(L * size_t(Dk)), Qc(L * size_t(Dk)), BV(L * size_t(Dv)), BK(L * size_t(Dk)),
      KK(L * L), QK(L * L), Tinv(L * L), U(L * size_t(Dv)), W(L * size_t(Dk)), O(L * size_t(Dv));
  for (int64_t c0 = 0; c0 < g.T; c0 += chunk) {
    const int64_t n = std::min(chunk, g.T - c0);
    if (n < kDeltaRuleMinMatrixChunk) {  // the packing for gemm would cost more than it saves
      delta_rule_tokens(g, h, c0, c0 + n, q, k, v, gate, beta, s, o);
      continue;
    }
    float acc = 0;
    for (int64_t t = 0; t < n; ++t) {  // γ, and the chunk's rows: K, Q, β ⊙ V, β e^γ ⊙ K
      const float b = beta[(c0 + t) * g.Hv + h];
      gamma[size_t(t)] = acc += gate[(c0 + t) * g.Hv + h];
      const float *kt = k + ((c0 + t) * g.Hk + hk) * Dk, *qt = q + ((c0 + t) * g.Hk + hk) * Dk;
      const float* vt = v + ((c0 + t) * g.Hv + h) * Dv;
      const float bk = b * std::exp(gamma[size_t(t)]);
      for (int64_t i = 0; i < Dk; ++i) Kc[size_t(t * Dk + i)] = kt[i], Qc[size_t(t * Dk + i)] = qt[i];
      for (int64_t i = 0; i < Dk; ++i) BK[size_t(t * Dk + i)] = bk * kt[i];
      for (int64_t j = 0; j < Dv; ++j) BV[size_t(t * Dv + j)] = b * vt[j];
    }
    gemm(false, true, n, n, Dk, Kc.data(), Kc.data(), KK.data(), false);
    gemm(false, true, n, n, Dk, Qc.data(), Kc.data(), QK.data(), false);
    for (int64_t t = 0; t < n; ++t) {  // row t of T = (I + A)⁻¹: e_t − Σ_{r<t} A[t, r]·(row r of T)
      const float b = beta[(c0 + t) * g.Hv + h];
      float* Tt = Tinv.data() + t * n;
      std::fill(Tt, Tt + n, 0.0f);
      Tt[t] = 1;
      for (int64_t r = 0; r < t; ++r) {
        const float a = b * std::exp(gamma[size_t(t)] - gamma[size_t(r)]) * KK[size_t(t * n + r)];
        const float* Tr = Tinv.data() + r * n;
        for (int64_t c = 0; c <= r; ++c) Tt[c] -= a * Tr[c];
      }
    }
    gemm(false, false, n, Dv, n, Tinv.data(), BV.data(), U.data(), false);  // U
    gemm(false, false, n, Dk, n, Tinv.data(), BK.data(), W.data(), false);  // W
    for (int64_t i = 0; i < n * Dk; ++i) W[size_t(i)] = -W[size_t(i)];
    gemm(false, false, n, Dv, Dk, W.data(), s, U.data(), true);  // D = U − W S₀, in U
    for (int64_t t = 0; t < n; ++t) {                            // P (in QK) and scale·e^γ ⊙ Q (in Qc)
      for (int64_t r = 0; r < n; ++r)
        QK[size_t(t * n + r)] =
            r <= t ? scale * std::exp(gamma[size_t(t)] - gamma[size_t(r)]) * QK[size_t(t * n + r)] : 0.0f;
      const float f = scale * std::exp(gamma[size_t(t)]);
      for (int64_t i = 0; i < Dk; ++i) Qc[size_t(t * Dk + i)] *= f;
    }
    gemm(false, false, n, Dv, Dk, Qc.data(), s, O.data(), false);
    gemm(false, false, n, Dv, n, QK.data(), U.data(), O.data(), true);
    for (int64_t t = 0; t < n; ++t) std::copy_n(O.data() + t * Dv, Dv, o + ((c0 + t) * g.Hv + h) * Dv);
    const float last = gamma[size_t(n - 1)], decay = std::exp(last);
    for (int64_t i = 0; i < Dk * Dv; ++i) s[i] *= decay;
    for (int64_t t = 0; t < n; ++t) {  // e^{γ_n−γ_t} ⊙ K, in Kc
      const float f = std::exp(last - gamma[size_t(t)]);
      for (int64_t i = 0; i < Dk; ++i) Kc[size_t(t * Dk + i)] *= f;
    }
    gemm(true, false, Dk, Dv, n, Kc.data(), U.data(), s, true);
  }
}

}  // namespace

void gated_delta_rule(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v, const float* gate,
                      const float* beta, float* S, float* o, int64_t chunk) {
  parallel_for(g.Hv, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) delta_rule_head(g, h, q, k, v, gate, beta, S + h * g.Dk * g.Dv, o, chunk);
  });
}

namespace {

// The backward of one value head h, adding into dq, dk (shared with the other heads of its key
// head: the caller runs those one after the other). With P = e^{g_t} S_{t−1} and
// d = β_t (v_t − Pᵀk_t), S_t = P + k_t dᵀ, o_t = S_tᵀq_t / √Dk, from t = T − 1 down to 0:
//   dq_t += S_t do_t / √Dk;   dS += q_t do_tᵀ / √Dk;   dk_t += dS d;   e = β_t dSᵀk_t;
//   dβ_t = (dSᵀk_t)·(v_t − Pᵀk_t);   dv_t = e;   dk_t −= P e;   dP = dS − k_t eᵀ;
//   dg_t = Σ dP ⊙ P;   dS ← e^{g_t} dP   (the gradient for S_{t−1}).
void delta_rule_head_backward(const DeltaRuleGeometry& g, int64_t h, const float* q, const float* k, const float* v,
                              const float* gate, const float* beta, const float* S0, const float* dout, float* dq,
                              float* dk, float* dv, float* dgate, float* dbeta) {
  const int64_t Dk = g.Dk, Dv = g.Dv, hk = g.key_head(h), N = Dk * Dv;
  const float scale = 1.0f / std::sqrt(float(Dk));
  std::vector<float> states(static_cast<size_t>((g.T + 1) * N));  // S_0 … S_T
  std::copy_n(S0, N, states.begin());
  for (int64_t t = 0; t < g.T; ++t) {  // recompute the states, one token at a time
    std::copy_n(states.begin() + t * N, N, states.begin() + (t + 1) * N);
    float* S = states.data() + (t + 1) * N;
    const float* kt = k + (t * g.Hk + hk) * Dk;
    const float* vt = v + (t * g.Hv + h) * Dv;
    const float decay = std::exp(gate[t * g.Hv + h]), b = beta[t * g.Hv + h];
    for (int64_t i = 0; i < N; ++i) S[i] *= decay;
    for (int64_t j = 0; j < Dv; ++j) {
      float u = 0;
      for (int64_t i = 0; i < Dk; ++i) u += S[i * Dv + j] * kt[i];
      const float d = b * (vt[j] - u);
      for (int64_t i = 0; i < Dk; ++i) S[i * Dv + j] += kt[i] * d;
    }
  }
  std::vector<float> dS(static_cast<size_t>(N), 0.0f), P(static_cast<size_t>(N)), dd(static_cast<size_t>(Dv)),
      e(static_cast<size_t>(Dv));
  for (int64_t t = g.T - 1; t >= 0; --t) {
    const float* St = states.data() + (t + 1) * N;
    const float* Sp = states.data() + t * N;
    const float* qt = q + (t * g.Hk + hk) * Dk;
    const float* kt = k + (t * g.Hk + hk) * Dk;
    const float* vt = v + (t * g.Hv + h) * Dv;
    const float* do_t = dout + (t * g.Hv + h) * Dv;
    float* dqt = dq + (t * g.Hk + hk) * Dk;
    float* dkt = dk + (t * g.Hk + hk) * Dk;
    const float decay = std::exp(gate[t * g.Hv + h]), b = beta[t * g.Hv + h];
    for (int64_t i = 0; i < N; ++i) P[size_t(i)] = decay * Sp[i];
    for (int64_t i = 0; i < Dk; ++i) {  // o_t = S_tᵀq_t·scale
      dqt[i] += scale * dot(St + i * Dv, do_t, Dv);
      for (int64_t j = 0; j < Dv; ++j) dS[size_t(i * Dv + j)] += scale * qt[i] * do_t[j];
    }
    float db = 0;
    for (int64_t j = 0; j < Dv; ++j) {  // d = β(v − Pᵀk): dd = dSᵀk, e = β dd
      float u = 0, ddj = 0;
      for (int64_t i = 0; i < Dk; ++i) {
        u += P[size_t(i * Dv + j)] * kt[i];
        ddj += dS[size_t(i * Dv + j)] * kt[i];
      }
      const float d = b * (vt[j] - u);
      dd[size_t(j)] = d;  // d itself, for dk_t += dS d
      db += ddj * (vt[j] - u);
      e[size_t(j)] = b * ddj;
    }
    dbeta[t * g.Hv + h] = db;
    for (int64_t j = 0; j < Dv; ++j) dv[(t * g.Hv + h) * Dv + j] = e[size_t(j)];
    float dg = 0;
    for (int64_t i = 0; i < Dk; ++i) {
      float acc = 0;
      for (int64_t j = 0; j < Dv; ++j) {
        const size_t ij = size_t(i * Dv + j);
        acc += dS[ij] * dd[size_t(j)] - P[ij] * e[size_t(j)];
        const float dP = dS[ij] - kt[i] * e[size_t(j)];
        dg += dP * P[ij];
        dS[ij] = decay * dP;
      }
      dkt[i] += acc;
    }
    dgate[t * g.Hv + h] = dg;
  }
}

}  // namespace

void gated_delta_rule_backward(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v,
                               const float* gate, const float* beta, const float* S0, const float* dout, float* dq,
                               float* dk, float* dv, float* dgate, float* dbeta) {
  std::fill_n(dq, g.T * g.Hk * g.Dk, 0.0f);
  std::fill_n(dk, g.T * g.Hk * g.Dk, 0.0f);
  parallel_for(g.Hk, 1, [&](int64_t k0, int64_t k1) {  // by key head: its value heads add into its dq, dk in order
    for (int64_t hk = k0; hk < k1; ++hk)
      for (int64_t h = 0; h < g.Hv; ++h)
        if (g.key_head(h) == hk)
          delta_rule_head_backward(g, h, q, k, v, gate, beta, S0 + h * g.Dk * g.Dv, dout, dq, dk, dv, dgate, dbeta);
  });
}

void causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T, int64_t C, int64_t K) {
  std::vector<float> window(size_t((K - 1 + T) * C));  // [K − 1 + T, C]: the state, then x
  std::copy_n(state, (K - 1) * C, window.begin());
  std::copy_n(x, T * C, window.begin() + (K - 1) * C);
  std::vector<float> wt(size_t(K * C));  // w transposed, [K, C]: the loops below run along channels
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) wt[size_t(j * C + c)] = w[c * K + j];
  parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* yt = y + t * C;
      std::fill_n(yt, C, 0.0f);
      for (int64_t j = 0; j < K; ++j) {  // each y[t, c] sums its K terms in order of j
        const float *xs = window.data() + (t + j) * C, *wj = wt.data() + j * C;
        for (int64_t c = 0; c < C; ++c) yt[c] += xs[c] * wj[c];
      }
    }
  });
  std::copy_n(window.begin() + T * C, (K - 1) * C, state);
}

void l2_norm(const float* x, float eps, int64_t R, int64_t D, float* y) {
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * D;
    double sum = 0;
    for (int64_t i = 0; i < D; ++i) sum += double(xr[i] * xr[i]);
    const float scale = 1.0f / std::fmax(std::sqrt(float(sum)), eps);
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = xr[i] * scale;
  }
}

void causal_conv1d_backward(const float* x, const float* w, const float* state0, const float* dy, int64_t T, int64_t C,
                            int64_t K, float* dx, float* dw) {
  auto window = [&](int64_t s, int64_t c) { return s < K - 1 ? state0[s * C + c] : x[(s - K + 1) * C + c]; };
  parallel_for(T, 16, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t c = 0; c < C; ++c) {
        float acc = 0;  // input s sits at window row s + K − 1, read by outputs t = s + K − 1 − j
        for (int64_t j = 0; j < K; ++j) {
          const int64_t t = s + K - 1 - j;
          if (t < T) acc += dy[t * C + c] * w[c * K + j];
        }
        dx[s * C + c] = acc;
      }
  });
  parallel_for(C, 16, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t j = 0; j < K; ++j) {
        float acc = 0;
        for (int64_t t = 0; t < T; ++t) acc += dy[t * C + c] * window(t + j, c);
        dw[c * K + j] = acc;
      }
  });
}

void l2_norm_backward(const float* x, const float* dy, float eps, int64_t R, int64_t D, float* dx) {
  parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * D, *dyr = dy + r * D;
      double sum = 0;
      for (int64_t i = 0; i < D; ++i) sum += double(xr[i] * xr[i]);
      const float norm = std::sqrt(float(sum)), scale = 1.0f / std::fmax(norm, eps);
      double dy_y = 0;  // dy·y; the norm's own term vanishes where eps clamps it
      if (norm > eps)
        for (int64_t i = 0; i < D; ++i) dy_y += double(dyr[i]) * xr[i] * scale;
      for (int64_t i = 0; i < D; ++i) dx[r * D + i] = scale * (dyr[i] - xr[i] * scale * float(dy_y));
    }
  });
}

namespace reference {

template <class T>
void causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T_, int64_t C, int64_t K) {
  auto window = [&](int64_t s, int64_t c) { return s < K - 1 ? state[s * C + c] : x[(s - K + 1) * C + c]; };
  for (int64_t t = 0; t < T_; ++t)
    for (int64_t c = 0; c < C; ++c) {
      T acc = 0;
      for (int64_t j = 0; j < K; ++j) acc += T(w[c * K + j]) * T(window(t + j, c));
      y[t * C + c] = float(acc);
    }
  std::vector<float> last(size_t((K - 1) * C));
  for (int64_t s = 0; s < K - 1; ++s)
    for (int64_t c = 0; c < C; ++c) last[size_t(s * C + c)] = window(T_ + s, c);
  std::copy(last.begin(), last.end(), state);
}

template <class T>
void l2_norm(const float* x, float eps, int64_t R, int64_t D, float* y) {
  for (int64_t r = 0; r < R; ++r) {
    T sum = 0;
    for (int64_t i = 0; i < D; ++i) sum += T(x[r * D + i]) * T(x[r * D + i]);
    const T scale = T(1) / std::max(std::sqrt(sum), T(eps));
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = float(T(x[r * D + i]) * scale);
  }
}

template void causal_conv1d<float>(const float*, const float*, float*, float*, int64_t, int64_t, int64_t);
template void causal_conv1d<double>(const float*, const float*, float*, float*, int64_t, int64_t, int64_t);
template void l2_norm<float>(const float*, float, int64_t, int64_t, float*);
template void l2_norm<double>(const float*, float, int64_t, int64_t, float*);

}  // namespace reference

}  // namespace toy::kernels
