// kernels/rows.cpp — moving and combining rows of [M, D] matrices: the loops of the indexing
// primitives, of the bias and of the embedding (the math: primitives/indexing.cpp, linear.cpp).
// One thread, rows in order: sums into a repeated row always add in the same order.
#include <cstring>

#include "toy/kernels/kernels.h"
#include "toy/tensor/quant.h"

namespace toy::kernels {

void gather_rows(const float* x, const int32_t* rows, int64_t M, int64_t D, float* y) {
  for (int64_t m = 0; m < M; ++m) std::memcpy(y + m * D, x + rows[m] * D, size_t(D) * sizeof(float));
}

void gather_rows_wt(const void* x, DType xt, const int32_t* rows, int64_t M, int64_t D, float* y) {
  const int64_t rb = row_bytes(xt, D);
  for (int64_t m = 0; m < M; ++m) dequantize(xt, static_cast<const char*>(x) + rows[m] * rb, y + m * D, D);
}

void scatter_add_rows(const int32_t* rows, const float* src, int64_t M, int64_t D, float* y) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t d = 0; d < D; ++d) y[rows[m] * D + d] += src[m * D + d];
}

void scale_rows(const float* x, const float* s, int64_t M, int64_t D, float* y) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t d = 0; d < D; ++d) y[m * D + d] = s[m] * x[m * D + d];
}

void row_dots(const float* a, const float* b, int64_t M, int64_t D, float* out) {
  for (int64_t m = 0; m < M; ++m) {
    double acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += double(a[m * D + d]) * b[m * D + d];
    out[m] = float(acc);
  }
}

void add_to_rows(const float* b, int64_t M, int64_t D, float* y) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t d = 0; d < D; ++d) y[m * D + d] += b[d];
}

void mul_rows(const float* s, int64_t M, int64_t D, float* y) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t d = 0; d < D; ++d) y[m * D + d] *= s[d];
}

void sum_rows(const float* x, int64_t M, int64_t D, float* out) {
  std::memset(out, 0, size_t(D) * sizeof(float));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t d = 0; d < D; ++d) out[d] += x[m * D + d];
}

void copy_columns(const float* x, int64_t x_cols, int64_t x_begin, float* y, int64_t y_cols, int64_t y_begin, int64_t R,
                  int64_t n) {
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(y + r * y_cols + y_begin, x + r * x_cols + x_begin, size_t(n) * sizeof(float));
}

}  // namespace toy::kernels
