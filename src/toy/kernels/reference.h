// kernels/reference.h — naive reference kernels: the definitions the fast kernels are tested
// against (STYLE item 9).
//
// Plain loops, no SIMD, no threads, no tiling; templated on the accumulation type T so they
// also run in double. They use only the reference dequantizer (tensor/quant.h) and spell out
// the activation rounding of kernels.h themselves, so a fast kernel that disagrees with them
// is wrong, not merely differently rounded.
#pragma once

#include <cstdint>

#include "toy/kernels/kernels.h"
#include "toy/tensor/dtype.h"
#include "toy/tensor/quant.h"

namespace toy::kernels::reference {

// x[0..K) as matmul_wt sees it for weights of type wt: rounded to activation_dtype(wt).
void round_activations(DType wt, const float* x, float* out, int64_t K);
// x[0..K) as Q8_0 activations, K/32 blocks: d = amax/127 kept as half, q = round-half-even(x·127/amax)
// (llama.cpp's quantize_row_q8_0 for activations; not quantize(Q8_0), ggml's weight quantizer).
void quantize_activations_q8_0(const float* x, BlockQ8_0* out, int64_t K);

// y[M, N] = round_activations(x)[M, K] · dequantize(W)[N, K]ᵀ, summed in T in order of k.
template <class T>
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K);

// C[M, N] = op(A)·op(B) (+ C), summed in T in order of k; arguments as kernels::gemm.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate);

// Attention as kernels.h defines it (f32 keys and values), one query row at a time: the scores,
// the softmax and o = Σ_j P_j v_j in T. P [B, H, T, S] gets the probabilities, 0 where masked.
template <class T>
void attention(const AttentionGeometry& g, const float* q, const float* k, const float* v, float* o, float* P);
// Its gradients from the formulas (primitives/attention.cpp), in T, from the reference P.
template <class T>
void attention_backward(const AttentionGeometry& g, const float* q, const float* k, const float* v, const float* P,
                        const float* dout, float* dq, float* dk, float* dv);

// RMSNorm and LayerNorm of R rows of D values and their gradients, in T (arguments as kernels.h).
template <class T>
void rms_norm(const float* x, const float* w, float eps, int64_t R, int64_t D, float* y);
template <class T>
void rms_norm_backward(const float* x, const float* w, float eps, const float* dy, int64_t R, int64_t D, float* dx,
                       float* dw);
template <class T>
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t R, int64_t D, float* y);
template <class T>
void layer_norm_backward(const float* x, const float* w, float eps, const float* dy, int64_t R, int64_t D, float* dx,
                         float* dw, float* db);

// The gated delta rule token by token, exactly as kernels.h states it, in T (state included).
template <class T>
void gated_delta_rule(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v, const float* gate,
                      const float* beta, float* S, float* o);

}  // namespace toy::kernels::reference
