// primitives/delta_rule.cpp — shape checks around the Gated DeltaNet kernels (kernels/delta_rule.cpp).
#include "toy/primitives/delta_rule.h"

#include <stdexcept>
#include <string>

#include "toy/kernels/kernels.h"

namespace toy {

namespace {

constexpr int64_t kChunk = 64;  // tokens per chunk of the chunked delta rule (llama.cpp's too)

void forward_only(const char* op, std::initializer_list<const Tensor*> inputs) {
  if (needs_grad(inputs)) throw std::logic_error(std::string(op) + ": no gradient yet (inference only)");
}

void expect(bool ok, const char* op, const std::string& what) {
  if (!ok) throw ShapeError(std::string(op) + ": " + what);
}

}  // namespace

Tensor causal_conv1d(const Tensor& x, const Tensor& w, Tensor& state) {
  forward_only("causal_conv1d", {&x, &w});
  auto [T, C] = x.dims<2>("causal_conv1d: x");
  auto [Cw, K] = w.dims<2>("causal_conv1d: w");
  expect(Cw == C && w.dtype() == DType::F32, "causal_conv1d",
         "w " + to_string(w.shape()) + " for x " + to_string(x.shape()));
  expect(state.shape() == Shape{K - 1, C}, "causal_conv1d", "state " + to_string(state.shape()));
  Tensor y = Tensor::empty({T, C});
  kernels::causal_conv1d(x.data(), w.data(), state.data_mut(), y.data_mut(), T, C, K);
  return y;
}

Tensor l2_norm(const Tensor& x, float eps) {
  forward_only("l2_norm", {&x});
  const int64_t D = x.size(-1);
  Tensor y = Tensor::empty(x.shape());
  kernels::l2_norm(x.data(), eps, x.numel() / D, D, y.data_mut());
  return y;
}

Tensor delta_log_decay(const Tensor& alpha, const Tensor& dt_bias, const Tensor& a) {
  forward_only("delta_log_decay", {&alpha, &dt_bias, &a});
  const int64_t Hv = alpha.size(-1), R = alpha.numel() / Hv;
  expect(a.shape() == Shape{Hv} && dt_bias.shape() == Shape{Hv}, "delta_log_decay",
         "a " + to_string(a.shape()) + ", dt_bias " + to_string(dt_bias.shape()) + " for " + to_string(alpha.shape()));
  Tensor g = alpha.clone();
  kernels::add_to_rows(dt_bias.data(), R, Hv, g.data_mut());
  kernels::softplus(g.data(), g.data_mut(), g.numel());
  kernels::mul_rows(a.data(), R, Hv, g.data_mut());
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
