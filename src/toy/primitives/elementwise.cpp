// primitives/elementwise.cpp — add, mul, scale, activations and soft-capping, with gradients
// (the loops: kernels/elementwise.cpp and kernels/activations.cpp).
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

void same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ShapeError(std::string(op) + ": shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) + " differ");
}

// A new tensor of x's shape filled by kernel(x's values, y's values, n).
template <class Kernel>
Tensor unary(const Tensor& x, Kernel kernel) {
  Tensor y = Tensor::empty(x.shape());
  kernel(x.data(), y.data_mut(), x.numel());
  return y;
}

// The same with two inputs of one shape: kernel(a, b, y, n).
template <class Kernel>
Tensor binary(const Tensor& a, const Tensor& b, Kernel kernel) {
  Tensor y = Tensor::empty(a.shape());
  kernel(a.data(), b.data(), y.data_mut(), a.numel());
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  same_shape("add", a, b);
  if (DeviceOps* d = device_ops(a)) return d->add(a, b);
  Tensor y = binary(a, b, kernels::add);
  if (needs_grad({&a, &b})) record(y, "add", {a, b}, [](const Tensor& d) { return std::vector<Tensor>{d, d}; });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  same_shape("mul", a, b);
  if (DeviceOps* d = device_ops(a)) return d->mul(a, b);
  Tensor y = binary(a, b, kernels::mul);
  if (needs_grad({&a, &b}))
    record(y, "mul", {a, b}, [a, b](const Tensor& d) {  // d(ab) = b·da + a·db
      return std::vector<Tensor>{mul(d, b), mul(d, a)};
    });
  return y;
}

Tensor scale(const Tensor& x, float s) {
  if (DeviceOps* d = device_ops(x)) return d->scale(x, s);
  Tensor y = unary(x, [s](const float* px, float* py, int64_t n) { kernels::scale(px, s, py, n); });
  if (needs_grad({&x})) record(y, "scale", {x}, [s](const Tensor& d) { return std::vector<Tensor>{scale(d, s)}; });
  return y;
}

Tensor silu(const Tensor& x) {
  if (DeviceOps* d = device_ops(x)) return d->silu(x);
  Tensor y = Tensor::empty(x.shape());
  kernels::parallel_for(x.numel(), 1 << 14,
                        [&](int64_t i0, int64_t i1) { kernels::silu(x.data() + i0, y.data_mut() + i0, i1 - i0); });
  if (needs_grad({&x}))
    record(y, "silu", {x}, [x](const Tensor& d) {  // silu'(v) = σ(v)(1 + v(1 − σ(v)))
      return std::vector<Tensor>{binary(d, x, kernels::silu_backward)};
    });
  return y;
}

// ggml evaluates GELU through an fp16 table: the input rounded to fp16, the output rounded to
// fp16, saturating outside (−10, 10). Matching it keeps F32 logits at 1e-9 of llama.cpp's
// instead of 1e-7 (fixtures/models/CONVENTIONS.md §7). Training uses the exact curve, forward and
// backward: the table's steps are not what the gradient differentiates, and moved the gpt2 and
// gemma2 PyTorch traces by up to 9e-4 in gradient norm (fixtures/train/README.md).
Tensor gelu_tanh(const Tensor& x) {
  if (DeviceOps* d = device_ops(x)) return d->gelu_tanh(x);
  const bool training = needs_grad({&x});
  Tensor y = unary(x, training ? kernels::gelu_tanh_exact : kernels::gelu_tanh);
  if (training)
    record(y, "gelu_tanh", {x},
           [x](const Tensor& d) { return std::vector<Tensor>{binary(d, x, kernels::gelu_tanh_backward)}; });
  return y;
}

Tensor softcap(const Tensor& x, float cap) {
  if (DeviceOps* d = device_ops(x)) return d->softcap(x, cap);
  Tensor y = unary(x, [cap](const float* px, float* py, int64_t n) { kernels::softcap(px, cap, py, n); });
  if (needs_grad({&x}))
    // y.detach(): the rule needs y's values, and holding y itself (which owns this node) would
    // be a reference cycle that leaks the whole recorded graph.
    record(y, "softcap", {x}, [y = y.detach(), cap](const Tensor& d) {  // d/dv cap·tanh(v/cap) = 1 − (y/cap)²
      return std::vector<Tensor>{binary(d, y, [cap](const float* pd, const float* py, float* dx, int64_t n) {
        kernels::softcap_backward(pd, py, cap, dx, n);
      })};
    });
  return y;
}

Tensor sigmoid(const Tensor& x) {
  if (DeviceOps* d = device_ops(x)) return d->sigmoid(x);
  Tensor y = unary(x, kernels::sigmoid);
  if (needs_grad({&x}))
    record(y, "sigmoid", {x}, [y = y.detach()](const Tensor& d) {  // σ' = σ(1 − σ); y.detach(): see softcap
      return std::vector<Tensor>{binary(d, y, kernels::sigmoid_backward)};
    });
  return y;
}

Tensor sum(const Tensor& x) {
  double s = 0;
  for (float v : std::span(x.data(), size_t(x.numel()))) s += v;
  Tensor y = Tensor::full({}, float(s));
  if (needs_grad({&x}))
    record(y, "sum", {x},
           [shape = x.shape()](const Tensor& d) { return std::vector<Tensor>{Tensor::full(shape, d.item())}; });
  return y;
}

}  // namespace toy
