// primitives/rope.cpp — rotary position embedding (NORM and NEOX pairings), with gradient.
//
// Pair i (i < n_rot/2) of a head at position p rotates by θ = p · base^(−2i/n_rot) / f_i. NORM
// pairs the adjacent dimensions (2i, 2i+1); NEOX pairs (i, i + n_rot/2). Dimensions ≥ n_rot pass
// through.
// The backward pass is the rotation by −θ (a rotation's inverse is its transpose).
#include <algorithm>
#include <cmath>
#include <span>

#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

// cos θ and sin θ of pair i at position `at[t]`, at [t·half + i].
struct AngleTable {
  std::vector<int32_t> at;
  float base = 0;
  int64_t n_rot = 0;
  std::vector<float> factors;  // rope_freqs, empty when none
  std::vector<float> cos, sin;
};

// The table for positions `at` (sorted, distinct). The 2·n_layer rope calls of a forward step
// all ask for the same one, so the last table a thread computed is kept and reused when its
// positions and parameters (the frequency factors compared by value) are the same.
const AngleTable& angles(const std::vector<int32_t>& at, const Rope& r) {
  thread_local AngleTable last;
  const int64_t half = r.n_rot / 2;
  const std::span<const float> factors =
      r.freq_factors.defined() ? std::span<const float>(r.freq_factors.data(), size_t(half)) : std::span<const float>();
  if (last.at == at && last.base == r.base && last.n_rot == r.n_rot && std::ranges::equal(last.factors, factors))
    return last;
  const int64_t P = int64_t(at.size());
  last = {.at = at,
          .base = r.base,
          .n_rot = r.n_rot,
          .factors = std::vector<float>(factors.begin(), factors.end()),
          .cos = std::vector<float>(size_t(P * half)),
          .sin = std::vector<float>(size_t(P * half))};
  for (int64_t t = 0; t < P; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double theta = double(at[size_t(t)]) * std::pow(double(r.base), -2.0 * double(i) / double(r.n_rot));
      if (!last.factors.empty()) theta /= double(last.factors[size_t(i)]);
      last.cos[size_t(t * half + i)] = float(std::cos(theta));
      last.sin[size_t(t * half + i)] = float(std::sin(theta));
    }
  return last;
}

Tensor rotate(const Tensor& x, const Tensor& pos, const Rope& r, float sign) {
  auto [B, T, H, Dh] = x.dims<4>("rope: x");
  const int64_t half = r.n_rot / 2;
  if (pos.shape() != Shape{B, T} || pos.dtype() != DType::I32)
    throw ShapeError("rope: positions " + to_string(pos.shape()) + " for x " + to_string(x.shape()) +
                     ", expected I32 [B, T]");
  if (r.n_rot <= 0 || r.n_rot > Dh || r.n_rot % 2)
    throw ShapeError("rope: n_rot " + std::to_string(r.n_rot) + " does not fit d_head " + std::to_string(Dh));
  if (r.freq_factors.defined() && r.freq_factors.numel() < half)
    throw ShapeError("rope: rope_freqs has " + std::to_string(r.freq_factors.numel()) + " factors, need " +
                     std::to_string(half));
  // cos/sin table [P, half] for the P distinct positions that occur (sorted), angles in double
  // (ggml uses float; the difference is ≤ 1e-13 in logits). A position's angles do not depend on
  // the other rows, so a row rotates the same alone or in a batch.
  Tensor y = Tensor::empty(x.shape());
  const int32_t* p = pos.ids();
  std::vector<int32_t> at(p, p + B * T);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  const AngleTable& table = angles(at, r);
  const std::vector<float>&cs = table.cos, &sn = table.sin;
  const float* px = x.data();
  float* py = y.data_mut();
  const int64_t stride_a = r.mode == RopeMode::Norm ? 2 : 1;     // index of pair member a
  const int64_t offset_b = r.mode == RopeMode::Norm ? 1 : half;  // b = a + offset_b
  kernels::parallel_for(B * T, 4, [&](int64_t bt0, int64_t bt1) {
    for (int64_t bt = bt0; bt < bt1; ++bt) {
      const int64_t t = std::lower_bound(at.begin(), at.end(), p[bt]) - at.begin();  // row of the table
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = px + (bt * H + h) * Dh;
        float* yi = py + (bt * H + h) * Dh;
        for (int64_t d = r.n_rot; d < Dh; ++d) yi[d] = xi[d];
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = i * stride_a, b = a + offset_b;
          const float c = cs[size_t(t * half + i)], s = sign * sn[size_t(t * half + i)];
          yi[a] = xi[a] * c - xi[b] * s;
          yi[b] = xi[a] * s + xi[b] * c;
        }
      }
    }
  });
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& pos, const Rope& r) {
  Tensor y = rotate(x, pos, r, 1.0f);
  if (needs_grad({&x}))
    record(y, "rope", {x}, [pos, r](const Tensor& dy) { return std::vector<Tensor>{rotate(dy, pos, r, -1.0f)}; });
  return y;
}

}  // namespace toy
