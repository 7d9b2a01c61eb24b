// kernels/kernels.h — the numeric work behind the primitives: products, thread pool.
//
// Model code never calls these directly; primitives do. Every kernel is deterministic and
// independent of the thread count: work is split by output rows, and each output element is
// reduced by one thread in a fixed order.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "toy/tensor/dtype.h"

namespace toy::kernels {

// y[M, N] = x[M, K] · W[N, K]ᵀ. W is row-major in any supported dtype (a GGUF weight: N rows
// of K values, K a multiple of the block size); x and y are f32.
// Like llama.cpp's CPU backend, the kernel first rounds x to activation_dtype(wt), then takes
// the dot products in integers (quantized weights) or in f32 (F16/BF16: with exact products).
// Row m of y depends only on row m of x: the same bits for any M, thread count or tiling.
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K);

// Several products of the same x in one parallel region: y_i[M, N_i] = x[M, K] · W_iᵀ, the same
// bits as one matmul_wt call each. A decode step of a small model is dominated by the start and
// the slowest chunk of each region, so products that read the same input share one.
struct Product {
  const void* w;  // W_i [N_i, K], row-major in dtype wt
  DType wt;
  float* y;  // y_i [M, N_i]
  int64_t N;
};
void matmul_wt_many(const float* x, std::span<const Product> products, int64_t M, int64_t K);

// The format x is rounded to before the dot products with weights of type wt (llama.cpp's
// vec_dot_type): F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_K/Q5_K/Q6_K -> Q8_K;
// F32 and the other types (dequantized to f32 on the fly) -> F32, i.e. no rounding.
DType activation_dtype(DType wt);

// C[M, N] = op(A) · op(B) (+ C when accumulate), all f32 row-major.
// op(A) is A[M, K] or, with trans_a, Aᵀ for A[K, M]; op(B) is B[K, N] or, with trans_b, Bᵀ for B[N, K].
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate);

// Thread pool. Default: hardware threads (or TOY_THREADS). set_num_threads waits for a running
// parallel_for; do not call it from inside one.
void set_num_threads(int n);
int num_threads();
// Calls fn(begin, end) on disjoint chunks covering [0, n); chunking depends only on n and grain.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

// y[i] = silu(x[i]) = x[i] / (1 + exp(−x[i])) for i < n (vectorised exp: within ~2 ulp).
void silu(const float* x, float* y, int64_t n);

// y[i] = the IEEE half x[i] as f32 (exact; F16C when the CPU has it).
void f16_to_f32(const uint16_t* x, float* y, int64_t n);

// Attention's decode loop: one query against n keys or values, rows of d values of type kv
// (F32 or F16) `stride` elements apart, read in place. Each result is summed in an order fixed
// by the kernel (attention_rows.cpp); s[j] does not depend on n or on the other rows.
// s[j] = scale · (q · k_j) for j < n.
void scores(const float* q, const void* k, DType kv, int64_t stride, int64_t n, int64_t d, float scale, float* s);
// The terms of a softmax over x[0, n), n ≥ 1, in place: max = max x, x[i] ← exp(x[i] − max);
// returns max and sum = Σ x[i]. Vectorized exp within 1 ulp: exp(0) = 1 and exp(−inf) = 0
// exactly, results below the smallest normal f32 are 0.
struct SoftmaxTerms {
  float max, sum;
};
SoftmaxTerms softmax_terms(float* x, int64_t n);
// Asks the caches for n such rows (into L2) ahead of their use: all their lines at once, where the
// kernels above would wait for them a few at a time.
void prefetch_rows(const void* x, DType kv, int64_t stride, int64_t n, int64_t d);
// o[e] = Σ_j p[j] · v_j[e] for e < d, summed in order of j.
void weighted_sum(const float* p, const void* v, DType kv, int64_t stride, int64_t n, int64_t d, float* o);

}  // namespace toy::kernels
