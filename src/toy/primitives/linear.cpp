// primitives/linear.cpp — y = x·Wᵀ + b and embedding lookup, with gradients.
#include <cstring>

#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/primitives.h"
#include "toy/tensor/quant.h"

namespace toy {

namespace {
// W as F32 (a view when it already is, else a dequantized copy; only backward needs this).
Tensor as_f32(const Tensor& W) { return W.dtype() == DType::F32 ? W : W.clone(); }

// The output of x·Wᵀ (+ b), checked and allocated: [..., out].
Tensor linear_output(const Tensor& x, const Tensor& W, const Tensor& b) {
  auto [N, K] = W.dims<2>("linear: W");
  if (x.dim() < 1 || x.size(-1) != K)
    throw ShapeError("linear: x " + to_string(x.shape()) + " does not match W " + to_string(W.shape()) + " (" +
                     W.name() + ")");
  if (b.defined() && b.shape() != Shape{N})
    throw ShapeError("linear: bias " + to_string(b.shape()) + " for W " + to_string(W.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = N;
  return Tensor::empty(out_shape);
}

void add_bias(Tensor& y, const Tensor& b) {
  if (b.defined()) kernels::add_to_rows(b.data(), y.numel() / b.numel(), b.numel(), y.data_mut());
}

const LowRank* low_rank_of(const Tensor& W) { return W.impl()->low_rank.get(); }

// splitmix64: a well-mixed 64-bit hash, so that mask bits are a pure function of their index.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// y + Σ scale·(drop(x)·Aᵀ)·Bᵀ over the terms W carries.  x: [..., K], y: [..., N]
Tensor add_low_rank(Tensor y, const Tensor& x, const LowRank& lr) {
  for (const LowRankTerm& t : lr.terms) {
    Tensor xd = x;
    if (lr.dropout && lr.dropout->p > 0 && needs_grad({&t.A, &t.B}))
      xd = dropout(x, lr.dropout->p, mix(mix(lr.dropout->seed ^ mix(uint64_t(lr.dropout->step))) ^ lr.id));
    y = y + scale(linear(linear(xd, t.A), t.B), t.scale);  // [..., r] -> [..., N]
  }
  return y;
}
}  // namespace

Tensor with_low_rank(const Tensor& W, LowRank lr) {
  auto impl = std::make_shared<TensorImpl>(*W.impl());
  impl->low_rank = std::make_shared<const LowRank>(std::move(lr));
  return Tensor(impl);
}

Tensor dropout(const Tensor& x, float p, uint64_t seed) {
  if (!(p >= 0 && p < 1)) throw ShapeError("dropout: p = " + std::to_string(p) + " outside [0, 1)");
  Tensor mask = Tensor::empty(x.shape());
  float* m = mask.data_mut();
  const float keep = 1.0f / (1.0f - p);
  const uint64_t threshold = uint64_t(double(p) * 18446744073709551616.0);  // p · 2^64
  for (int64_t i = 0, n = x.numel(); i < n; ++i) m[i] = mix(seed ^ mix(uint64_t(i))) < threshold ? 0.0f : keep;
  return x * mask;
}

std::vector<Tensor> linears(const Tensor& x, const std::vector<Tensor>& Ws, const std::vector<Tensor>& bs) {
  auto bias = [&](size_t i) { return i < bs.size() ? bs[i] : Tensor(); };
  // A gradient, an adapter or a device: each its own linear() (its own node of the graph, or
  // the device's product).
  bool each = needs_grad({&x}) || device_ops(x);
  for (const Tensor& W : Ws) each = each || needs_grad({&W}) || low_rank_of(W);
  for (const Tensor& b : bs) each = each || needs_grad({&b});
  std::vector<Tensor> ys;
  if (each) {
    for (size_t i = 0; i < Ws.size(); ++i) ys.push_back(linear(x, Ws[i], bias(i)));
    return ys;
  }
  std::vector<kernels::Product> products;
  ys.reserve(Ws.size());
  products.reserve(Ws.size());
  for (size_t i = 0; i < Ws.size(); ++i) {
    ys.push_back(linear_output(x, Ws[i], bias(i)));
    products.push_back({.w = Ws[i].raw(), .wt = Ws[i].dtype(), .y = ys.back().data_mut(), .N = Ws[i].size(0)});
  }
  const int64_t K = x.size(-1);
  kernels::matmul_wt_many(x.data(), products, x.numel() / K, K);
  for (size_t i = 0; i < Ws.size(); ++i) add_bias(ys[i], bias(i));
  return ys;
}

Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b) {
  if (DeviceOps* d = device_ops(x)) {  // the backend's product, then the low-rank terms through the primitives
    const Tensor y = d->linear(x, W, b);
    const LowRank* lr = low_rank_of(W);
    return lr ? add_low_rank(y, x, *lr) : y;
  }
  Tensor y = linear_output(x, W, b);
  const int64_t N = y.size(-1), K = x.size(-1), M = x.numel() / K;
  kernels::matmul_wt(x.data(), W.raw(), W.dtype(), y.data_mut(), M, N, K);
  add_bias(y, b);
  if (needs_grad({&x, &W, &b}))
    record(y, "linear", {x, W, b}, [x, W, b, M, N, K](const Tensor& dy) {
      std::vector<Tensor> g(3);
      if (x.requires_grad()) {  // dx[M, K] = dy[M, N] · W[N, K]
        g[0] = Tensor::empty(x.shape());
        kernels::gemm(false, false, M, K, N, dy.data(), as_f32(W).data(), g[0].data_mut(), false);
      }
      if (W.requires_grad()) {  // dW[N, K] = dyᵀ[N, M] · x[M, K]
        g[1] = Tensor::empty(W.shape());
        kernels::gemm(true, false, N, K, M, dy.data(), x.data(), g[1].data_mut(), false);
      }
      if (b.defined() && b.requires_grad()) {  // db[N] = Σ_m dy[m, N]
        g[2] = Tensor::empty(b.shape());
        kernels::sum_rows(dy.data(), M, N, g[2].data_mut());
      }
      return g;
    });
  if (const LowRank* lr = low_rank_of(W)) return add_low_rank(y, x, *lr);
  return y;
}

namespace {
// y = x·A, no transpose.  x: [..., r], A: [r, D] (any dtype; trainable when F32) -> [..., D].
// What an embedding's low-rank term needs: B[ids]·A.
Tensor times(const Tensor& x, const Tensor& A) {
  auto [r, D] = A.dims<2>("embedding: low-rank A");
  if (x.dim() < 1 || x.size(-1) != r)
    throw ShapeError("embedding: low-rank rows " + to_string(x.shape()) + " do not match A " + to_string(A.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = D;
  Tensor y = Tensor::empty(out_shape);
  const int64_t M = x.numel() / r;
  kernels::gemm(false, false, M, D, r, x.data(), as_f32(A).data(), y.data_mut(), false);
  if (needs_grad({&x, &A}))
    record(y, "times", {x, A}, [x, A, M, r = r, D = D](const Tensor& dy) {
      std::vector<Tensor> g(2);
      if (x.requires_grad()) {  // dx[M, r] = dy[M, D] · Aᵀ
        g[0] = Tensor::empty(x.shape());
        kernels::gemm(false, true, M, r, D, dy.data(), as_f32(A).data(), g[0].data_mut(), false);
      }
      if (A.requires_grad()) {  // dA[r, D] = xᵀ[r, M] · dy[M, D]
        g[1] = Tensor::empty(A.shape());
        kernels::gemm(true, false, r, D, M, x.data(), dy.data(), g[1].data_mut(), false);
      }
      return g;
    });
  return y;
}
}  // namespace

Tensor embedding(const Tensor& W, const Tensor& ids) {
  auto [V, D] = W.dims<2>("embedding: W");
  const int32_t* id = ids.ids();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i)
    if (id[i] < 0 || id[i] >= V)
      throw ShapeError("embedding: token id " + std::to_string(id[i]) + " is outside the vocabulary [0, " +
                       std::to_string(V) + ")");
  if (DeviceOps* d = device_ops(W)) return d->embedding(W, ids);
  Shape out_shape = ids.shape();
  out_shape.push_back(D);
  Tensor y = Tensor::empty(out_shape);
  kernels::gather_rows_wt(W.raw(), W.dtype(), id, ids.numel(), D, y.data_mut());
  if (needs_grad({&W}))
    record(y, "embedding", {W}, [W, ids, D = D](const Tensor& dy) {  // dW[id] += dy row (scatter-add)
      Tensor dW = Tensor::zeros(W.shape());
      kernels::scatter_add_rows(ids.ids(), dy.data(), ids.numel(), D, dW.data_mut());
      return std::vector<Tensor>{dW};
    });
  if (const LowRank* lr = low_rank_of(W))  // + Σ scale·B[ids]·A: row id of W + scale·B·A
    for (const LowRankTerm& t : lr->terms) y = y + scale(times(embedding(t.B, ids), t.A), t.scale);
  return y;
}

}  // namespace toy
