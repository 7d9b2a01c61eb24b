// primitives/attention.cpp — causal grouped-query attention (optional sliding window and
// soft-cap), with its hand-written gradient.
//
// For query head h (KV head g = h / (H/Hkv)) and query t at position p = S − T + t:
//   s_j = cap·tanh(scale·q·k_j / cap)  (or scale·q·k_j)   for visible keys j
//   P   = softmax(s),  o = Σ_j P_j v_j
// Backward (dO given):  dv_j += P_j dO;  dP_j = dO·v_j;  ds_j = P_j (dP_j − Σ P dP);
//   through the cap: ds_j *= 1 − (s_j/cap)²;  dq = scale Σ ds_j k_j;  dk_j += scale ds_j q.
#include <cmath>

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

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
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
  const float *pq = q.data(), *pk = k.data(), *pv = v.data();
  float* po = out.data_mut();
  const int64_t group = H / Hkv;

  kernels::parallel_for(B * H * T, 4, [&](int64_t r0, int64_t r1) {
    std::vector<float> s(static_cast<size_t>(S));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (H * T), h = (r / T) % H, t = r % T, kh = h / group;
      const float* qi = pq + ((b * T + t) * H + h) * Dh;
      const int64_t j0 = g.first_key(t, o.window), j1 = S - T + t + 1;
      float mx = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) {
        float x = o.scale * dot(qi, pk + ((b * S + j) * Hkv + kh) * Dh, Dh);
        if (o.softcap > 0) {
          x = o.softcap * std::tanh(x / o.softcap);
          if (saving) capped.data_mut()[((b * H + h) * T + t) * S + j] = x;
        }
        s[size_t(j)] = x;
        mx = std::max(mx, x);
      }
      double z = 0;
      for (int64_t j = j0; j < j1; ++j) {
        s[size_t(j)] = std::exp(s[size_t(j)] - mx);
        z += s[size_t(j)];
      }
      const float inv = float(1.0 / z);
      float* oi = po + ((b * T + t) * H + h) * Dh;
      for (int64_t d = 0; d < Dh; ++d) oi[d] = 0;
      for (int64_t j = j0; j < j1; ++j) {
        const float p = s[size_t(j)] * inv;
        if (saving) P.data_mut()[((b * H + h) * T + t) * S + j] = p;
        const float* vj = pv + ((b * S + j) * Hkv + kh) * Dh;
        for (int64_t d = 0; d < Dh; ++d) oi[d] += p * vj[d];
      }
    }
  });

  if (saving)
    record(out, "attention", {q, k, v}, [q, k, v, P, capped, g, o](const Tensor& dout) {
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
      const auto [B, T, S, H, Hkv, Dh] = g;
      const int64_t group = H / Hkv;
      const float *pq = q.data(), *pk = k.data(), *pv = v.data(), *pP = P.data(), *pd = dout.data();
      // Each (b, kv head) owns its dk/dv slices: parallel over them without races.
      kernels::parallel_for(B * Hkv, 1, [&](int64_t r0, int64_t r1) {
        std::vector<float> ds(static_cast<size_t>(S));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t b = r / Hkv, kh = r % Hkv;
          for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
            for (int64_t t = 0; t < T; ++t) {
              const float* Pi = pP + ((b * H + h) * T + t) * S;
              const float* di = pd + ((b * T + t) * H + h) * Dh;
              const float* qi = pq + ((b * T + t) * H + h) * Dh;
              float* dqi = dq.data_mut() + ((b * T + t) * H + h) * Dh;
              const int64_t j0 = g.first_key(t, o.window), j1 = S - T + t + 1;
              double pdp = 0;
              for (int64_t j = j0; j < j1; ++j) {
                ds[size_t(j)] = dot(di, pv + ((b * S + j) * Hkv + kh) * Dh, Dh);  // dP_j
                pdp += double(Pi[j]) * ds[size_t(j)];
              }
              for (int64_t j = j0; j < j1; ++j) {
                float dsj = Pi[j] * (ds[size_t(j)] - float(pdp));
                if (o.softcap > 0) {
                  const float c = capped.data()[((b * H + h) * T + t) * S + j] / o.softcap;
                  dsj *= 1.0f - c * c;
                }
                dsj *= o.scale;
                const float* kj = pk + ((b * S + j) * Hkv + kh) * Dh;
                float* dkj = dk.data_mut() + ((b * S + j) * Hkv + kh) * Dh;
                float* dvj = dv.data_mut() + ((b * S + j) * Hkv + kh) * Dh;
                for (int64_t d = 0; d < Dh; ++d) {
                  dqi[d] += dsj * kj[d];
                  dkj[d] += dsj * qi[d];
                  dvj[d] += Pi[j] * di[d];
                }
              }
            }
        }
      });
      return std::vector<Tensor>{dq, dk, dv};
    });
  return out;
}

}  // namespace toy
