// engines/decode.cpp — the KV-cache decode loop and the sampler.
#include "toy/engines/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"

namespace toy {

namespace {

std::vector<bool> attending_layers(const Model& m) {  // the layers that need KV cache rows
  std::vector<bool> attends;
  for (int64_t l = 0; l < m.config().n_layer; ++l) attends.push_back(m.attends(l));
  return attends;
}

}  // namespace

DecodeEngine::DecodeEngine(const Model& m, int64_t n_ctx, DType kv_type)
    : model_(&m),
      cache_(attending_layers(m), n_ctx > 0 ? n_ctx : m.config().n_ctx, m.config().n_kv_head, m.config().d_head,
             kv_type, m.device()) {}

void DecodeEngine::set_model(const Model& m) {
  const ModelConfig &a = model_->config(), &b = m.config();
  if (a.arch != b.arch || a.n_layer != b.n_layer || a.n_kv_head != b.n_kv_head || a.d_head != b.d_head ||
      a.n_vocab != b.n_vocab)
    throw std::invalid_argument("set_model: the model's shape differs from the engine's");
  if (m.device() != model_->device())
    throw std::invalid_argument("set_model: the model is on " + to_string(m.device()) + ", the engine's cache on " +
                                to_string(model_->device()));
  model_ = &m;
  reset();
}

void DecodeEngine::check_room(std::span<const int32_t> ids) const {
  const int64_t T = int64_t(ids.size()), V = model_->config().n_vocab;
  if (T == 0) throw std::invalid_argument("feed: no tokens");
  if (n_past() + T > n_ctx())
    throw std::length_error(std::to_string(n_past() + T) + " tokens do not fit the context of " +
                            std::to_string(n_ctx()));
  for (int32_t id : ids)
    if (id < 0 || id >= V)
      throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) +
                              ")");
}

Tensor DecodeEngine::feed(std::span<const int32_t> ids, bool last_only) {
  check_room(ids);
  const int64_t T = int64_t(ids.size()), V = model_->config().n_vocab;
  NoGrad no_grad;
  const Ctx ctx{.seqs = {{.pos0 = n_past(), .kv = &cache_, .state = &state_}}, .last_logits = last_only};
  Tensor logits = to_host(model_->forward(Tensor::from_ids({1, T}, ids), ctx));  // [1, T or 1, V]
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  return logits.reshape({logits.size(1), V});
}

void DecodeEngine::rewind(Mark& mark, int64_t n) {
  if (n < mark.n_past || n > n_past())
    throw std::invalid_argument("rewind: position " + std::to_string(n) + " is not between the mark (" +
                                std::to_string(mark.n_past) + ") and the end (" + std::to_string(n_past()) + ")");
  if (state_.empty()) {  // the KV rows past n are overwritten by what is fed next
    tokens_.resize(size_t(n));
    return;
  }
  const std::vector<int32_t> again(tokens_.begin() + mark.n_past, tokens_.begin() + n);
  tokens_.resize(size_t(mark.n_past));
  state_ = std::move(mark.state);
  if (!again.empty()) feed(again, /*last_only=*/true);
}

int64_t DecodeEngine::exact_feed_limit() const {
  for (int64_t l = 0; l < model_->config().n_layer; ++l)
    if (!model_->attends(l)) return kernels::kDeltaRuleMinMatrixChunk - 1;
  return std::numeric_limits<int64_t>::max();
}

Tensor DecodeEngine::feed_batch(std::span<DecodeEngine* const> engines, std::span<const int32_t> ids) {
  const int64_t B = int64_t(engines.size());
  if (B == 0 || ids.size() != engines.size())
    throw std::invalid_argument("feed_batch: one token per engine, at least one engine");
  const Model& model = *engines[0]->model_;
  Ctx ctx{.seqs = {}};
  for (int64_t b = 0; b < B; ++b) {
    DecodeEngine& e = *engines[size_t(b)];
    if (e.model_ != &model) throw std::invalid_argument("feed_batch: the engines run different models");
    e.check_room(ids.subspan(size_t(b), 1));
    ctx.seqs.push_back({.pos0 = e.n_past(), .kv = &e.cache_, .state = &e.state_});
  }
  NoGrad no_grad;
  Tensor logits = to_host(model.forward(Tensor::from_ids({B, 1}, ids), ctx));  // [B, 1, V]
  for (size_t b = 0; b < engines.size(); ++b) engines[b]->tokens_.push_back(ids[b]);
  return logits.reshape({B, model.config().n_vocab});
}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

