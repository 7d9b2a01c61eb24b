#pragma once
// kernels/vulkan/matvec.h — y = x·Wᵀ (+ b) on a Vulkan device (matvec.comp beside it): the twin of
// kernels::matmul_wt: for a prompt or a batch, tiles of 8 rows of x a workgroup (each weight read
// once for the 8), the rows left over one a workgroup, as in decode. Weights stay in their GGUF dtype
// as stored; deterministic (a fixed reduction order: the same bits every run, and row m of y depends
// only on row m of x). Only in a TOY_VULKAN build.
#include <cstdint>
#include <vector>

#include "toy/kernels/vulkan/context.h"
#include "toy/kernels/vulkan/variants.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

// matvec.comp's pipelines on one context, a row of x and a tile of 8 a workgroup, for each weight
// dtype: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K.
class Matvec {
 public:
  explicit Matvec(Context& ctx);
  // y[m, n] = W[n, :] · x[m, :] (+ b[n]) for m < M, n < N: w holds N rows of K values in dtype wt
  // from byte w_off (an expert's slab of a stacked tensor) as a GGUF file stores them; x holds M rows rounded to activation_dtype(wt) (kernels.h) from
  // byte x_off, each x_bytes(wt, K) bytes (quantize.h makes them); y gets M·N floats from float
  // y_off; b, when given, N floats. Throws Error for a dtype without a shader, a shape out of range
  // or buffers too small for it.
  void operator()(const Buffer& w, uint64_t w_off, DType wt, const Buffer& x, uint64_t x_off, Buffer& y, uint64_t y_off,
                  int64_t M, int64_t N, int64_t K, const Buffer* b = nullptr);

 private:
  Context& ctx_;
  Variants rows_;   // a row of x a workgroup
  Variants tiles_;  // 8 rows of x a workgroup
};

// Whether matvec.comp reads weights of type wt.
bool has_matvec(DType wt);
// The bytes a row of x takes for weights of type wt: K floats, K/32 Q8_0 blocks (Q8_0, Q4_0, Q5_0)
// or K/256 Q8_K blocks (the K-quants).
uint64_t x_bytes(DType wt, int64_t K);

// The same from host arrays: uploads W, x [M, K] (rounded as matmul_wt rounds it) and b [N] where
// given, runs, reads y [M, N] back.
std::vector<float> matvec(Context& ctx, const void* w, DType wt, const float* x, int64_t M, int64_t N, int64_t K,
                          const float* b = nullptr);

}  // namespace toy::kernels::vulkan
