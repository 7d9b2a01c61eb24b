#pragma once
// kernels/vulkan/quantize.h — activations rounded as kernels::matmul_wt rounds them, on a Vulkan
// device (quantize.comp beside it): what Matvec reads as x. The CPU's bits. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/variants.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

class Quantize {
 public:
  explicit Quantize(Context& ctx);
  // Whether x must be rounded for weights of type wt (activation_dtype(wt) is not F32), and can be.
  static bool rounds(DType wt);
  // xq = the M rows of K f32 values of x from float x_off, rounded to activation_dtype(wt): Q8_0
  // or Q8_K blocks, or F16/BF16 values as floats; xq holds x_bytes(wt, K) bytes per row
  // (matvec.h). Throws Error for a wt whose activations are not rounded to one of those, K not a
  // multiple of the block (32, 256), or a view past its buffer.
  void operator()(DType wt, const Buffer& x, uint64_t x_off, Buffer& xq, int64_t M, int64_t K);

 private:
  Context& ctx_;
  Variants pipelines_;  // by activation dtype
};

}  // namespace toy::kernels::vulkan
