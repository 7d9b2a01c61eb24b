// kernels/reference.cpp — naive reference kernels (see reference.h).
#include "toy/kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/tensor/quant.h"

namespace toy::kernels::reference {

void round_activations(DType wt, const float* x, float* out, int64_t K) {
  switch (activation_dtype(wt)) {
    case DType::F16:
      for (int64_t k = 0; k < K; ++k) out[k] = fp16_to_f32(f32_to_fp16(x[k]));
      return;
    case DType::BF16:
      for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(f32_to_bf16(x[k]));
      return;
    case DType::Q8_0:  // per block of 32: d = amax/127 kept as half, q = round-half-even(x·127/amax)
      for (int64_t b = 0; b < K; b += 32) {
        float amax = 0;
        for (int64_t k = b; k < b + 32; ++k) amax = std::max(amax, std::fabs(x[k]));
        const float d = fp16_to_f32(f32_to_fp16(amax / 127)), id = amax != 0 ? 127 / amax : 0;
        for (int64_t k = b; k < b + 32; ++k) out[k] = std::nearbyint(x[k] * id) * d;
      }
      return;
    case DType::Q8_K: {  // ggml's Q8_K quantizer is the reference one
      std::vector<uint8_t> q(size_t(row_bytes(DType::Q8_K, K)));
      quantize(DType::Q8_K, x, q.data(), K);
      dequantize(DType::Q8_K, q.data(), out, K);
      return;
    }
    default:
      std::copy(x, x + K, out);
  }
}

template <class T>
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K) {
  std::vector<float> xr(static_cast<size_t>(M * K)), wn(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) round_activations(wt, x + m * K, xr.data() + m * K, K);
  for (int64_t n = 0; n < N; ++n) {
    dequantize(wt, static_cast<const uint8_t*>(w) + n * row_bytes(wt, K), wn.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k) s += T(xr[size_t(m * K + k)]) * T(wn[size_t(k)]);
      y[m * N + n] = float(s);
    }
  }
}

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool acc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      T s = acc ? T(C[m * N + n]) : T(0);
      for (int64_t k = 0; k < K; ++k) s += T(ta ? A[k * M + m] : A[m * K + k]) * T(tb ? B[n * K + k] : B[k * N + n]);
      C[m * N + n] = float(s);
    }
}

template void matmul_wt<float>(const float*, const void*, DType, float*, int64_t, int64_t, int64_t);
template void matmul_wt<double>(const float*, const void*, DType, float*, int64_t, int64_t, int64_t);
template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);

}  // namespace toy::kernels::reference
