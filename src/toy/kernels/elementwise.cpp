// kernels/elementwise.cpp — elementwise arithmetic and the activations' other rules (the math:
// primitives/elementwise.cpp), split over threads in fixed chunks; each element is computed the
// same way whatever the chunking.
#include <cmath>

#include "toy/kernels/kernels.h"

namespace toy::kernels {
namespace {

// y[i] = f(i) for i < n, in chunks of 16K elements over the thread pool.
template <class F>
void each(int64_t n, F f) {
  parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f(i);
  });
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoef = 0.044715f;

// ggml's curve, before its fp16 rounding (gelu_tanh below).
float gelu_f32(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoef * x * x))); }

}  // namespace

void add(const float* a, const float* b, float* y, int64_t n) {
  each(n, [&](int64_t i) { y[i] = a[i] + b[i]; });
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  each(n, [&](int64_t i) { y[i] = a[i] * b[i]; });
}

void scale(const float* x, float s, float* y, int64_t n) {
  each(n, [&](int64_t i) { y[i] = s * x[i]; });
}

void silu_backward(const float* dy, const float* x, float* dx, int64_t n) {
  each(n, [&](int64_t i) {
    const float s = sigmoid(x[i]);
    dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  });
}

void gelu_tanh(const float* x, float* y, int64_t n) {
  each(n, [&](int64_t i) {
    const float v = x[i];
    y[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : fp16_to_f32(f32_to_fp16(gelu_f32(fp16_to_f32(f32_to_fp16(v)))));
  });
}

void softcap(const float* x, float cap, float* y, int64_t n) {
  each(n, [&](int64_t i) { y[i] = cap * std::tanh(x[i] / cap); });
}

void softcap_backward(const float* dy, const float* y, float cap, float* dx, int64_t n) {
  each(n, [&](int64_t i) { dx[i] = dy[i] * (1.0f - (y[i] / cap) * (y[i] / cap)); });
}

}  // namespace toy::kernels
