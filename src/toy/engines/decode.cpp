// engines/decode.cpp — the KV-cache decode loop and the sampler.
#include "toy/engines/decode.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace toy {

DecodeEngine::DecodeEngine(const Model& m, int64_t n_ctx, DType kv_type)
    : model_(m),
      cache_(m.config().n_layer, n_ctx > 0 ? n_ctx : m.config().n_ctx, m.config().n_kv_head, m.config().d_head, kv_type) {}

Tensor DecodeEngine::feed(std::span<const int32_t> ids, bool last_only) {
  const int64_t T = int64_t(ids.size()), V = model_.config().n_vocab;
  if (T == 0) throw std::invalid_argument("feed: no tokens");
  if (n_past_ + T > n_ctx())
    throw std::length_error(std::to_string(n_past_ + T) + " tokens do not fit the context of " + std::to_string(n_ctx()));
  for (int32_t id : ids)
    if (id < 0 || id >= V) throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  NoGrad no_grad;
  Ctx ctx{.pos0 = n_past_, .kv = &cache_};
  Tensor logits = model_.forward(Tensor::from_ids({1, T}, ids), ctx);  // [1, T, V]
  n_past_ += T;
  logits = logits.reshape({T, V});
  return last_only ? logits.row_slice(T - 1, T) : logits;
}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(SamplerConfig c) : c_(c), rng_(c.seed) {}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  std::vector<float> z(logits.begin(), logits.end());
  if (c_.repeat_penalty != 1.0f && c_.repeat_last_n > 0) {
    const size_t from = history.size() > size_t(c_.repeat_last_n) ? history.size() - size_t(c_.repeat_last_n) : 0;
    std::vector<bool> seen(z.size());
    for (size_t i = from; i < history.size(); ++i)
      if (history[i] >= 0 && size_t(history[i]) < z.size()) seen[size_t(history[i])] = true;
    for (size_t v = 0; v < z.size(); ++v)
      if (seen[v]) z[v] = z[v] > 0 ? z[v] / c_.repeat_penalty : z[v] * c_.repeat_penalty;
  }
  if (c_.temperature <= 0) return argmax(z);

  // Candidates sorted by logit (ties: lower id first), cut by top-k.
  std::vector<int32_t> idx(z.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t k = c_.top_k > 0 ? std::min(size_t(c_.top_k), idx.size()) : idx.size();
  auto by_logit = [&](int32_t a, int32_t b) { return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + long(k), idx.end(), by_logit);
  idx.resize(k);
  // Softmax at the temperature.
  std::vector<double> p(k);
  const double mx = z[size_t(idx[0])];
  double total = 0;
  for (size_t i = 0; i < k; ++i) total += p[i] = std::exp((z[size_t(idx[i])] - mx) / c_.temperature);
  for (double& x : p) x /= total;
  // min-p, then top-p (nucleus): keep the smallest prefix whose mass reaches top_p.
  size_t keep = k;
  if (c_.min_p > 0)
    for (size_t i = 1; i < keep; ++i)
      if (p[i] < c_.min_p * p[0]) { keep = i; break; }
  if (c_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i];
      if (mass >= c_.top_p) { keep = i + 1; break; }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += p[i];
  std::uniform_real_distribution<double> u(0.0, kept);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace toy