namespace {

// The k best ids by logit (ties: lower id first), put in order lazily: only as far as the caller
// looks, so cutting the distribution after a few dozen tokens costs O(V), not O(V log V).
class Ranking {
 public:
  Ranking(const std::vector<float>& z, size_t k) : better_{z}, ids_(z.size()) {
    std::iota(ids_.begin(), ids_.end(), 0);
    if (k < ids_.size()) {  // top-k: a heap of k, so a small k costs O(V)
      std::partial_sort(ids_.begin(), ids_.begin() + long(k), ids_.end(), better_);
      ids_.resize(k);
      sorted_ = k;
    }
  }
  size_t size() const { return ids_.size(); }
  // The candidates in id order (every id when k ≥ V).
  std::vector<int32_t> by_id() const {
    std::vector<int32_t> ids = ids_;
    if (ids.size() == better_.z.size())
      std::iota(ids.begin(), ids.end(), 0);
    else
      std::sort(ids.begin(), ids.end());
    return ids;
  }
  int32_t operator[](size_t i) {  // the i-th best
    sort_to(i + 1);
    return ids_[i];
  }
  std::vector<int32_t> best(size_t n) {  // the n best, best first
    sort_to(n);
    return {ids_.begin(), ids_.begin() + long(n)};
  }

 private:
  struct Better {
    const std::vector<float>& z;
    bool operator()(int32_t a, int32_t b) const {
      return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
    }
  };
  // Sorts at least the n best: the next chunk (doubling) is selected from the rest, then sorted.
  void sort_to(size_t n) {
    if (n <= sorted_) return;
    const auto end = ids_.begin() + long(std::min(ids_.size(), std::max(n, 2 * sorted_ + 64)));
    std::nth_element(ids_.begin() + long(sorted_), end - 1, ids_.end(), better_);
    std::sort(ids_.begin() + long(sorted_), end, better_);
    sorted_ = size_t(end - ids_.begin());
  }

  Better better_;
  std::vector<int32_t> ids_;
  size_t sorted_ = 0;  // ids_[0, sorted_) are the best, in order
};

}  // namespace

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

  Ranking rank(z, c_.top_k > 0 ? size_t(c_.top_k) : z.size());
  // Softmax at the temperature over the candidates. Sums run in id order, so they do not depend
  // on how much of the ranking was sorted.
  const double mx = z[size_t(rank[0])];
  const std::vector<int32_t> candidates = rank.by_id();
  std::vector<double> e(z.size());  // exp((z − max) / T) of the candidates
  double total = 0;
  for (int32_t id : candidates) total += e[size_t(id)] = std::exp((z[size_t(id)] - mx) / c_.temperature);
  auto p = [&](size_t i) { return e[size_t(rank[i])] / total; };  // probability of the i-th best
  // min-p, then top-p (nucleus): keep the smallest prefix whose mass reaches top_p.
  size_t keep = rank.size();
  if (c_.min_p > 0)
    for (size_t i = 1; i < keep; ++i)
      if (p(i) < c_.min_p * p(0)) {
        keep = i;
        break;
      }
  if (c_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p(i);
      if (mass >= c_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<int32_t> kept_ids = candidates;  // in id order, like the total
  if (keep < rank.size()) {
    kept_ids = rank.best(keep);
    std::sort(kept_ids.begin(), kept_ids.end());
  }
  double kept = 0;
  for (int32_t id : kept_ids) kept += e[size_t(id)] / total;
  std::uniform_real_distribution<double> u(0.0, kept);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= p(i);
    if (r <= 0) return rank[i];
  }
  return rank[keep - 1];
}

}  // namespace toy
