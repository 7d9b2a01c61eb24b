// tests/helpers.h — what many test files share: random inputs, the normalized error, the
// gradient check by central finite differences, and the skip where no Vulkan device is.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "toy/archs/model.h"
#include "toy/kernels/vulkan/devices.h"
#include "toy/primitives/primitives.h"
#include "toy/tensor/tensor.h"

// Skips the test where the Vulkan loader offers no device (or toy was built without Vulkan),
// with the loader's reason.
#define TOY_REQUIRE_VULKAN()                                  \
  if (::toy::kernels::vulkan::list_devices().devices.empty()) \
  GTEST_SKIP() << "no Vulkan device: " << ::toy::kernels::vulkan::list_devices().problem

namespace toy::test {

// A small shape for random_model: D 32, 2 layers, 4 heads over 2 KV heads, d_ff 64, 64 positions;
// for "dragon" attention every second layer over Gated DeltaNet layers of state size 8.
inline ModelShape tiny_shape(const std::string& arch, int64_t n_vocab) {
  auto u32 = [](int64_t v) { return gguf::Value::of_u32(uint32_t(v)); };
  ModelShape s{.arch = arch,
               .n_vocab = n_vocab,
               .d_model = 32,
               .n_layer = 2,
               .n_head = 4,
               .n_kv_head = 2,
               .d_ff = 64,
               .n_ctx = 64,
               .tied_output = true,
               .keys = {}};
  if (arch == "dragon") s.keys = {{"ssm.state_size", u32(8)}, {"full_attention_interval", u32(2)}};
  return s;
}

// n values drawn from N(0, sd²) by std::mt19937(seed).
inline std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A tensor of the given shape drawn from N(mean, sd²), element by element from rng.
template <class Rng>
Tensor randn(Shape shape, Rng& rng, float sd = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, sd);
  Tensor t = Tensor::empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_mut()[i] = dist(rng);
  return t;
}

// Σ (want − got)² / Σ want²: the normalized mean squared error of got against want.
inline double nmse(std::span<const float> want, std::span<const float> got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += double(want[i] - got[i]) * (want[i] - got[i]);
    den += double(want[i]) * want[i];
  }
  return num / den;
}

// --- gradient check ---------------------------------------------------------------------------
// For L(x) = Σ_i f(x)_i · R_i with a fixed projection R, the gradient recorded by backprop is
// compared, element by element of every differentiable input, with the central difference
// (L(x + h e) − L(x − h e)) / 2h evaluated under NoGrad, summed in double from the f32 outputs.
// An element passes when |analytic − numeric| ≤ atol + rtol·|numeric|. (test_autograd.cpp
// explains the default tolerances.)
struct GradTolerance {
  double h = 1e-2, atol = 1e-3, rtol = 1e-2;
};

using Forward = std::function<Tensor(std::span<const Tensor>)>;

struct GradCheck {
  Forward f = {};
  Forward numeric = {};  // the numeric side's forward when it is not f (e.g. a reference); empty: f
  GradTolerance tol = {};
  std::function<bool(size_t)> differentiable = {};  // which F32 inputs to check; empty: all of them
  std::string name = "op";                          // for GRAD_VERBOSE=1, which prints each worst error
};

// Checks every differentiable input of x (the F32 ones the check selects; they are made to require
// gradients); R is the projection, of the shape of f(x). Inputs that are not differentiable must
// get no gradient.
inline void check_gradients(const GradCheck& c, std::vector<Tensor>& x, const Tensor& R) {
  auto differentiable = [&](size_t i) {
    return x[i].dtype() == DType::F32 && (!c.differentiable || c.differentiable(i));
  };
  for (size_t i = 0; i < x.size(); ++i)
    if (differentiable(i)) x[i].requires_grad_();

  Tensor y = c.f(x);  // backprop, seeded with R through mul + sum
  ASSERT_TRUE(y.requires_grad()) << "the op recorded no backward rule";
  ASSERT_EQ(y.shape(), R.shape());
  sum(mul(y, R)).backward();

  NoGrad no_grad;
  const Forward& numeric = c.numeric ? c.numeric : c.f;
  auto projected = [&] {
    const Tensor out = numeric(x);
    double s = 0;
    for (int64_t i = 0; i < out.numel(); ++i) s += double(out.data()[i]) * R.data()[i];
    return s;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    if (!differentiable(i)) {
      EXPECT_FALSE(x[i].grad().defined()) << "input " << i << " got a gradient it should not";
      continue;
    }
    ASSERT_TRUE(x[i].grad().defined()) << "input " << i << " got no gradient";
    const Tensor g = x[i].grad();
    ASSERT_EQ(g.shape(), x[i].shape());
    double worst = 0, worst_a = 0, worst_n = 0;
    int64_t worst_e = -1;
    for (int64_t e = 0; e < x[i].numel(); ++e) {
      float* p = x[i].data_mut() + e;
      const float keep = *p;
      *p = keep + float(c.tol.h);
      const double up = projected();
      *p = keep - float(c.tol.h);
      const double down = projected();
      *p = keep;
      const double num = (up - down) / (2 * c.tol.h), analytic = g.data()[e];
      const double ratio = std::abs(analytic - num) / (c.tol.atol + c.tol.rtol * std::abs(num));
      if (ratio > worst) worst = ratio, worst_a = analytic, worst_n = num, worst_e = e;
    }
    if (std::getenv("GRAD_VERBOSE"))
      std::printf("  %s input %zu: worst error / bound = %.3g\n", c.name.c_str(), i, worst);
    EXPECT_LE(worst, 1.0) << "input " << i << " " << to_string(x[i].shape()) << ", element " << worst_e << ": analytic "
                          << worst_a << " vs numeric " << worst_n;
  }
}

}  // namespace toy::test
