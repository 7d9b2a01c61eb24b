// engines/decode.cpp — the KV-cache decode loop.
#include "toy/engines/decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

}  // namespace toy
