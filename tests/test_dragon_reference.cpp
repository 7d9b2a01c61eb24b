// tests/test_dragon_reference.cpp — the Dragon primitives, forward and backward, against the float64
// reference PyTorch computes (scripts/reference/dragon_primitives.py, which states each formula;
// its output is scripts/reference/dragon_primitives.json). The inputs are formulas of the element
// index, built here the same way; each case's output y is projected on the same weights R and the
// gradients of Σ y·R that backprop records are compared with torch.autograd's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "fixtures.h"
#include "toy/primitives/attention_variants.h"
#include "toy/primitives/delta_rule.h"

using namespace toy;
using json = nlohmann::json;

namespace {

const json& reference() {
  static const json ref =
      json::parse(test::read_text(std::string(TOY_SOURCE_DIR) + "/scripts/reference/dragon_primitives.json"));
  return ref;
}

// The script's formula(): element i is f(i) rounded to float.
template <class F>
Tensor formula(Shape shape, F f) {
  Tensor t = Tensor::empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_mut()[i] = float(f(double(i)));
  return t;
}
template <class F>
Tensor leaf(Shape shape, F f) {
  Tensor t = formula(std::move(shape), f);
  t.requires_grad_();
  return t;
}

// Backward of Σ y·R with the script's R.
void backward(const Tensor& y) {
  sum(mul(y, formula(y.shape(), [](double i) { return std::cos(0.53 * i + 0.4); }))).backward();
}

// Float32 against float64: each element within tol of the reference, relative to the tensor's
// largest magnitude (the rounding of sums of products is relative to their terms, not to each result).
void expect_matches(const std::string& what, const Tensor& got, const json& want, double tol) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(size_t(got.numel()), want.size());
  double magnitude = 0;
  for (double w : want) magnitude = std::max(magnitude, std::abs(w));
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.data()[i], want[size_t(i)].get<double>(), tol * magnitude) << "element " << i;
}

// 32 float32 roundings (2⁻²³ each) of the largest element: these results take a few dozen
// operations each; the worst measured is about 5 (5·10⁻⁷, the differential attention's λ gradients).
constexpr double kTol = 4e-6;

}  // namespace

// The gated delta rule from a layer's raw projections (L2 norm of q and k, β = σ(b),
// g = ssm_a·softplus(α + dt_bias)) from a non-zero state, both head maps: outputs, final state and
// the gradients of q_raw, k_raw, v, α, b, dt_bias and ssm_a.
TEST(DragonReference, GatedDeltaRule) {
  const json& shape = reference()["gated_delta_rule"];
  const int64_t T = shape["T"], Hk = shape["Hk"], Hv = shape["Hv"], Dk = shape["Dk"], Dv = shape["Dv"];
  for (HeadMap map : {HeadMap::Tiled, HeadMap::Grouped}) {
    const std::string name = map == HeadMap::Tiled ? "gated_delta_rule_tiled" : "gated_delta_rule_grouped";
    SCOPED_TRACE(name);
    const json& want = reference()[name];
    Tensor q_raw = leaf({T, Hk, Dk}, [](double i) { return std::sin(0.37 * i + 0.1); });
    Tensor k_raw = leaf({T, Hk, Dk}, [](double i) { return std::cos(0.23 * i + 0.2); });
    Tensor v = leaf({T, Hv, Dv}, [](double i) { return 2.0 * std::sin(0.11 * i - 0.3); });
    Tensor alpha = leaf({T, Hv}, [](double i) { return std::sin(0.7 * i + 0.5); });
    Tensor b = leaf({T, Hv}, [](double i) { return 1.5 * std::cos(0.9 * i); });
    Tensor dt_bias = leaf({Hv}, [](double i) { return 0.2 * i - 0.3; });
    Tensor ssm_a = leaf({Hv}, [](double i) { return -std::exp(0.4 * i - 0.6); });
    Tensor state = formula({Hv, Dk, Dv}, [](double i) { return 0.5 * std::sin(0.29 * i + 1.0); });
    const Tensor o = gated_delta_rule(l2_norm(q_raw, 1e-6f), l2_norm(k_raw, 1e-6f), v,
                                      delta_log_decay(alpha, dt_bias, ssm_a), sigmoid(b), state, map);
    expect_matches("o", o, want["y"], kTol);
    expect_matches("final state", state, want["state"], kTol);
    backward(o);
    const json& grad = want["grad"];
    expect_matches("dq_raw", q_raw.grad(), grad["q_raw"], kTol);
    expect_matches("dk_raw", k_raw.grad(), grad["k_raw"], kTol);
    expect_matches("dv", v.grad(), grad["v"], kTol);
    expect_matches("dalpha", alpha.grad(), grad["alpha"], kTol);
    expect_matches("db", b.grad(), grad["b"], kTol);
    expect_matches("ddt_bias", dt_bias.grad(), grad["dt_bias"], kTol);
    expect_matches("dssm_a", ssm_a.grad(), grad["ssm_a"], kTol);
  }
}

