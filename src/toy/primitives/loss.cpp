// primitives/loss.cpp — cross-entropy, the training loss, with its gradient (the loops:
// kernels::cross_entropy and cross_entropy_backward, kernels/softmax.cpp).
//
// loss = (1/C) Σ_{n counted} [logsumexp(z_n) − z_n[y_n]];  d loss / d z_n = (softmax(z_n) − onehot(y_n)) / C
// over the C counted rows (y_n ≠ kIgnoreTarget: fine-tuning counts only the completion's tokens),
// and 0 on the others.
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  auto [N, V] = logits.dims<2>("cross_entropy: logits");
  if (targets.shape() != Shape{N})
    throw ShapeError("cross_entropy: targets " + to_string(targets.shape()) + " for logits " +
                     to_string(logits.shape()));
  const int32_t* y = targets.ids();
  int64_t counted = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (y[n] == kIgnoreTarget) continue;
    ++counted;
    if (y[n] < 0 || y[n] >= V)
      throw ShapeError("cross_entropy: target " + std::to_string(y[n]) + " outside [0, " + std::to_string(V) + ")");
  }
  Tensor lse = Tensor::empty({N});  // logsumexp per row, for backward
  Tensor loss = Tensor::full({}, float(kernels::cross_entropy(logits.data(), y, N, V, lse.data_mut())));
  if (needs_grad({&logits}))
    record(loss, "cross_entropy", {logits}, [logits, targets, lse, N = N, V = V, counted](const Tensor& dl) {
      Tensor dz = Tensor::empty(logits.shape());
      kernels::cross_entropy_backward(logits.data(), targets.ids(), lse.data(),
                                      counted ? dl.item() / float(counted) : 0.0f, N, V, dz.data_mut());
      return std::vector<Tensor>{dz};
    });
  return loss;
}

}  // namespace toy
