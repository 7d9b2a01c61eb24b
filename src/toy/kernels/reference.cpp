// kernels/reference.cpp — naive reference kernels (PLACEHOLDER until the fast kernels land).
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/tensor/quant.h"

namespace toy::kernels {

void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K) {
  const int64_t rb = row_bytes(wt, K);
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize(wt, static_cast<const char*>(w) + n * rb, row.data(), K);
      for (int64_t m = 0; m < M; ++m) {
        const float* xm = x + m * K;
        float s = 0;
        for (int64_t k = 0; k < K; ++k) s += xm[k] * row[size_t(k)];
        y[m * N + n] = s;
      }
    }
  });
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool acc) {
  parallel_for(M, 4, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float s = 0;
        for (int64_t k = 0; k < K; ++k) s += (ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[n * K + k] : B[k * N + n]);
        C[m * N + n] = acc ? C[m * N + n] + s : s;
      }
  });
}

void set_num_threads(int) {}
int num_threads() { return 1; }
void parallel_for(int64_t n, int64_t, const std::function<void(int64_t, int64_t)>& fn) {
  if (n > 0) fn(0, n);
}

}  // namespace toy::kernels
