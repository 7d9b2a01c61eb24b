// primitives/loss.cpp — cross-entropy, the training loss, with its gradient.
//
// loss = (1/N) Σ_n [logsumexp(z_n) − z_n[y_n]];  d loss / d z_n = (softmax(z_n) − onehot(y_n)) / N
#include <cmath>

#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  auto [N, V] = logits.dims<2>("cross_entropy: logits");
  if (targets.shape() != Shape{N})
    throw ShapeError("cross_entropy: targets " + to_string(targets.shape()) + " for logits " +
                     to_string(logits.shape()));
  const float* z = logits.data();
  const int32_t* y = targets.ids();
  std::vector<double> row_loss(static_cast<size_t>(N));
  Tensor lse = Tensor::empty({N});  // logsumexp per row, for backward
  for (int64_t n = 0; n < N; ++n)
    if (y[n] < 0 || y[n] >= V)
      throw ShapeError("cross_entropy: target " + std::to_string(y[n]) + " outside [0, " + std::to_string(V) + ")");
  kernels::parallel_for(N, 4, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* zn = z + n * V;
      float mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, zn[v]);
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(double(zn[v] - mx));
      const double l = double(mx) + std::log(s);
      lse.data_mut()[n] = float(l);
      row_loss[size_t(n)] = l - zn[y[n]];
    }
  });
  double total = 0;  // summed in row order: independent of the thread count
  for (double l : row_loss) total += l;
  Tensor loss = Tensor::full({}, float(total / double(N)));
  if (needs_grad({&logits}))
    record(loss, "cross_entropy", {logits}, [logits, targets, lse, N, V](const Tensor& dl) {
      Tensor dz = Tensor::empty(logits.shape());
      const float g = dl.item() / float(N);
      const float* z = logits.data();
      float* pd = dz.data_mut();
      kernels::parallel_for(N, 4, [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          for (int64_t v = 0; v < V; ++v) pd[n * V + v] = g * std::exp(z[n * V + v] - lse.data()[n]);
          pd[n * V + targets.ids()[n]] -= g;
        }
      });
      return std::vector<Tensor>{dz};
    });
  return loss;
}

}  // namespace toy
