// engines/speculative.cpp — the two drafters: a smaller model, and n-gram lookup in the context.
#include "toy/engines/speculative.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace toy {

namespace {

// softmax(z)[id] at temperature 1.
double probability(std::span<const float> z, int32_t id) {
  double total = 0;
  for (float x : z) total += std::exp(double(x) - double(z[size_t(id)]));
  return 1.0 / total;
}

}  // namespace

void check_draft_vocabulary(const Model& draft, const Model& target) {
  if (draft.config().n_vocab != target.config().n_vocab)
    throw std::invalid_argument("the draft model has " + std::to_string(draft.config().n_vocab) +
                                " tokens in its vocabulary, the target " + std::to_string(target.config().n_vocab));
}

std::vector<int32_t> Speculation::draft_after(const DecodeEngine& engine, int32_t next, int64_t room) const {
  std::vector<int32_t> context = engine.tokens();
  context.push_back(next);
  const int64_t n = std::min({n_max, room, engine.n_ctx() - engine.n_past() - 1, engine.exact_feed_limit() - 1});
  std::vector<int32_t> draft = drafter->draft(context, n, p_min);
  if (int64_t(draft.size()) < n_min) draft.clear();
  return draft;
}

Tensor Verification::feed(DecodeEngine& engine, int32_t next, std::vector<int32_t> draft) {
  if (!draft.empty()) mark_ = engine.mark();
  std::vector<int32_t> fed = {next};
  fed.insert(fed.end(), draft.begin(), draft.end());
  draft_ = std::move(draft);
  taken_ = 0;
  return engine.feed(fed, /*last_only=*/draft_.empty());
}

bool Verification::take(int32_t token) {
  if (taken_ == draft_.size() || draft_[taken_] != token) return false;
  ++taken_;
  return true;
}

void Verification::forget(DecodeEngine& engine) {
  if (valid(engine) < engine.n_past()) engine.rewind(*mark_, valid(engine));
  draft_.clear();
  taken_ = 0;
}

ModelDrafter::ModelDrafter(const Model& draft, const Model& target, int64_t n_ctx, DType kv_type)
    : engine_(draft, std::min(n_ctx, draft.config().n_ctx), kv_type) {
  check_draft_vocabulary(draft, target);
}

std::vector<int32_t> ModelDrafter::draft(std::span<const int32_t> context, int64_t n, float p_min) {
  n = std::min(n, engine_.n_ctx() - int64_t(context.size()));  // the context and n − 1 drafts are fed
  if (n <= 0 || context.empty()) return {};
  // Keep the cached prefix of the context, but feed at least its last token (for its logits).
  const std::vector<int32_t>& held = engine_.tokens();
  const size_t common =
      size_t(std::mismatch(held.begin(), held.end(), context.begin(), context.end()).first - held.begin());
  const int64_t keep = int64_t(std::min(common, context.size() - 1));
  if (mark_ && keep >= mark_->n_past)
    engine_.rewind(*mark_, keep);
  else
    engine_.truncate(keep);  // a recurrent draft model may start over here
  Tensor logits = engine_.feed(context.subspan(size_t(engine_.n_past())), /*last_only=*/true);  // [1, V]
  mark_ = engine_.mark();
  std::vector<int32_t> out;
  for (;;) {
    const std::span<const float> z(logits.data(), size_t(logits.numel()));
    const int32_t best = argmax(z);
    if (p_min > 0 && probability(z, best) < p_min) break;
    out.push_back(best);
    if (int64_t(out.size()) == n) break;
    logits = engine_.feed(std::span<const int32_t>(&best, 1), true);
  }
  return out;
}

NgramDrafter::NgramDrafter(int64_t n, int64_t m) : n_(n), m_(m) {
  if (n < 1 || m < 1)
    throw std::invalid_argument("n-gram lookup: n (" + std::to_string(n) + ") and m (" + std::to_string(m) +
                                ") must be at least 1");
}

std::vector<int32_t> NgramDrafter::draft(std::span<const int32_t> context, int64_t n, float) {
  const int64_t L = int64_t(context.size());
  if (n <= 0 || L <= n_) return {};
  const auto pattern = context.subspan(size_t(L - n_));  // the last n_ tokens
  for (int64_t j = L - n_ - 1; j >= 0; --j)              // an earlier match, with a token after it
    if (std::equal(pattern.begin(), pattern.end(), context.begin() + j)) {
      const int64_t from = j + n_, count = std::min({m_, n, L - from});
      return {context.begin() + from, context.begin() + from + count};
    }
  return {};
}

}  // namespace toy
