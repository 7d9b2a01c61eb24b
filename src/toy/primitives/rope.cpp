// primitives/rope.cpp — rotary position embedding (NORM and NEOX pairings), with gradient.
//
// Pair i (i < n_rot/2) of a head at position p rotates by θ = p · base^(−2i/n_rot) / f_i. NORM
// pairs the adjacent dimensions (2i, 2i+1); NEOX pairs (i, i + n_rot/2). Dimensions ≥ n_rot pass
// through.
// The backward pass is the rotation by −θ (a rotation's inverse is its transpose).
#include <algorithm>
#include <cmath>

#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

Tensor rotate(const Tensor& x, const RopeAngles& a, float sign) {
  const auto [B, T, H_, Dh_] = x.dims<4>("rope: x");
  const int64_t H = H_, Dh = Dh_;  // captured below: clang 14 cannot capture a structured binding
  const Rope& r = a.rope;
  const int64_t half = r.n_rot / 2;
  if (int64_t(a.pos.size()) != B * T)
    throw ShapeError("rope: angles for " + std::to_string(a.pos.size()) + " positions, x " + to_string(x.shape()));
  if (r.n_rot > Dh)
    throw ShapeError("rope: n_rot " + std::to_string(r.n_rot) + " exceeds d_head " + std::to_string(Dh));
  Tensor y = Tensor::empty(x.shape());
  const float* px = x.data();
  float* py = y.data_mut();
  const int64_t stride_a = r.mode == RopeMode::Norm ? 2 : 1;     // index of pair member a
  const int64_t offset_b = r.mode == RopeMode::Norm ? 1 : half;  // b = a + offset_b
  kernels::parallel_for(B * T, 4, [&](int64_t bt0, int64_t bt1) {
    for (int64_t bt = bt0; bt < bt1; ++bt) {
      const int64_t t = std::lower_bound(a.at.begin(), a.at.end(), a.pos[size_t(bt)]) - a.at.begin();  // table row
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = px + (bt * H + h) * Dh;
        float* yi = py + (bt * H + h) * Dh;
        for (int64_t d = r.n_rot; d < Dh; ++d) yi[d] = xi[d];
        for (int64_t i = 0; i < half; ++i) {
          const int64_t ia = i * stride_a, ib = ia + offset_b;
          const float c = a.cos[size_t(t * half + i)], s = sign * a.sin[size_t(t * half + i)];
          yi[ia] = xi[ia] * c - xi[ib] * s;
          yi[ib] = xi[ia] * s + xi[ib] * c;
        }
      }
    }
  });
  return y;
}

}  // namespace

RopeTable rope_angles(const Tensor& pos, const Rope& r) {
  auto [B, T] = pos.dims<2>("rope_angles: pos");
  if (pos.dtype() != DType::I32) throw ShapeError("rope_angles: positions must be I32 [B, T]");
  if (r.n_rot <= 0 || r.n_rot % 2) throw ShapeError("rope_angles: n_rot " + std::to_string(r.n_rot) + " must be even");
  const int64_t half = r.n_rot / 2;
  if (r.freq_factors.defined() && r.freq_factors.numel() < half)
    throw ShapeError("rope_angles: rope_freqs has " + std::to_string(r.freq_factors.numel()) + " factors, need " +
                     std::to_string(half));
  // The table holds the P distinct positions that occur (sorted), angles in double (ggml uses
  // float; the difference is ≤ 1e-13 in logits). A position's angles do not depend on the other
  // rows, so a row rotates the same alone or in a batch.
  auto a = std::make_shared<RopeAngles>();
  a->rope = r;
  a->pos.assign(pos.ids(), pos.ids() + B * T);
  a->at = a->pos;
  std::sort(a->at.begin(), a->at.end());
  a->at.erase(std::unique(a->at.begin(), a->at.end()), a->at.end());
  const int64_t P = int64_t(a->at.size());
  const std::vector<float> f = r.freq_factors.defined() ? r.freq_factors.to_vector() : std::vector<float>{};
  a->cos.resize(size_t(P * half));
  a->sin.resize(size_t(P * half));
  for (int64_t t = 0; t < P; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double theta = double(a->at[size_t(t)]) * std::pow(double(r.base), -2.0 * double(i) / double(r.n_rot));
      if (!f.empty()) theta /= double(f[size_t(i)]);
      a->cos[size_t(t * half + i)] = float(std::cos(theta));
      a->sin[size_t(t * half + i)] = float(std::sin(theta));
    }
  return a;
}

Tensor rope(const Tensor& x, const RopeTable& angles) {
  if (DeviceOps* d = device_ops(x)) return d->rope(x, *angles);
  Tensor y = rotate(x, *angles, 1.0f);
  if (needs_grad({&x}))
    record(y, "rope", {x}, [angles](const Tensor& dy) { return std::vector<Tensor>{rotate(dy, *angles, -1.0f)}; });
  return y;
}

}  // namespace toy
