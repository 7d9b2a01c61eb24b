// primitives/norm.cpp — RMSNorm and LayerNorm over the last dimension, with gradients.
#include <algorithm>
#include <cmath>
#include <vector>

#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

// Forward: r = 1/sqrt(mean(x²) + eps) per row (sum of squares in double, as ggml), y = x·r·w.
// Backward, with x̂ = x·r and g = dy·w:  dx = r·(g − x̂·mean(g·x̂)),  dw = Σ_rows dy·x̂.
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) {
  const int64_t D = x.size(-1);
  if (w.shape() != Shape{D})
    throw ShapeError("rms_norm: weight " + to_string(w.shape()) + " for x " + to_string(x.shape()));
  const int64_t R = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty({R});
  const float *px = x.data(), *pw = w.data();
  float *py = y.data_mut(), *pr = rstd.data_mut();
  kernels::parallel_for(R, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * D;
      double ss = 0;
      for (int64_t d = 0; d < D; ++d) ss += double(xr[d]) * xr[d];
      const float mean = float(ss / double(D));
      const float rs = 1.0f / std::sqrt(mean + eps);
      pr[r] = rs;
      for (int64_t d = 0; d < D; ++d) py[r * D + d] = xr[d] * rs * pw[d];
    }
  });
  if (needs_grad({&x, &w}))
    record(y, "rms_norm", {x, w}, [x, w, rstd, R, D](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape()), dw = Tensor::zeros(w.shape());
      const float *px = x.data(), *pw = w.data(), *pd = dy.data(), *pr = rstd.data();
      float *pdx = dx.data_mut(), *pdw = dw.data_mut();
      // Rows in fixed blocks, one partial dw per block, added in block order: the same bits
      // for any thread count.
      constexpr int64_t kRows = 64;
      const int64_t blocks = (R + kRows - 1) / kRows;
      std::vector<float> partial(size_t(blocks * D));
      kernels::parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; ++blk) {
          float* pw_part = partial.data() + blk * D;
          for (int64_t r = blk * kRows; r < std::min(R, (blk + 1) * kRows); ++r) {
            const float* xr = px + r * D;
            const float* dr = pd + r * D;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += double(dr[d]) * pw[d] * xr[d] * pr[r];
            const float m = float(dot / double(D));
            for (int64_t d = 0; d < D; ++d) {
              const float xh = xr[d] * pr[r];
              pdx[r * D + d] = pr[r] * (dr[d] * pw[d] - xh * m);
              pw_part[d] += dr[d] * xh;
            }
          }
        }
      });
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t d = 0; d < D; ++d) pdw[d] += partial[size_t(blk * D + d)];
      return std::vector<Tensor>{dx, dw};
    });
  return y;
}

// Forward: μ, σ² per row, r = 1/sqrt(σ² + eps), x̂ = (x − μ)·r, y = x̂·w + b.
// Backward, g = dy·w:  dx = r·(g − mean(g) − x̂·mean(g·x̂)),  dw = Σ dy·x̂,  db = Σ dy.
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  const int64_t D = x.size(-1);
  if (w.shape() != Shape{D} || b.shape() != Shape{D})
    throw ShapeError("layer_norm: weight " + to_string(w.shape()) + " / bias " + to_string(b.shape()) + " for x " +
                     to_string(x.shape()));
  const int64_t R = x.numel() / D;
  Tensor y = Tensor::empty(x.shape()), xhat = Tensor::empty(x.shape()), rstd = Tensor::empty({R});
  const float *px = x.data(), *pw = w.data(), *pb = b.data();
  float *py = y.data_mut(), *ph = xhat.data_mut(), *pr = rstd.data_mut();
  kernels::parallel_for(R, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * D;
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += xr[d];
      const float mean = float(s / double(D));
      double v = 0;
      for (int64_t d = 0; d < D; ++d) v += double(xr[d] - mean) * (xr[d] - mean);
      const float rs = 1.0f / std::sqrt(float(v / double(D)) + eps);
      pr[r] = rs;
      for (int64_t d = 0; d < D; ++d) {
        ph[r * D + d] = (xr[d] - mean) * rs;
        py[r * D + d] = ph[r * D + d] * pw[d] + pb[d];
      }
    }
  });
  if (needs_grad({&x, &w, &b}))
    record(y, "layer_norm", {x, w, b}, [x, w, b, xhat, rstd, R, D](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape()), dw = Tensor::zeros(w.shape()), db = Tensor::zeros(b.shape());
      const float *pw = w.data(), *pd = dy.data(), *ph = xhat.data(), *pr = rstd.data();
      float *pdx = dx.data_mut(), *pdw = dw.data_mut(), *pdb = db.data_mut();
      for (int64_t r = 0; r < R; ++r) {
        double mg = 0, mgx = 0;
        for (int64_t d = 0; d < D; ++d) {
          const float g = pd[r * D + d] * pw[d];
          mg += g;
          mgx += double(g) * ph[r * D + d];
        }
        mg /= double(D);
        mgx /= double(D);
        for (int64_t d = 0; d < D; ++d) {
          const float g = pd[r * D + d] * pw[d];
          pdx[r * D + d] = pr[r] * (g - float(mg) - ph[r * D + d] * float(mgx));
          pdw[d] += pd[r * D + d] * ph[r * D + d];
          pdb[d] += pd[r * D + d];
        }
      }
      return std::vector<Tensor>{dx, dw, db};
    });
  return y;
}

}  // namespace toy
