// primitives/norm.cpp — RMSNorm and LayerNorm over the last dimension, with gradients. The
// loops are kernels::rms_norm, kernels::layer_norm and their backward kernels (kernels/norm.cpp).
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/primitives.h"

namespace toy {

// Forward: r = 1/sqrt(mean(x²) + eps) per row (sum of squares in double, as ggml), y = x·r·w.
// Backward, with x̂ = x·r and g = dy·w:  dx = r·(g − x̂·mean(g·x̂)),  dw = Σ_rows dy·x̂.
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps) {
  const int64_t D = x.size(-1);
  if (w.shape() != Shape{D})
    throw ShapeError("rms_norm: weight " + to_string(w.shape()) + " for x " + to_string(x.shape()));
  if (DeviceOps* d = device_ops(x)) return d->rms_norm(x, w, eps);
  const int64_t R = x.numel() / D;
  Tensor y = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty({R});
  kernels::rms_norm(x.data(), w.data(), eps, R, D, y.data_mut(), rstd.data_mut());
  if (needs_grad({&x, &w}))
    record(y, "rms_norm", {x, w}, [x, w, rstd, R, D](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape()), dw = Tensor::empty(w.shape());
      kernels::rms_norm_backward(x.data(), w.data(), rstd.data(), dy.data(), R, D, dx.data_mut(), dw.data_mut());
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
  if (DeviceOps* d = device_ops(x)) return d->layer_norm(x, w, b, eps);
  const int64_t R = x.numel() / D;
  Tensor y = Tensor::empty(x.shape()), xhat = Tensor::empty(x.shape()), rstd = Tensor::empty({R});
  kernels::layer_norm(x.data(), w.data(), b.data(), eps, R, D, y.data_mut(), xhat.data_mut(), rstd.data_mut());
  if (needs_grad({&x, &w, &b}))
    record(y, "layer_norm", {x, w, b}, [x, w, b, xhat, rstd, R, D](const Tensor& dy) {
      Tensor dx = Tensor::empty(x.shape()), dw = Tensor::empty(w.shape()), db = Tensor::empty(b.shape());
      kernels::layer_norm_backward(w.data(), xhat.data(), rstd.data(), dy.data(), R, D, dx.data_mut(), dw.data_mut(),
                                   db.data_mut());
      return std::vector<Tensor>{dx, dw, db};
    });
  return y;
}

}  // namespace toy