// The short causal convolution continuing from a non-zero window: y and the gradients of x and w.
TEST(DragonReference, CausalConv1d) {
  const json& shape = reference()["conv"];
  const int64_t T = shape["T"], C = shape["C"], K = shape["K"];
  const json& want = reference()["causal_conv1d"];
  Tensor x = leaf({T, C}, [](double i) { return std::sin(0.41 * i + 0.3); });
  Tensor w = leaf({C, K}, [](double i) { return 0.5 * std::cos(0.8 * i); });
  Tensor state = formula({K - 1, C}, [](double i) { return std::cos(0.6 * i + 0.7); });
  const Tensor y = causal_conv1d(x, w, state);
  expect_matches("y", y, want["y"], kTol);
  backward(y);
  expect_matches("dx", x.grad(), want["grad"]["x"], kTol);
  expect_matches("dw", w.grad(), want["grad"]["w"], kTol);
}

namespace {

struct AttentionInputs {
  Tensor q, k, v;
};
AttentionInputs attention_inputs(const json& shape) {
  const int64_t T = shape["T"], H = shape["H"], Hkv = shape["Hkv"], Dh = shape["Dh"];
  return {.q = leaf({1, T, H, Dh}, [](double i) { return std::sin(0.37 * i + 0.1); }),
          .k = leaf({1, T, Hkv, Dh}, [](double i) { return std::cos(0.23 * i + 0.2); }),
          .v = leaf({1, T, Hkv, Dh}, [](double i) { return 2.0 * std::sin(0.11 * i - 0.3); })};
}

void expect_attention_gradients(const AttentionInputs& in, const json& grad) {
  expect_matches("dq", in.q.grad(), grad["q"], kTol);
  expect_matches("dk", in.k.grad(), grad["k"], kTol);
  expect_matches("dv", in.v.grad(), grad["v"], kTol);
}

}  // namespace

// Differential attention as the Dragon block applies it (4 tokens, 2 heads sharing one KV head,
// layer 2): λ_init and λ, the sub-normed output scaled by 1 − λ_init, and the gradients of q, k,
// v, the four λ vectors and the sub-norm's weight.
TEST(DragonReference, DifferentialAttention) {
  const json& shape = reference()["attention"];
  const json& want = reference()["differential_attention"];
  const int64_t Dh = shape["Dh"], d = Dh / 2;
  const AttentionInputs in = attention_inputs(shape);
  auto lambda_vector = [&](int j) { return leaf({d}, [j](double i) { return 0.3 * std::sin(1.7 * i + j); }); };
  const DiffLambda lam{.q1 = lambda_vector(0), .k1 = lambda_vector(1), .q2 = lambda_vector(2), .k2 = lambda_vector(3)};
  Tensor sub_norm_w = leaf({Dh}, [](double i) { return 1.0 + 0.1 * i; });
  const float lambda_init = diff_lambda_init(shape["layer"].get<int64_t>());
  EXPECT_NEAR(lambda_init, want["lambda_init"].get<double>(), 1e-7);
  EXPECT_NEAR(diff_lambda(lam, lambda_init), want["lambda"].get<double>(), 1e-6);

  const AttentionOptions opt{.scale = 1.0f / std::sqrt(float(d))};
  const Tensor o = differential_attention(
      in.q, [&](const Tensor& q) { return attention(q, in.k, in.v, opt); }, lam, lambda_init);
  const Tensor y = scale(rms_norm(o, sub_norm_w, 1e-6f), 1.0f - lambda_init);
  expect_matches("y", y, want["y"], kTol);
  backward(y);
  const json& grad = want["grad"];
  expect_attention_gradients(in, grad);
  expect_matches("dlq1", lam.q1.grad(), grad["lq1"], kTol);
  expect_matches("dlk1", lam.k1.grad(), grad["lk1"], kTol);
  expect_matches("dlq2", lam.q2.grad(), grad["lq2"], kTol);
  expect_matches("dlk2", lam.k2.grad(), grad["lk2"], kTol);
  expect_matches("dsub_norm_w", sub_norm_w.grad(), grad["sub_norm_w"], kTol);
}

// Scalable-Softmax attention (n = t + 1 keys, s per head): output and the gradients of q, k, v, s;
// and the number of keys a query attends, with and without a window.
TEST(DragonReference, ScalableSoftmax) {
  const json& shape = reference()["attention"];
  const json& want = reference()["scalable_softmax"];
  const int64_t T = shape["T"], H = shape["H"], Dh = shape["Dh"];
  const Tensor pos = Tensor::from_ids({1, 3}, std::vector<int32_t>{0, 1, 2});
  EXPECT_EQ(keys_attended(pos, 0).to_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(keys_attended(pos, 2).to_vector(), (std::vector<float>{1, 2, 2}));

  const AttentionInputs in = attention_inputs(shape);
  Tensor s = leaf({H}, [](double i) { return 0.7 + 0.6 * i; });
  std::vector<int32_t> positions(static_cast<size_t>(T));
  std::iota(positions.begin(), positions.end(), 0);
  const Tensor n_keys = keys_attended(Tensor::from_ids({1, T}, positions), 0);
  const Tensor y = attention(scalable_softmax(in.q, s, n_keys), in.k, in.v, {.scale = 1.0f / std::sqrt(float(Dh))});
  expect_matches("y", y, want["y"], kTol);
  backward(y);
  expect_attention_gradients(in, want["grad"]);
  expect_matches("ds", s.grad(), want["grad"]["s"], kTol);
}
