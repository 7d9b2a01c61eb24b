// kernels/kernels.h — the numeric work behind the primitives: products, thread pool.
//
// Model code never calls these directly; primitives do. Every kernel is deterministic and
// independent of the thread count: work is split by output rows, and each output element is
// reduced by one thread in a fixed order.
#pragma once

#include <cstdint>
#include <functional>

#include "toy/tensor/dtype.h"

namespace toy::kernels {

// y[M, N] = x[M, K] · W[N, K]ᵀ. W is row-major in any supported dtype (a GGUF weight: N rows
// of K values, K a multiple of the block size); x and y are f32.
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K);

// C[M, N] = op(A) · op(B) (+ C when accumulate), all f32 row-major.
// op(A) is A[M, K] or, with trans_a, Aᵀ for A[K, M]; op(B) is B[K, N] or, with trans_b, Bᵀ for B[N, K].
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate);

// Thread pool. Default: hardware threads (or TOY_THREADS).
void set_num_threads(int n);
int num_threads();
// Calls fn(begin, end) on disjoint chunks covering [0, n); chunking depends only on n and grain.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace toy::kernels
