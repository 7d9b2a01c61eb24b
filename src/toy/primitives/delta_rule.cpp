// primitives/delta_rule.cpp — shape checks around the Gated DeltaNet kernels (kernels/delta_rule.cpp).
#include "toy/primitives/delta_rule.h"

#include <stdexcept>
#include <string>

#include "toy/kernels/delta_net_grad.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"

namespace toy {

namespace {

constexpr int64_t kChunk = 64;  // tokens per chunk of the chunked delta rule (llama.cpp's too)

void expect(bool ok, const char* op, const std::string& what) {
  if (!ok) throw ShapeError(std::string(op) + ": " + what);
}

}  // namespace

Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state) {
  auto [T, C] = x.dims<2>("causal_conv1d: x");
  auto [Cw, K] = w.dims<2>("causal_conv1d: w");
  expect(Cw == C && w.dtype() == DType::F32, "causal_conv1d",
         "w " + to_string(w.shape()) + " for x " + to_string(x.shape()));
  expect(state.shape() == Shape{K - 1, C}, "causal_conv1d", "state " + to_string(state.shape()));
  if (DeviceOps* d = device_ops(x)) return d->causal_conv1d(x, w, state);
  const bool grad = needs_grad({&x, &w});
  const Tensor state0 = grad ? state.clone() : Tensor();  // the window's first K − 1 rows, for backward
  Tensor y = Tensor::empty({T, C});
  kernels::causal_conv1d(x.data(), w.data(), state.data_mut(), y.data_mut(), T, C, K);
  if (grad)  // dx: each input feeds K outputs; dw: each tap sums over the outputs (kernels/delta_net_grad.h)
    record(y, "causal_conv1d", {x, w}, [x, w, state0, T = T, C = C, K = K](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape()), dw = Tensor::empty(w.shape());
      kernels::causal_conv1d_backward(x.data(), w.data(), state0.data(), dy.data(), T, C, K, dx.data_mut(),
                                      dw.data_mut());
      return std::vector<Tensor>{dx, dw};
    });
  return y;
}

Tensor l2_norm(const Tensor& x, float eps) {
  if (DeviceOps* d = device_ops(x)) return d->l2_norm(x, eps);
  const int64_t D = x.size(-1), R = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  kernels::l2_norm(x.data(), eps, R, D, y.data_mut());
  if (needs_grad({&x}))  // dx = r·(dy − y·(dy·y)): the part of dy along y is the norm's
    record(y, "l2_norm", {x}, [x, eps, R, D](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape());
      kernels::l2_norm_backward(x.data(), dy.data(), eps, R, D, dx.data_mut());
      return std::vector<Tensor>{dx};
    });
  return y;
}

// g = softplus(α + dt_bias)·a. With u = α + dt_bias and softplus' = σ:
//   dα = dg·a·σ(u),  ddt_bias = Σ_rows dα,  da = Σ_rows dg·softplus(u).
// (a = −exp(A_log) is the parameter GGUF stores; dA_log would be da·a = Σ dg·g.)
Tensor delta_log_decay(const Tensor& alpha, const Tensor& dt_bias, const Tensor& a) {
  const int64_t Hv = alpha.size(-1), R = alpha.numel() / Hv;
  expect(a.shape() == Shape{Hv} && dt_bias.shape() == Shape{Hv}, "delta_log_decay",
         "a " + to_string(a.shape()) + ", dt_bias " + to_string(dt_bias.shape()) + " for " + to_string(alpha.shape()));
  if (DeviceOps* d = device_ops(alpha)) return d->delta_log_decay(alpha, dt_bias, a);
  Tensor u = alpha.clone();  // [R, Hv]
  kernels::add_to_rows(dt_bias.data(), R, Hv, u.data_mut());
  Tensor g = Tensor::empty(alpha.shape());
  kernels::softplus(u.data(), g.data_mut(), g.numel());
  kernels::mul_rows(a.data(), R, Hv, g.data_mut());
  if (needs_grad({&alpha, &dt_bias, &a}))
    record(g, "delta_log_decay", {alpha, dt_bias, a}, [u, a, R, Hv](const Tensor& dg) {
      Tensor dalpha = Tensor::empty(u.shape()), sp = Tensor::empty(u.shape());
      kernels::sigmoid(u.data(), dalpha.data_mut(), u.numel());
      kernels::mul(dalpha.data(), dg.data(), dalpha.data_mut(), u.numel());
      kernels::mul_rows(a.data(), R, Hv, dalpha.data_mut());
      kernels::softplus(u.data(), sp.data_mut(), u.numel());
      kernels::mul(sp.data(), dg.data(), sp.data_mut(), u.numel());
      Tensor ddt = Tensor::empty({Hv}), da = Tensor::empty({Hv});
      kernels::sum_rows(dalpha.data(), R, Hv, ddt.data_mut());
      kernels::sum_rows(sp.data(), R, Hv, da.data_mut());
      return std::vector<Tensor>{dalpha, ddt, da};
    });
  return g;
}

Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, HeadMap map) {
  auto [T, Hk, Dk] = q.dims<3>("gated_delta_rule: q");
  auto [Tv, Hv, Dv] = v.dims<3>("gated_delta_rule: v");
  expect(k.shape() == q.shape() && Tv == T && Hv % Hk == 0, "gated_delta_rule",
         "q " + to_string(q.shape()) + ", k " + to_string(k.shape()) + ", v " + to_string(v.shape()));
  expect(g.shape() == Shape{T, Hv} && beta.shape() == Shape{T, Hv}, "gated_delta_rule",
         "g " + to_string(g.shape()) + ", beta " + to_string(beta.shape()) + " for v " + to_string(v.shape()));
  expect(state.shape() == Shape{Hv, Dk, Dv}, "gated_delta_rule", "state " + to_string(state.shape()));
  if (DeviceOps* d = device_ops(q)) return d->gated_delta_rule(q, k, v, g, beta, state, map == HeadMap::Tiled);
  const kernels::DeltaRuleGeometry geo{.T = T, .Hk = Hk, .Hv = Hv, .Dk = Dk, .Dv = Dv, .tiled = map == HeadMap::Tiled};
  Tensor o = Tensor::empty({T, Hv, Dv});
  const bool grad = needs_grad({&q, &k, &v, &g, &beta});
  const Tensor S0 = grad ? state.clone() : Tensor();  // the state the backward recomputes from
  kernels::gated_delta_rule(geo, q.data(), k.data(), v.data(), g.data(), beta.data(), state.data_mut(), o.data_mut(),
                            kChunk);
  if (grad)
    record(o, "gated_delta_rule", {q, k, v, g, beta}, [q, k, v, g, beta, S0, geo](const Tensor& dout) {
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
      Tensor dg = Tensor::empty(g.shape()), dbeta = Tensor::empty(beta.shape());
      kernels::gated_delta_rule_backward(geo, q.data(), k.data(), v.data(), g.data(), beta.data(), S0.data(),
                                         dout.data(), dq.data_mut(), dk.data_mut(), dv.data_mut(), dg.data_mut(),
                                         dbeta.data_mut());
      return std::vector<Tensor>{dq, dk, dv, dg, dbeta};
    });
  return o;
}

}  // namespace toy
