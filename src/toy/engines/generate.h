// engines/generate.h — the generation loop of `toy infer` (the server batches its own: serve/decode_loop.h).
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "toy/engines/decode.h"
#include "toy/engines/speculative.h"

namespace toy {

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (an end-of-generation token is not included)
  double prompt_seconds = 0, generate_seconds = 0;
  int64_t prompt_tokens = 0;
  std::string finish_reason;  // "stop" (end-of-generation token or callback), "length"
};

struct GenerateHooks {
  std::function<bool(int32_t)> is_eog;    // ends generation without emitting the token
  std::function<bool(int32_t)> on_token;  // called per generated token; false stops ("stop")
};

// Feeds `prompt` as one batch at the engine's current position, then samples up to
// `n_predict` tokens (stopping early at the context end: finish_reason "length"). With `spec`,
// each token sampled is fed with a draft of the tokens after it (engines/speculative.h): the same
// tokens, hooks called in the same order, the engine left at the same place, in fewer passes; spec's
// counts add up what was drafted and accepted.
GenerateResult generate(DecodeEngine& engine, Sampler& sampler, std::span<const int32_t> prompt, int64_t n_predict,
                        const GenerateHooks& hooks, Speculation* spec = nullptr);

}  // namespace toy
