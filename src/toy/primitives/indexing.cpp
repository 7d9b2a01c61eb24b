// primitives/indexing.cpp — slab, narrow, gather_rows, concat_rows, scatter_add_rows, scale_rows, prepend_row,
// first_rows, with gradients.
#include "toy/primitives/indexing.h"

#include <cstring>

#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"

namespace toy {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// rows: I32 [M] with every value in [0, N).
void check_rows(const char* op, const Tensor& rows, int64_t N) {
  if (rows.dtype() != DType::I32 || rows.dim() != 1)
    throw ShapeError(std::string(op) + ": rows must be I32 [M], got " + std::string(name(rows.dtype())) + " " +
                     to_string(rows.shape()));
  for (int64_t m = 0; m < rows.numel(); ++m)
    if (rows.ids()[m] < 0 || rows.ids()[m] >= N)
      throw ShapeError(std::string(op) + ": row " + str(rows.ids()[m]) + " outside [0, " + str(N) + ")");
}

}  // namespace

Tensor slab(const Tensor& x, int64_t i) {
  if (x.dim() < 2 || i < 0 || i >= x.size(0))
    throw ShapeError("slab: index " + str(i) + " out of range for " + to_string(x.shape()) +
                     (x.name().empty() ? "" : " (" + x.name() + ")"));
  Shape inner(x.shape().begin() + 1, x.shape().end());
  Tensor y = x.row_slice(i, i + 1).reshape(inner);  // a view: same storage, offset by i slabs
  if (!x.name().empty()) y.set_name(x.name() + "[" + str(i) + "]");
  if (needs_grad({&x}))
    record(y, "slab", {x}, [shape = x.shape(), i](const Tensor& dy) {
      Tensor dx = Tensor::zeros(shape);
      std::memcpy(dx.data_mut() + i * dy.numel(), dy.data(), dy.nbytes());
      return std::vector<Tensor>{dx};
    });
  return y;
}

Tensor narrow(const Tensor& x, int64_t begin, int64_t n) {
  const int64_t C = x.dim() >= 1 ? x.size(-1) : 0;
  if (x.dim() < 1 || begin < 0 || n < 0 || begin + n > C)
    throw ShapeError("narrow: columns [" + str(begin) + ", " + str(begin + n) + ") of " + to_string(x.shape()));
  if (DeviceOps* d = device_ops(x)) return d->narrow(x, begin, n);
  const int64_t R = x.numel() / C;
  Shape out = x.shape();
  out.back() = n;
  Tensor y = Tensor::empty(out);
  kernels::copy_columns(x.data(), C, begin, y.data_mut(), n, 0, R, n);
  if (needs_grad({&x}))
    record(y, "narrow", {x}, [shape = x.shape(), begin, n, R, C](const Tensor& dy) {
      Tensor dx = Tensor::zeros(shape);
      kernels::copy_columns(dy.data(), n, 0, dx.data_mut(), C, begin, R, n);
      return std::vector<Tensor>{dx};
    });
  return y;
}

Tensor gather_rows(const Tensor& x, const Tensor& rows) {
  auto [N, D] = x.dims<2>("gather_rows: x");
  check_rows("gather_rows", rows, N);
  if (DeviceOps* d = device_ops(x)) return d->gather_rows(x, rows);
  const int64_t M = rows.numel();
  Tensor y = Tensor::empty({M, D});
  kernels::gather_rows(x.data(), rows.ids(), M, D, y.data_mut());
  if (needs_grad({&x}))
    record(y, "gather_rows", {x}, [shape = x.shape(), rows, M, D = D](const Tensor& dy) {
      Tensor dx = Tensor::zeros(shape);
      kernels::scatter_add_rows(rows.ids(), dy.data(), M, D, dx.data_mut());
      return std::vector<Tensor>{dx};
    });
  return y;
}

