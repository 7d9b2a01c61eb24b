// kernels/norm.cpp — RMSNorm and LayerNorm over rows of D values, forward and backward (the
// math: primitives/norm.cpp). Rows are split over threads; every sum runs over one row in order,
// and the sums over rows (dw, db) add fixed blocks of rows in block order, so the results do not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"

namespace toy::kernels {

void rms_norm(const float* x, const float* w, float eps, int64_t R, int64_t D, float* y, float* rstd) {
  parallel_for(R, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * D;
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) ss += double(xr[d]) * xr[d];
      const float mean = float(ss / double(D));
      const float rs = 1.0f / std::sqrt(mean + eps);
      rstd[r] = rs;
      for (int64_t d = 0; d < D; ++d) y[r * D + d] = xr[d] * rs * w[d];
    }
  });
}

void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t R, int64_t D,
                       float* dx, float* dw) {
  // Rows in fixed blocks, one partial dw per block, added in block order.
  constexpr int64_t kRows = 64;
  const int64_t blocks = (R + kRows - 1) / kRows;
  std::vector<float> partial(size_t(blocks * D));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* dw_part = partial.data() + blk * D;
      for (int64_t r = blk * kRows; r < std::min(R, (blk + 1) * kRows); ++r) {
        const float* xr = x + r * D;
        const float* dr = dy + r * D;
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(dr[d]) * w[d] * xr[d] * rstd[r];
        const float m = float(dot / double(D));
        for (int64_t d = 0; d < D; ++d) {
          const float xh = xr[d] * rstd[r];
          dx[r * D + d] = rstd[r] * (dr[d] * w[d] - xh * m);
          dw_part[d] += dr[d] * xh;
        }
      }
    }
  });
  std::fill_n(dw, D, 0.0f);
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t d = 0; d < D; ++d) dw[d] += partial[size_t(blk * D + d)];
}

void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t R, int64_t D, float* y, float* xhat,
                float* rstd) {
  parallel_for(R, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * D;
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += xr[d];
      const float mean = float(s / double(D));
      double v = 0;
      for (int64_t d = 0; d < D; ++d) v += double(xr[d] - mean) * (xr[d] - mean);
      const float rs = 1.0f / std::sqrt(float(v / double(D)) + eps);
      rstd[r] = rs;
      for (int64_t d = 0; d < D; ++d) {
        xhat[r * D + d] = (xr[d] - mean) * rs;
        y[r * D + d] = xhat[r * D + d] * w[d] + b[d];
      }
    }
  });
}

void layer_norm_backward(const float* w, const float* xhat, const float* rstd, const float* dy, int64_t R, int64_t D,
                         float* dx, float* dw, float* db) {
  std::fill_n(dw, D, 0.0f);
  std::fill_n(db, D, 0.0f);
  for (int64_t r = 0; r < R; ++r) {  // one thread: dw and db sum the rows in order
    double mg = 0, mgx = 0;
    for (int64_t d = 0; d < D; ++d) {
      const float g = dy[r * D + d] * w[d];
      mg += g;
      mgx += double(g) * xhat[r * D + d];
    }
    mg /= double(D);
    mgx /= double(D);
    for (int64_t d = 0; d < D; ++d) {
      const float g = dy[r * D + d] * w[d];
      dx[r * D + d] = rstd[r] * (g - float(mg) - xhat[r * D + d] * float(mgx));
      dw[d] += dy[r * D + d] * xhat[r * D + d];
      db[d] += dy[r * D + d];
    }
  }
}

}  // namespace toy::kernels
