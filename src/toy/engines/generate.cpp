// engines/generate.cpp — prompt as one batch, then one token at a time through the KV cache.
#include "toy/engines/generate.h"

namespace toy {

GenerateResult generate(DecodeEngine& engine, Sampler& sampler, std::span<const int32_t> prompt, int64_t n_predict,
                        const GenerateHooks& hooks) {
  using clock = std::chrono::steady_clock;
  GenerateResult r;
  r.prompt_tokens = int64_t(prompt.size());
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  auto t0 = clock::now();
  Tensor logits = engine.feed(prompt, /*last_only=*/true);
  auto t1 = clock::now();
  r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.finish_reason = "length";
  for (int64_t i = 0; i < n_predict; ++i) {
    const int32_t next = sampler.sample(std::span<const float>(logits.data(), size_t(logits.numel())), history);
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
    if (i + 1 == n_predict || engine.n_past() >= engine.n_ctx()) break;
    logits = engine.feed(std::span<const int32_t>(&next, 1), true);
  }
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace toy
