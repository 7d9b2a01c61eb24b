// serve/completion.cpp — prompt, sampling loop, stop strings and logprob bookkeeping.
#include "toy/serve/completion.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "toy/engines/eval.h"
#include "toy/serve/text_stream.h"

namespace toy::serve {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

TokenLogprob score(std::span<const float> row, int32_t id, int top) {
  const double lse = log_sum_exp(row);
  return {.id = id, .logprob = double(row[size_t(id)]) - lse, .top = top_logprobs(row, top, lse)};
}

// Feeds the prompt and returns the logits of its last position. With `scores`, the prompt goes in
// chunks whose full logits are scored and dropped, so a long prompt never holds [T, n_vocab] at once.
std::vector<float> feed_prompt(DecodeEngine& engine, std::span<const int32_t> prompt, int top, std::vector<TokenLogprob>* scores) {
  if (!scores) {
    const Tensor last = engine.feed(prompt, /*last_only=*/true);  // [1, V], the prompt in one batch as `toy infer` does
    return std::vector<float>(last.data(), last.data() + last.numel());
  }
  const size_t V = size_t(engine.model().config().n_vocab), kChunk = 256;
  scores->push_back({.id = prompt[0], .logprob = std::numeric_limits<double>::quiet_NaN(), .top = {}});
  std::vector<float> last;
  for (size_t begin = 0; begin < prompt.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, prompt.size() - begin);
    const Tensor logits = engine.feed(prompt.subspan(begin, n));  // [n, V]
    for (size_t i = 0; i < n; ++i) {
      std::span<const float> row(logits.data() + i * V, V);  // predicts prompt[begin + i + 1]
      if (begin + i + 1 < prompt.size()) scores->push_back(score(row, prompt[begin + i + 1], top));
      else last.assign(row.begin(), row.end());
    }
  }
  return last;
}

// OpenAI's penalties and logit_bias on a copy of the logits (the sampler then sees the result).
void adjust(std::vector<float>& z, const GenerationSettings& s, const std::unordered_map<int32_t, int>& counts) {
  for (auto [id, bias] : s.logit_bias)
    if (size_t(id) < z.size()) z[size_t(id)] += bias;
  if (s.presence_penalty != 0 || s.frequency_penalty != 0)
    for (auto [id, n] : counts) z[size_t(id)] -= float(n) * s.frequency_penalty + s.presence_penalty;
}

}  // namespace

CompletionResult run_completion(DecodeEngine& engine, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                const GenerationSettings& s, const DeltaHook& on_delta, const PromptHook& on_prompt) {
  CompletionResult r;
  r.prompt_tokens = int64_t(prompt.size());
  engine.reset();
  const auto t0 = clock_type::now();
  std::vector<float> logits = feed_prompt(engine, prompt, std::max(s.logprobs, 0), s.prompt_logprobs ? &r.prompt : nullptr);
  r.prompt_seconds = seconds_since(t0);
  const auto t1 = clock_type::now();
  if (on_prompt && !on_prompt(r.prompt)) {
    r.cancelled = true;
    return r;
  }

  Sampler sampler(s.sampler);
  TextStream text(s.stop);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::unordered_map<int32_t, int> counts;  // generated tokens, for the penalties
  std::vector<TokenLogprob> pending;        // scored tokens whose text is not fully released yet
  std::vector<std::pair<size_t, size_t>> span_of;  // [begin, end) of each pending token's bytes in `text`
  const bool adjusts = !s.logit_bias.empty() || s.presence_penalty != 0 || s.frequency_penalty != 0;

  // Moves into the delta the pending tokens that are done: those whose bytes are all released, or
  // after a stop, those that begin before the stop string (the others are dropped with it).
  auto take_tokens = [&](Delta& d) {
    size_t n = 0;
    while (n < pending.size() && (text.stopped() ? span_of[n].first < text.stop_at() : span_of[n].second <= text.released())) ++n;
    d.tokens.assign(pending.begin(), pending.begin() + long(n));
    r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
    if (text.stopped()) n = pending.size();
    pending.erase(pending.begin(), pending.begin() + long(n));
    span_of.erase(span_of.begin(), span_of.begin() + long(n));
  };

  r.finish_reason = "length";
  for (int64_t i = 0; i < s.max_tokens; ++i) {
    int32_t next;
    if (adjusts) {
      std::vector<float> z = logits;
      adjust(z, s, counts);
      next = sampler.sample(z, history);
    } else {
      next = sampler.sample(logits, history);
    }
    if (!s.ignore_eos && tokenizer.is_eog(next)) {
      r.finish_reason = "stop";
      break;
    }
    ++r.completion_tokens;
    history.push_back(next);
    ++counts[next];
    const size_t begin = text.size();
    Delta d;
    d.text = text.push(tokenizer.piece(next));
    if (s.logprobs >= 0) {
      pending.push_back(score(logits, next, s.logprobs));
      span_of.emplace_back(begin, text.size());
    }
    take_tokens(d);
    r.text += d.text;
    if (text.stopped()) {
      r.finish_reason = "stop";
      if (!on_delta(d)) r.cancelled = true;
      r.generate_seconds = seconds_since(t1);
      return r;
    }
    if (!on_delta(d)) {
      r.cancelled = true;
      r.generate_seconds = seconds_since(t1);
      return r;
    }
    if (i + 1 == s.max_tokens || engine.n_past() >= engine.n_ctx()) break;
    const Tensor last = engine.feed(std::span<const int32_t>(&next, 1), /*last_only=*/true);  // [1, V]
    logits.assign(last.data(), last.data() + last.numel());
  }
  Delta d;
  d.text = text.finish();
  take_tokens(d);
  r.text += d.text;
  if (!on_delta(d)) r.cancelled = true;
  r.generate_seconds = seconds_since(t1);
  return r;
}

}  // namespace toy::serve
