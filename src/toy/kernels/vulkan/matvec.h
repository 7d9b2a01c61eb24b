#pragma once
// kernels/vulkan/matvec.h — y = W·x on a Vulkan device (matvec.comp beside it): the decode
// product, the twin of kernels::matmul_wt with M = 1. Weights stay in their GGUF dtype as
// stored; deterministic (a fixed reduction order: the same bits every run). Only in a TOY_VULKAN build.
#include <cstdint>
#include <vector>

#include "toy/kernels/vulkan/context.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

// matvec.comp's pipelines on one context, one per weight dtype (F32, F16, Q8_0 so far).
class Matvec {
 public:
  explicit Matvec(Context& ctx);
  // y[N] = W[N, K] · x[K] on the device: w holds N rows of K values in dtype wt as a GGUF file
  // stores them; x the K values rounded to activation_dtype(wt) (kernels.h): f32 values for F32
  // and F16 weights, K/32 Q8_0 blocks for Q8_0 (x_bytes(wt, K) bytes); y gets N floats.
  // Throws Error for a dtype without a shader or buffers too small for the shape.
  void operator()(const Buffer& w, DType wt, const Buffer& x, Buffer& y, int64_t N, int64_t K);

 private:
  Context& ctx_;
  Pipeline f32_, f16_, q8_0_;
};

// The bytes x takes for weights of type wt: K floats, or K/32 Q8_0 blocks for Q8_0 weights.
uint64_t x_bytes(DType wt, int64_t K);

// The same from host arrays: uploads W and x (rounded as matmul_wt rounds it), runs, reads y back.
std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t N, int64_t K);

}  // namespace toy::kernels::vulkan
