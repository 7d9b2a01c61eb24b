// engines/decode.h — L4: drive a model token by token with a KV cache (sampler.h turns its logits into tokens).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "toy/archs/model.h"
#include "toy/engines/sampler.h"

namespace toy {

// Owns the caches of one sequence: the KV cache of the attention layers and the state of the
// recurrent ones (Gated DeltaNet). The prompt goes in as one batch; each generated token
// is fed alone and attends to everything cached before it.
class DecodeEngine {
 public:
  // n_ctx 0: the model's context length. kv_type: the KV cache's dtype, F32 or F16.
  explicit DecodeEngine(const Model& m, int64_t n_ctx = 0, DType kv_type = DType::F32);
  // Feeds `ids` at positions n_past … and returns their logits [T, n_vocab] (all rows, or only
  // the last row when last_only). Throws std::length_error when the context would overflow.
  Tensor feed(std::span<const int32_t> ids, bool last_only = false);
  // One decode step of several sequences at once: ids[b] is fed to engines[b] (all over the same
  // model) in one forward pass of B rows, so each weight matrix is read once for all of them.
  // Returns logits [B, n_vocab]; row b has the bits engines[b]->feed({ids[b]}) would return.
  static Tensor feed_batch(std::span<DecodeEngine* const> engines, std::span<const int32_t> ids);
  int64_t n_past() const { return int64_t(tokens_.size()); }
  int64_t n_ctx() const { return cache_.n_ctx(); }
  size_t kv_cache_bytes() const { return cache_.bytes(); }
  // The ids whose KV rows the cache holds, in position order (n_past() of them).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Keeps the first n cached positions and forgets the rest: the next feed() continues at n.
  // A prompt that starts with tokens()[0, n) can so skip its first n tokens (prompt caching).
  // A model with recurrent layers cannot rewind their state: short of n_past() it starts over,
  // so read n_past() afterwards.
  void truncate(int64_t n) {
    n = std::clamp<int64_t>(n, 0, n_past());
    if (n < n_past() && !state_.empty()) n = 0;
    tokens_.resize(size_t(n));
    if (n == 0) state_.clear();
  }
  void reset() {
    tokens_.clear();
    state_.clear();
  }
  // A place to come back to after feeding tokens that may be taken back (a speculative draft's):
  // the position and a copy of the recurrent layers' state (none for a model whose every layer
  // attends: its KV rows past a position are simply overwritten later).
  struct Mark {
    int64_t n_past;
    RecurrentState state;
  };
  Mark mark() const { return {n_past(), state_.copy()}; }
  // Keeps the first n positions, mark.n_past ≤ n ≤ n_past(), as if nothing after them had been
  // fed: a model with recurrent layers restarts from the mark's state and feeds its tokens again
  // up to n. Spends the mark's state. Throws std::invalid_argument for n outside that range.
  void rewind(Mark& mark, int64_t n);
  // The most tokens one feed() takes whose rows and caches get the bits that feeding them one at a
  // time gives: any number when every layer attends; a Gated DeltaNet layer runs fewer than
  // kernels::kDeltaRuleMinMatrixChunk tokens as the recurrence, more in the chunked form.
  int64_t exact_feed_limit() const;
  const Model& model() const { return *model_; }
  // Runs `m` from now on, a model of the same shape (the same base with other LoRA scales, as
  // the server switches them per request), and forgets every cached token: the rows cached were
  // computed by the old one. Throws std::invalid_argument for a model of another shape.
  void set_model(const Model& m);

 private:
  void check_room(std::span<const int32_t> ids) const;  // throws as feed() documents

  const Model* model_;  // never null
  KvCache cache_;
  RecurrentState state_;
  std::vector<int32_t> tokens_;  // what positions [0, n_past) hold
};

}  // namespace toy
