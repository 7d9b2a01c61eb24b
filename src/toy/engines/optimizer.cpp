// engines/optimizer.cpp — AdamW, the schedule and gradient clipping.
#include "toy/engines/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "toy/kernels/kernels.h"

namespace toy {

namespace {
constexpr int64_t kGrain = 1 << 14;  // elements per parallel chunk of the elementwise updates
}

AdamW::AdamW(std::vector<Tensor> params, AdamWConfig c) : c_(c), params_(std::move(params)) {
  for (const Tensor& p : params_) {
    if (p.dtype() != DType::F32) throw ShapeError("AdamW: parameter '" + p.name() + "' is not F32");
    m_.push_back(Tensor::zeros(p.shape()));
    v_.push_back(Tensor::zeros(p.shape()));
  }
}

void AdamW::step(float lr) {
  ++t_;
  // As torch.optim.AdamW (single-tensor path): step_size = lr / bc1, denom = sqrt(v)/sqrt(bc2) + eps.
  const double bc1 = 1.0 - std::pow(double(c_.beta1), double(t_));
  const double bc2 = 1.0 - std::pow(double(c_.beta2), double(t_));
  const float step_size = float(double(lr) / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  const float b1 = c_.beta1, b2 = c_.beta2, eps = c_.eps;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor g = p.grad();
    const float decay = p.dim() >= 2 ? 1.0f - lr * c_.weight_decay : 1.0f;
    float *pp = p.data_mut(), *pm = m_[i].data_mut(), *pv = v_[i].data_mut();
    const float* pg = g.defined() ? g.data() : nullptr;
    kernels::parallel_for(p.numel(), kGrain, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        const float ge = pg ? pg[e] : 0.0f;
        pp[e] *= decay;
        pm[e] = b1 * pm[e] + (1.0f - b1) * ge;
        pv[e] = b2 * pv[e] + (1.0f - b2) * ge * ge;
        pp[e] -= step_size * pm[e] / (std::sqrt(pv[e]) / bc2_sqrt + eps);
      }
    });
  }
}

void AdamW::save(gguf::GgufWriter& w, bool weights) const {
  w.set("toy.optim.t", gguf::Value::of_u64(uint64_t(t_)));
  for (size_t i = 0; i < params_.size(); ++i) {
    w.add_tensor("optim.m." + params_[i].name(), m_[i]);
    w.add_tensor("optim.v." + params_[i].name(), v_[i]);
    if (weights) w.add_tensor("optim.w." + params_[i].name(), params_[i]);
  }
}

void AdamW::load(const gguf::GgufFile& f) {
  t_ = f.get_int("toy.optim.t");
  auto read = [&](const std::string& name, Tensor& dst) {
    const gguf::TensorInfo* ti = f.find_tensor(name);
    if (!ti || ti->shape != dst.shape() || ti->dtype != DType::F32)
      throw gguf::GgufError(f.path() + ": optimizer state '" + name + "' is missing or is not F32 " +
                            to_string(dst.shape()));
    std::memcpy(dst.data_mut(), f.tensor_data(*ti), dst.nbytes());
  };
  const bool weights = f.find_tensor("optim.w." + params_.at(0).name()) != nullptr;
  for (size_t i = 0; i < params_.size(); ++i) {
    read("optim.m." + params_[i].name(), m_[i]);
    read("optim.v." + params_[i].name(), v_[i]);
    if (weights) read("optim.w." + params_[i].name(), params_[i]);
  }
}

float lr_at(const Schedule& s, int64_t step) {
  if (s.warmup > 0 && step < s.warmup) return s.lr * float(step + 1) / float(s.warmup);
  if (s.kind == ScheduleKind::Constant) return s.lr;
  const int64_t span = s.total - s.warmup;
  const double progress = span > 0 ? std::min(1.0, double(step - s.warmup) / double(span)) : 1.0;
  const double min_lr = double(s.lr) * s.min_lr_ratio;
  return float(min_lr + 0.5 * (double(s.lr) - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)));
}

double global_grad_norm(std::span<const Tensor> params) {
  // Fixed chunks of kGrain elements, each summed by one thread; partial sums added in order.
  double total = 0;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const float* pg = g.data();
    const int64_t n = g.numel(), chunks = (n + kGrain - 1) / kGrain;
    std::vector<double> partial(size_t(chunks), 0.0);
    kernels::parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double s = 0;
        for (int64_t e = c * kGrain, end = std::min(n, e + kGrain); e < end; ++e) s += double(pg[e]) * pg[e];
        partial[size_t(c)] = s;
      }
    });
    for (double s : partial) total += s;
  }
  return std::sqrt(total);
}

float clip_grad_norm(std::span<const Tensor> params, float max_norm, double norm) {
  if (max_norm <= 0) return 1.0f;
  const double coef = double(max_norm) / (norm + 1e-6);
  if (coef >= 1.0) return 1.0f;
  const float f = float(coef);
  scale_grads(params, f);
  return f;
}

void scale_grads(std::span<const Tensor> params, float f) {
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    float* pg = g.data_mut();
    kernels::parallel_for(g.numel(), kGrain, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) pg[e] *= f;
    });
  }
}

}  // namespace toy
