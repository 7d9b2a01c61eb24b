#pragma once
// kernels/vulkan/matvec.h — y = W·x on a Vulkan device (matvec.comp beside it): the decode
// product, the twin of kernels::matmul_wt with M = 1. Weights stay in their GGUF dtype as
// stored; deterministic (a fixed reduction order: the same bits every run). Only in a TOY_VULKAN build.
#include <cstdint>
#include <vector>

#include "toy/kernels/vulkan/context.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

// matvec.comp's pipelines on one context, one per weight dtype (F32, F16 so far).
class Matvec {
 public:
  explicit Matvec(Context& ctx);
  // y[N] = W[N, K] · x[K] on the device: w holds N rows of K values in dtype wt as a GGUF file
  // stores them; x the K values rounded to activation_dtype(wt) (kernels.h); y gets N floats.
  // Throws Error for a dtype without a shader or buffers too small for the shape.
  void operator()(const Buffer& w, DType wt, const Buffer& x, Buffer& y, int64_t N, int64_t K);

 private:
  Context& ctx_;
  Pipeline f32_, f16_;
};

// The same from host arrays: uploads W and x (rounded as matmul_wt rounds it), runs, reads y back.
std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t N, int64_t K);

}  // namespace toy::kernels::vulkan
