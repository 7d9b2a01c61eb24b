#pragma once
// kernels/vulkan/norm.h — RMSNorm, LayerNorm and the L2 norm over the last dimension on a Vulkan device
// (norm.comp beside it), the twins of kernels::rms_norm and kernels::layer_norm (kernels/norm.cpp).
// The sums are in f32 in a fixed order (the same bits every run), the CPU's in double: the results
// agree within the bounds of tests/test_vulkan_ops.cpp. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"

namespace toy::kernels::vulkan {

// norm.comp's three pipelines on one context.
class Norm {
 public:
  explicit Norm(Context& ctx);
  // y[r, d] = x[r, d] / √(mean_d x[r, d]² + eps) · w[d] for rows × D f32 x and y, D f32 weights;
  // views at offsets counted in floats. Throws Error for D < 1, rows < 0 or a view past its buffer.
  void rms(const Buffer& x, uint64_t x_off, const Buffer& w, uint64_t w_off, Buffer& y, uint64_t y_off, int64_t rows,
           int64_t D, float eps);
  // y[r, d] = (x[r, d] − μ_r) / √(σ²_r + eps) · w[d] + b[d], μ_r and σ²_r the mean and variance of
  // row r; b may be null: no bias (kernels::layer_norm with b = 0).
  void layer(const Buffer& x, uint64_t x_off, const Buffer& w, uint64_t w_off, const Buffer* b, uint64_t b_off,
             Buffer& y, uint64_t y_off, int64_t rows, int64_t D, float eps);
  // y[r, d] = x[r, d] / max(‖x[r, :]‖₂, eps) (a Gated DeltaNet's queries and keys).
  void l2(const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off, int64_t rows, int64_t D, float eps);

 private:
  Context& ctx_;
  Pipeline rms_, layer_, l2_;
};

}  // namespace toy::kernels::vulkan
