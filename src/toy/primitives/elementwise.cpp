// primitives/elementwise.cpp — add, mul, scale, activations and soft-capping, with gradients.
#include <cmath>

#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

void same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ShapeError(std::string(op) + ": shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) + " differ");
}

// out[i] = f(x[i]) elementwise, split over threads in fixed chunks.
template <class F>
Tensor map(const Tensor& x, F f) {
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.data();
  float* py = y.data_mut();
  kernels::parallel_for(x.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) py[i] = f(px[i]);
  });
  return y;
}

template <class F>
Tensor zip(const Tensor& a, const Tensor& b, F f) {
  Tensor y = Tensor::empty(a.shape());
  const float *pa = a.data(), *pb = b.data();
  float* py = y.data_mut();
  kernels::parallel_for(a.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) py[i] = f(pa[i], pb[i]);
  });
  return y;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoef = 0.044715f;

float gelu_f32(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoef * x * x))); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  same_shape("add", a, b);
  Tensor y = zip(a, b, [](float p, float q) { return p + q; });
  if (needs_grad({&a, &b})) record(y, "add", {a, b}, [](const Tensor& d) { return std::vector<Tensor>{d, d}; });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  same_shape("mul", a, b);
  Tensor y = zip(a, b, [](float p, float q) { return p * q; });
  if (needs_grad({&a, &b}))
    record(y, "mul", {a, b}, [a, b](const Tensor& d) {  // d(ab) = b·da + a·db
      return std::vector<Tensor>{mul(d, b), mul(d, a)};
    });
  return y;
}

Tensor scale(const Tensor& x, float s) {
  Tensor y = map(x, [s](float v) { return s * v; });
  if (needs_grad({&x})) record(y, "scale", {x}, [s](const Tensor& d) { return std::vector<Tensor>{scale(d, s)}; });
  return y;
}

Tensor silu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  kernels::parallel_for(x.numel(), 1 << 14,
                        [&](int64_t i0, int64_t i1) { kernels::silu(x.data() + i0, y.data_mut() + i0, i1 - i0); });
  if (needs_grad({&x}))
    record(y, "silu", {x}, [x](const Tensor& d) {  // silu'(v) = σ(v)(1 + v(1 − σ(v)))
      return std::vector<Tensor>{zip(d, x, [](float g, float v) {
        const float s = sigmoid(v);
        return g * s * (1.0f + v * (1.0f - s));
      })};
    });
  return y;
}

// ggml evaluates GELU through an fp16 table: the input rounded to fp16, the output rounded to
// fp16, saturating outside (−10, 10). Matching it keeps F32 logits at 1e-9 of llama.cpp's
// instead of 1e-7 (fixtures/models/CONVENTIONS.md §7). The gradient is that of the exact curve.
Tensor gelu_tanh(const Tensor& x) {
  Tensor y = map(x, [](float v) {
    if (v <= -10.0f) return 0.0f;
    if (v >= 10.0f) return v;
    return fp16_to_f32(f32_to_fp16(gelu_f32(fp16_to_f32(f32_to_fp16(v)))));
  });
  if (needs_grad({&x}))
    record(y, "gelu_tanh", {x}, [x](const Tensor& d) {
      return std::vector<Tensor>{zip(d, x, [](float g, float v) {
        const float u = kSqrt2OverPi * (v + kGeluCoef * v * v * v);
        const float t = std::tanh(u);
        const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * v * v);
        return g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
      })};
    });
  return y;
}

Tensor softcap(const Tensor& x, float cap) {
  Tensor y = map(x, [cap](float v) { return cap * std::tanh(v / cap); });
  if (needs_grad({&x}))
    // y.detach(): the rule needs y's values, and holding y itself (which owns this node) would
    // be a reference cycle that leaks the whole recorded graph.
    record(y, "softcap", {x}, [y = y.detach(), cap](const Tensor& d) {  // d/dv cap·tanh(v/cap) = 1 − (y/cap)²
      return std::vector<Tensor>{zip(d, y, [cap](float g, float yv) { return g * (1.0f - (yv / cap) * (yv / cap)); })};
    });
  return y;
}

Tensor sum(const Tensor& x) {
  double s = 0;
  for (float v : std::span(x.data(), size_t(x.numel()))) s += v;
  Tensor y = Tensor::full({}, float(s));
  if (needs_grad({&x}))
    record(y, "sum", {x},
           [shape = x.shape()](const Tensor& d) { return std::vector<Tensor>{Tensor::full(shape, d.item())}; });
  return y;
}

}  // namespace toy
