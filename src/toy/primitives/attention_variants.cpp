// primitives/attention_variants.cpp — differential attention's pieces and Scalable-Softmax (the
// math in attention_variants.h).
#include "toy/primitives/attention_variants.h"

#include <cmath>
#include <string>

#include "toy/kernels/kernels.h"

namespace toy {

namespace {

double dot(const Tensor& a, const Tensor& b) {
  float s = 0;
  kernels::row_dots(a.data(), b.data(), 1, a.numel(), &s);
  return s;
}

}  // namespace

float diff_lambda_init(int64_t layer) { return 0.8f - 0.6f * std::exp(-0.3f * float(layer)); }

float diff_lambda(const DiffLambda& l, float lambda_init) {
  return float(std::exp(dot(l.q1, l.k1)) - std::exp(dot(l.q2, l.k2)) + lambda_init);
}

Tensor keep_columns(const Tensor& x, int64_t begin, int64_t n) {
  const int64_t C = x.size(-1), R = x.numel() / C;
  if (begin < 0 || n < 0 || begin + n > C)
    throw ShapeError("keep_columns: [" + std::to_string(begin) + ", +" + std::to_string(n) + ") of " +
                     to_string(x.shape()));
  auto keep = [=](const Tensor& from) {
    Tensor y = Tensor::zeros(from.shape());
    kernels::copy_columns(from.data(), C, begin, y.data_mut(), C, begin, R, n);
    return y;
  };
  Tensor y = keep(x);
  if (needs_grad({&x}))
    record(y, "keep_columns", {x}, [keep](const Tensor& dy) { return std::vector<Tensor>{keep(dy)}; });
  return y;
}

Tensor differential_mix(const Tensor& o1, const Tensor& o2, const DiffLambda& l, float lambda_init) {
  if (o1.shape() != o2.shape() || l.q1.dim() != 1 || l.k1.shape() != l.q1.shape() || l.q2.shape() != l.q1.shape() ||
      l.k2.shape() != l.q1.shape())
    throw ShapeError("differential_mix: o1 " + to_string(o1.shape()) + ", o2 " + to_string(o2.shape()) +
                     ", λ vectors " + to_string(l.q1.shape()));
  const float e1 = float(std::exp(dot(l.q1, l.k1))), e2 = float(std::exp(dot(l.q2, l.k2)));
  const float lambda = e1 - e2 + lambda_init;
  Tensor y = Tensor::empty(o1.shape());  // o₁ − λ·o₂
  kernels::scale(o2.data(), -lambda, y.data_mut(), y.numel());
  kernels::add(o1.data(), y.data(), y.data_mut(), y.numel());
  if (needs_grad({&o1, &o2, &l.q1, &l.k1, &l.q2, &l.k2}))
    record(y, "differential_mix", {o1, o2, l.q1, l.k1, l.q2, l.k2}, [o2, l, e1, e2, lambda](const Tensor& dy) {
      const float dlambda = -float(dot(dy, o2));
      Tensor do2 = Tensor::empty(o2.shape());
      kernels::scale(dy.data(), -lambda, do2.data_mut(), do2.numel());
      auto times = [](const Tensor& v, float s) {
        Tensor r = Tensor::empty(v.shape());
        kernels::scale(v.data(), s, r.data_mut(), v.numel());
        return r;
      };
      return std::vector<Tensor>{dy.clone(),
                                 do2,
                                 times(l.k1, dlambda * e1),
                                 times(l.q1, dlambda * e1),
                                 times(l.k2, -dlambda * e2),
                                 times(l.q2, -dlambda * e2)};
    });
  return y;
}

Tensor differential_attention(const Tensor& q, const Attend& attend, const DiffLambda& l, float lambda_init) {
  const int64_t d = q.size(-1) / 2;
  const Tensor o1 = attend(keep_columns(q, 0, d));  // A₁·v: q₁·k₁ only  [B, T, H, Dh]
  const Tensor o2 = attend(keep_columns(q, d, d));  // A₂·v: q₂·k₂ only  [B, T, H, Dh]
  return differential_mix(o1, o2, l, lambda_init);
}

Tensor keys_attended(const Tensor& pos, int64_t window) {
  auto [B, T] = pos.dims<2>("keys_attended: pos");
  Tensor n = Tensor::empty({B, T});
  for (int64_t i = 0; i < B * T; ++i) {
    const int64_t seen = int64_t(pos.ids()[i]) + 1;
    n.data_mut()[i] = float(window > 0 ? std::min(seen, window) : seen);
  }
  return n;
}

Tensor scalable_softmax(const Tensor& q, const Tensor& s, const Tensor& n_keys) {
  auto [B, T, H, Dh] = q.dims<4>("scalable_softmax: q");
  if (s.shape() != Shape{H} || n_keys.shape() != Shape{B, T})
    throw ShapeError("scalable_softmax: s " + to_string(s.shape()) + ", n_keys " + to_string(n_keys.shape()) +
                     " for q " + to_string(q.shape()));
  const int64_t BT = B * T, M = BT * H;
  Tensor log_n = Tensor::empty({BT});  // log n per query row
  for (int64_t i = 0; i < BT; ++i) log_n.data_mut()[i] = std::log(n_keys.data()[i]);
  Tensor f = Tensor::empty({M});  // s[h]·log n[b, t] per (b, t, h)
  for (int64_t i = 0; i < M; ++i) f.data_mut()[i] = s.data()[i % H] * log_n.data()[i / H];
  Tensor y = Tensor::empty(q.shape());
  kernels::scale_rows(q.data(), f.data(), M, Dh, y.data_mut());
  if (needs_grad({&q, &s}))
    record(y, "scalable_softmax", {q, s}, [q, log_n, f, H = H, M, Dh = Dh](const Tensor& dy) {
      Tensor dq = Tensor::empty(q.shape()), dy_q = Tensor::empty({M}), ds = Tensor::zeros({H});
      kernels::scale_rows(dy.data(), f.data(), M, Dh, dq.data_mut());
      kernels::row_dots(dy.data(), q.data(), M, Dh, dy_q.data_mut());
      for (int64_t i = 0; i < M; ++i) ds.data_mut()[i % H] += log_n.data()[i / H] * dy_q.data()[i];
      return std::vector<Tensor>{dq, ds};
    });
  return y;
}

}  // namespace toy
