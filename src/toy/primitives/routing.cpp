// primitives/routing.cpp — softmax, top-k and mixture-of-experts routing.
#include "toy/primitives/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/indexing.h"

namespace toy {

namespace {
constexpr float kRenormFloor = 6.103515625e-5f;  // ggml clamps the sum of the top k to 2⁻¹⁴
}  // namespace

Tensor softmax(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) == 0) throw ShapeError("softmax: x " + to_string(x.shape()));
  const int64_t C = x.size(-1), R = x.numel() / C;
  Tensor y = Tensor::empty(x.shape());
  kernels::softmax(x.data(), R, C, y.data_mut());
  if (needs_grad({&x}))
    // The rule keeps y's values but not y itself: y owns this node, so holding y would be a cycle.
    record(y, "softmax", {x}, [y = y.detach(), R, C](const Tensor& dy) {  // dx = y ⊙ (dy − Σ dy·y)
      Tensor dx = Tensor::empty(y.shape());
      kernels::softmax_backward(y.data(), dy.data(), R, C, dx.data_mut());
      return std::vector<Tensor>{dx};
    });
  return y;
}

Tensor top_k(const Tensor& x, int64_t k) {
  const int64_t C = x.dim() >= 1 ? x.size(-1) : 0;
  if (k <= 0 || k > C) throw ShapeError("top_k: k = " + std::to_string(k) + " for x " + to_string(x.shape()));
  const int64_t R = x.numel() / C;
  Shape out = x.shape();
  out.back() = k;
  Tensor idx = Tensor::empty(out, DType::I32);
  int32_t* pi = static_cast<int32_t*>(idx.raw_mut());
  std::vector<int32_t> order(static_cast<size_t>(C));
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x.data() + r * C;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [xr](int32_t a, int32_t b) { return xr[a] > xr[b] || (xr[a] == xr[b] && a < b); });
    std::copy(order.begin(), order.begin() + k, pi + r * k);
  }
  return idx;
}

MoeRoute moe_route(const Tensor& logits, int64_t k) {
  // Logits on a device are routed on the host: the chosen experts decide which weights the next
  // products read, and those are recorded from the host (N·E floats come back per layer).
  if (!logits.device().is_cpu()) return moe_route(to_host(logits), k);
  auto [N, E] = logits.dims<2>("moe_route: logits");
  Tensor p = softmax(logits);   // [N, E]
  Tensor expert = top_k(p, k);  // I32 [N, k]
  // p[n, expert[n, j]] as rows of p viewed as [N·E, 1]: flat index n·E + expert[n, j].
  std::vector<int32_t> flat(static_cast<size_t>(N * k));
  for (int64_t i = 0; i < N * k; ++i) flat[size_t(i)] = int32_t(i / k * E + expert.ids()[i]);
  Tensor weight = gather_rows(p.reshape({N * E, 1}), Tensor::from_ids({N * k}, flat)).reshape({N, k});  // [N, k]
  return {.weight = weight, .expert = expert};
}

// w_j = p_j / s with s = max(Σ_i p_i, ε) over the k chosen; dp_j = (dw_j − Σ_i dw_i·w_i) / s, or
// dw_j / ε where ε clamps (s is a constant there).
MoeRoute moe_route_renormalized(const Tensor& logits, int64_t k) {
  MoeRoute r = moe_route(logits, k);
  const int64_t N = r.weight.size(0);
  Tensor sums = Tensor::empty({N}), w = Tensor::empty({N, k});  // s per row; w [N, k]
  for (int64_t n = 0; n < N; ++n) {
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += r.weight.data()[n * k + j];
    sums.data_mut()[n] = std::max(sum, kRenormFloor);
    for (int64_t j = 0; j < k; ++j) w.data_mut()[n * k + j] = r.weight.data()[n * k + j] / sums.data()[n];
  }
  if (needs_grad({&r.weight}))
    record(w, "moe_route_renormalized", {r.weight}, [w = w.detach(), sums, N, k](const Tensor& dw) {
      Tensor dp = Tensor::empty({N, k}), dw_w = Tensor::empty({N});
      kernels::row_dots(dw.data(), w.data(), N, k, dw_w.data_mut());
      for (int64_t n = 0; n < N; ++n) {
        const bool clamped = sums.data()[n] == kRenormFloor;
        for (int64_t j = 0; j < k; ++j)
          dp.data_mut()[n * k + j] = (dw.data()[n * k + j] - (clamped ? 0.0f : dw_w.data()[n])) / sums.data()[n];
      }
      return std::vector<Tensor>{dp};
    });
  return {.weight = w, .expert = r.expert};
}

}  // namespace toy
