// kernels/softmax.cpp — softmax over rows and the cross-entropy loss, forward and backward (the
// math: primitives/routing.cpp and loss.cpp). Rows are split over threads and each row is summed
// in order by one thread; the loss adds the rows' losses in row order: the same bits for any
// thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"

namespace toy::kernels {

void softmax(const float* x, int64_t R, int64_t C, float* y) {
  parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      float* yr = y + r * C;
      const float mx = *std::max_element(xr, xr + C);
      double z = 0;
      for (int64_t c = 0; c < C; ++c) z += yr[c] = std::exp(xr[c] - mx);
      const float inv = float(1.0 / z);
      for (int64_t c = 0; c < C; ++c) yr[c] *= inv;
    }
  });
}

void softmax_backward(const float* y, const float* dy, int64_t R, int64_t C, float* dx) {
  for (int64_t r = 0; r < R; ++r) {
    const float *yr = y + r * C, *dr = dy + r * C;
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += double(dr[c]) * yr[c];
    for (int64_t c = 0; c < C; ++c) dx[r * C + c] = yr[c] * (dr[c] - float(dot));
  }
}

double cross_entropy(const float* z, const int32_t* y, int64_t N, int64_t V, float* lse) {
  std::vector<double> row_loss(static_cast<size_t>(N));
  parallel_for(N, 4, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      if (y[n] < 0) continue;  // an ignored target: no loss, no gradient
      const float* zn = z + n * V;
      float mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, zn[v]);
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(zn[v] - mx));
      const double l = double(mx) + std::log(s);
      lse[n] = float(l);
      row_loss[size_t(n)] = l - zn[y[n]];
    }
  });
  double total = 0;  // summed in row order
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n)
    if (y[n] >= 0) total += row_loss[size_t(n)], ++counted;
  return counted ? total / double(counted) : 0.0;
}

void cross_entropy_backward(const float* z, const int32_t* y, const float* lse, float g, int64_t N, int64_t V,
                            float* dz) {
  parallel_for(N, 4, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      if (y[n] < 0) {
        std::fill(dz + n * V, dz + (n + 1) * V, 0.0f);
        continue;
      }
      for (int64_t v = 0; v < V; ++v) dz[n * V + v] = g * std::exp(z[n * V + v] - lse[n]);
      dz[n * V + y[n]] -= g;
    }
  });
}

}  // namespace toy::kernels
