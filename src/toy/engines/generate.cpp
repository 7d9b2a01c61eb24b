// engines/generate.cpp — prompt as one batch, then one token at a time through the KV cache, or a
// token and its draft at a time (engines/speculative.h says why the tokens are the same).
#include "toy/engines/generate.h"

#include <algorithm>
#include <optional>

namespace toy {

GenerateResult generate(DecodeEngine& engine, Sampler& sampler, std::span<const int32_t> prompt, int64_t n_predict,
                        const GenerateHooks& hooks, Speculation* spec) {
  using clock = std::chrono::steady_clock;
  GenerateResult r;
  r.prompt_tokens = int64_t(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  auto t0 = clock::now();
  Tensor rows = engine.feed(prompt, /*last_only=*/true);  // [k + 1, V]: after the token fed last, then its draft
  auto t1 = clock::now();
  r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.finish_reason = "length";
  const int64_t V = rows.size(-1);
  std::vector<int32_t> draft;
  std::optional<DecodeEngine::Mark> mark;  // before the token fed last and its draft
  int64_t row = 0;                         // the row sampled from; positions [0, n_past − k + row) stay
  auto valid = [&] { return engine.n_past() - int64_t(draft.size()) + row; };
  auto forget_the_rest = [&] {  // the draft tokens past `row` were not taken
    if (valid() < engine.n_past()) engine.rewind(*mark, valid());
  };
  while (n_predict > 0) {
    const int32_t next = sampler.sample(std::span<const float>(rows.data() + row * V, size_t(V)), history);
    if (hooks.is_eog && hooks.is_eog(next)) {
      r.finish_reason = "stop";
      break;
    }
    r.tokens.push_back(next);
    history.push_back(next);
    if (hooks.on_token && !hooks.on_token(next)) {
      r.finish_reason = "stop";
      break;
    }
    if (int64_t(r.tokens.size()) == n_predict) break;
    if (row < int64_t(draft.size()) && draft[size_t(row)] == next) {  // fed already, with its row of logits
      ++spec->accepted;
      ++row;
      continue;
    }
    forget_the_rest();
    if (engine.n_past() >= engine.n_ctx()) break;
    draft.clear();
    row = 0;
    if (spec) {
      std::vector<int32_t> context = engine.tokens();
      context.push_back(next);
      const int64_t n = std::min({spec->n_max, n_predict - int64_t(r.tokens.size()) - 1,
                                  engine.n_ctx() - engine.n_past() - 1, engine.exact_feed_limit() - 1});
      draft = spec->drafter->draft(context, n, spec->p_min);
      if (int64_t(draft.size()) < spec->n_min) draft.clear();
      spec->drafted += int64_t(draft.size());
    }
    if (!draft.empty()) mark = engine.mark();
    std::vector<int32_t> fed = {next};
    fed.insert(fed.end(), draft.begin(), draft.end());
    rows = engine.feed(fed, /*last_only=*/draft.empty());
  }
  forget_the_rest();
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace toy
