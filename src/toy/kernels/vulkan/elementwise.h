#pragma once
// kernels/vulkan/elementwise.h — elementwise arithmetic and activations on a Vulkan device
// (elementwise.comp beside it), the twins of kernels::add, mul, scale, silu, gelu_tanh, softcap and
// sigmoid (kernels/elementwise.cpp, kernels/activations.cpp). add, mul, scale and gelu_tanh give the
// CPU's bits; silu, sigmoid and softcap go through the device's exp, within the bounds of
// tests/test_vulkan_ops.cpp. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

// elementwise.comp's two pipelines on one context, and gelu_tanh's table of halves.
class Elementwise {
 public:
  // Uploads gelu_tanh's table: kernels::gelu_tanh of each of the 65536 halves.
  explicit Elementwise(Context& ctx);

  enum class Binary { Add, Mul };
  enum class Unary { Scale, Silu, GeluTanh, Softcap, Sigmoid };

  // y[i] = a[i] ∘ b[i] for i < n: f32 views at offsets counted in floats (add, mul have one shape:
  // primitives/elementwise.cpp). Throws Error for n < 0 or a view past its buffer.
  void binary(Binary op, const Buffer& a, uint64_t a_off, const Buffer& b, uint64_t b_off, Buffer& y, uint64_t y_off,
              int64_t n);
  // y[i] = f(x[i]) for i < n; param is Scale's factor and Softcap's cap (unused by the others).
  void unary(Unary op, float param, const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, int64_t n);

 private:
  Context& ctx_;
  Pipeline binary_, unary_;
  Buffer gelu_table_;  // [65536] halves, indexed by the half of x
};

}  // namespace toy::kernels::vulkan
