// engines/generate.cpp — prompt as one batch, then one token at a time through the KV cache, or a
// token and its draft at a time (engines/speculative.h says why the tokens are the same).
#include "toy/engines/generate.h"

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
  Verification v;  // the draft fed with the token fed last
  while (n_predict > 0) {
    const int32_t next = sampler.sample(std::span<const float>(rows.data() + v.row() * V, size_t(V)), history);
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
    if (v.take(next)) {  // fed already, with its row of logits
      ++spec->accepted;
      continue;
    }
    v.forget(engine);
    if (engine.n_past() >= engine.n_ctx()) break;
    std::vector<int32_t> draft;
    if (spec) {
      draft = spec->draft_after(engine, next, n_predict - int64_t(r.tokens.size()) - 1);
      spec->drafted += int64_t(draft.size());
    }
    rows = v.feed(engine, next, std::move(draft));
  }
  v.forget(engine);
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace toy
