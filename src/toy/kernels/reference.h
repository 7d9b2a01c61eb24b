// kernels/reference.h — naive reference kernels: the definitions the fast kernels are tested
// against (STYLE item 9).
//
// Plain loops, no SIMD, no threads, no tiling; templated on the accumulation type T so they
// also run in double. They use only the reference dequantizer (tensor/quant.h) and spell out
// the activation rounding of kernels.h themselves, so a fast kernel that disagrees with them
// is wrong, not merely differently rounded.
#pragma once

#include <cstdint>

#include "toy/tensor/dtype.h"

namespace toy::kernels::reference {

// x[0..K) as matmul_wt sees it for weights of type wt: rounded to activation_dtype(wt).
void round_activations(DType wt, const float* x, float* out, int64_t K);

// y[M, N] = round_activations(x)[M, K] · dequantize(W)[N, K]ᵀ, summed in T in order of k.
template <class T>
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K);

// C[M, N] = op(A)·op(B) (+ C), summed in T in order of k; arguments as kernels::gemm.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate);

}  // namespace toy::kernels::reference
