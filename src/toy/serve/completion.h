// serve/completion.h — one request's generation in one slot, independent of HTTP.
//
// Feeds the prompt, samples up to max_tokens tokens and turns them into text through TextStream
// (stop strings, UTF-8). The caller sees the answer as it is released, through on_delta, which
// it also uses to cancel (return false: the client went away). Log-probabilities are those of the
// raw model distribution (log_softmax of the logits, before temperature, penalties and biases).
// The sampler is toy's Sampler, so temperature 0 gives exactly `toy infer --temp 0`'s tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "toy/engines/decode.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::serve {

struct GenerationSettings {
  int64_t max_tokens = 16;                 // already capped so prompt + completion ≤ the context
  SamplerConfig sampler;
  std::vector<std::string> stop;
  int logprobs = -1;                       // -1: none; k ≥ 0: chosen token + k alternatives per token
  bool prompt_logprobs = false;            // also score the prompt (echo + logprobs)
  float presence_penalty = 0, frequency_penalty = 0;
  std::map<int32_t, float> logit_bias;
  bool ignore_eos = false;
};

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;                      // NaN for the first prompt token (nothing predicts it)
  std::vector<std::pair<int32_t, double>> top;
};

// Text released by one step, with the log-probabilities of the tokens that completed in it.
struct Delta {
  std::string text;
  std::vector<TokenLogprob> tokens;
};

struct CompletionResult {
  std::string text;                        // the answer (stop string excluded)
  std::vector<TokenLogprob> tokens;        // logprobs of the answer's tokens (when asked)
  std::vector<TokenLogprob> prompt;        // logprobs of the prompt's tokens (when asked)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::string finish_reason;               // "stop" (end of text or a stop string) or "length"
  bool cancelled = false;                  // on_delta returned false
  double prompt_seconds = 0, generate_seconds = 0;
};

// Resets the engine and runs. on_prompt (optional) is called once the prompt is evaluated, with
// its logprobs when prompt_logprobs is set; on_delta after every sampled token (often with empty
// text, so the caller can notice a vanished client) and once more at the end with the rest.
// Either returning false cancels.
using PromptHook = std::function<bool(const std::vector<TokenLogprob>& prompt_scores)>;
using DeltaHook = std::function<bool(const Delta&)>;
CompletionResult run_completion(DecodeEngine& engine, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                const GenerationSettings& settings, const DeltaHook& on_delta, const PromptHook& on_prompt = nullptr);

}  // namespace toy::serve