Tensor concat_rows(const std::vector<Tensor>& xs) {
  if (xs.empty()) throw ShapeError("concat_rows: no tensors");
  const int64_t D = xs[0].dims<2>("concat_rows: x")[1];
  int64_t M = 0;
  for (const Tensor& x : xs) {
    if (x.dims<2>("concat_rows: x")[1] != D)
      throw ShapeError("concat_rows: " + to_string(x.shape()) + " after " + to_string(xs[0].shape()));
    M += x.size(0);
  }
  if (DeviceOps* d = device_ops(xs[0])) {  // each x's rows stored in turn, without gradient
    Tensor y = d->empty({M, D}, DType::F32);
    for (int64_t at = 0; const Tensor& x : xs) {
      d->store_rows(y, at, x);
      at += x.size(0);
    }
    return y;
  }
  Tensor y = Tensor::empty({M, D});
  int64_t at = 0;
  for (const Tensor& x : xs) {
    std::memcpy(y.data_mut() + at * D, x.data(), x.nbytes());
    at += x.size(0);
  }
  bool grad = false;
  for (const Tensor& x : xs) grad = grad || needs_grad({&x});
  if (grad)
    record(y, "concat_rows", xs, [xs, D](const Tensor& dy) {
      std::vector<Tensor> dxs;
      int64_t at = 0;
      for (const Tensor& x : xs) {
        dxs.push_back(Tensor::empty(x.shape()));
        std::memcpy(dxs.back().data_mut(), dy.data() + at * D, x.nbytes());
        at += x.size(0);
      }
      return dxs;
    });
  return y;
}

Tensor scatter_add_rows(const Tensor& base, const Tensor& rows, const Tensor& src) {
  auto [N, D] = base.dims<2>("scatter_add_rows: base");
  check_rows("scatter_add_rows", rows, N);
  const int64_t M = rows.numel();
  if (src.shape() != Shape{M, D})
    throw ShapeError("scatter_add_rows: src " + to_string(src.shape()) + " for " + str(M) + " rows of " +
                     to_string(base.shape()));
  if (DeviceOps* d = device_ops(src)) return d->scatter_add_rows(base, rows, src);
  Tensor y = Tensor::empty(base.shape());
  std::memcpy(y.data_mut(), base.data(), base.nbytes());
  kernels::scatter_add_rows(rows.ids(), src.data(), M, D, y.data_mut());
  if (needs_grad({&base, &src}))
    record(y, "scatter_add_rows", {base, src}, [rows](const Tensor& dy) {
      return std::vector<Tensor>{dy, gather_rows(dy, rows)};
    });
  return y;
}

Tensor scale_rows(const Tensor& x, const Tensor& s) {
  auto [M, D] = x.dims<2>("scale_rows: x");
  if (s.shape() != Shape{M})
    throw ShapeError("scale_rows: scales " + to_string(s.shape()) + " for x " + to_string(x.shape()));
  if (DeviceOps* d = device_ops(x)) return d->scale_rows(x, s);
  Tensor y = Tensor::empty(x.shape());
  kernels::scale_rows(x.data(), s.data(), M, D, y.data_mut());
  if (needs_grad({&x, &s}))
    record(y, "scale_rows", {x, s}, [x, s, M = M, D = D](const Tensor& dy) {
      Tensor ds = Tensor::empty(s.shape());  // ds[m] = Σ_d dy[m, d]·x[m, d]
      kernels::row_dots(dy.data(), x.data(), M, D, ds.data_mut());
      return std::vector<Tensor>{scale_rows(dy, s), ds};
    });
  return y;
}

Tensor prepend_row(const Tensor& row, const Tensor& x) {
  auto [B, N, D] = x.dims<3>("prepend_row");
  Tensor rows = concat_rows({row.reshape({1, D}), x.reshape({B * N, D})});  // [1 + B·N, D]
  std::vector<int32_t> order;  // row t of item b: 0 (the prepended row) or 1 + b·N + (t − 1)
  for (int64_t b = 0; b < B; ++b) {
    order.push_back(0);
    for (int64_t n = 0; n < N; ++n) order.push_back(int32_t(1 + b * N + n));
  }
  return gather_rows(rows, Tensor::from_ids({B * (N + 1)}, order)).reshape({B, N + 1, D});
}

Tensor first_rows(const Tensor& x) {
  auto [B, T, D] = x.dims<3>("first_rows");
  std::vector<int32_t> first;
  for (int64_t b = 0; b < B; ++b) first.push_back(int32_t(b * T));
  return gather_rows(x.reshape({B * T, D}), Tensor::from_ids({B}, first));
}

}  // namespace toy
