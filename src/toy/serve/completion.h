// serve/completion.h — one request's generation in one slot, independent of HTTP and threads.
//
// Feeds the prompt, samples up to max_tokens tokens and turns them into text through TextStream
// (stop strings, UTF-8); the text comes out piece by piece as it is released (Delta).
// Log-probabilities are those of the raw model distribution (log_softmax of the logits, before
// temperature, penalties and biases). The sampler is toy's Sampler, so temperature 0 gives
// exactly `toy infer --temp 0`'s tokens.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "toy/engines/decode.h"
#include "toy/engines/grammar.h"
#include "toy/engines/speculative.h"
#include "toy/serve/text_stream.h"
#include "toy/serve/tool_calls.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::serve {

struct GenerationSettings {
  int64_t max_tokens = 16;  // already capped so prompt + completion ≤ the context
  SamplerConfig sampler;
  std::vector<std::string> stop;
  int logprobs = -1;             // -1: none; k ≥ 0: chosen token + k alternatives per token
  bool prompt_logprobs = false;  // also score the prompt (echo + logprobs)
  bool ignore_eos = false;
  // Reuse the KV rows of the slot's previous request for the prompt prefix they share (llama.cpp's
  // cache_prompt). The logits are the same bits either way: each position's rows depend only on
  // the tokens up to it, not on how they were batched.
  bool cache_prompt = true;
  // Constrained decoding: only tokens that keep the answer a prefix of a sentence of this grammar
  // are sampled, and an end-of-generation token only once it is a whole sentence. A matcher at
  // the grammar's start: each generation copies it, so a request's choices share its tables.
  std::shared_ptr<const GrammarMatcher> grammar;
  // Speculative decoding (engines/speculative.h) when speculation.drafter is set: the slot's own
  // drafter. The tokens are the same as without; its counts go into the result.
  Speculation speculation;
};

struct TokenLogprob {
  int32_t id = 0;
  double logprob = 0;  // NaN for the first prompt token (nothing predicts it)
  std::vector<std::pair<int32_t, double>> top;
};

// Text released by one step, with the log-probabilities of the tokens that completed in it.
struct Delta {
  std::string text;
  std::vector<TokenLogprob> tokens;
};

struct CompletionResult {
  std::string text;                  // the answer (stop string excluded)
  std::vector<TokenLogprob> tokens;  // logprobs of the answer's tokens (when asked)
  std::vector<TokenLogprob> prompt;  // logprobs of the prompt's tokens (when asked)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV rows were reused, not fed (cache_prompt)
  std::string finish_reason;  // "stop" (end of text or a stop string), "length", or "tool_calls" (set by the caller)
  std::vector<ToolCall> tool_calls;  // chat with tools: the calls parsed out of the text (then not in `text`)
  int64_t draft_tokens = 0, draft_accepted = 0;  // speculative decoding: guesses verified, and kept
  bool cancelled = false;                        // ended early: the client went away
  std::string grammar_error;  // ended early: the grammar needs more than the matcher's bounds (grammar.h)
  double prompt_seconds = 0, generate_seconds = 0;
};

// One request's generation on one slot: the prompt as one batch, then one sampled token per
// step. It owns the sampler, the text stream and the logprob bookkeeping but feeds no generated
// token itself: the caller (DecodeLoop) feeds next_token() together with other slots' tokens and
// hands the logits back, so the answer does not depend on what else was in the batch — unless
// it speculates: then feed_with_draft() feeds next_token() and a draft after it on the slot's
// own, and the steps that draw a guessed token need no feed at all (needs_feed() false).
class Completion {
 public:
  Completion(DecodeEngine& engine, const Tokenizer& tokenizer, std::vector<int32_t> prompt,
             GenerationSettings settings);
  // Feeds the prompt: the part the engine does not already hold with cache_prompt (at least its
  // last token, whose logits are needed), all of it otherwise. Returns the prompt's logprobs when
  // prompt_logprobs is set (empty otherwise; that needs every prompt row, so nothing is reused).
  const std::vector<TokenLogprob>& prefill();
  // Samples the next token and returns the text it releases, with the logprobs of the tokens
  // that text completes. Afterwards either done(), or, when needs_feed(), next_token() is to be
  // fed (feed_with_draft(), else in a batch) and its logits passed to set_logits().
  Delta step();
  bool done() const { return done_; }
  bool needs_feed() const { return needs_feed_; }
  int32_t next_token() const { return next_; }
  void set_logits(std::span<const float> row);  // [n_vocab]
  // With speculation: drafts the tokens after next_token() and feeds them with it, alone. False
  // when there is no draft (nothing fed: next_token() goes in the batch).
  bool feed_with_draft();
  // Ends generation early (the client went away).
  void cancel();
  // May be called from any thread: a step under way ends as cancelled (the grammar matcher polls
  // it inside long steps); cancel() is still to be called.
  void request_cancel() { cancel_requested_->store(true); }
  // Once done(): the text held back so far (a possible stop-string prefix, an unfinished
  // character), and the final timing.
  Delta finish();
  const CompletionResult& result() const { return r_; }
  DecodeEngine& engine() const { return engine_; }

 private:
  Delta sample();  // step() but for the grammar's exceptions
  void end(const char* finish_reason);
  void take_tokens(Delta& d);
  // Sets the logits of the tokens the grammar does not allow to -inf; false when none is allowed.
  bool constrain(std::vector<float>& z);

  DecodeEngine& engine_;
  const Tokenizer& tokenizer_;
  GenerationSettings s_;
  std::vector<float> logits_;  // [n_vocab], for the next token
  Sampler sampler_;
  TextStream text_;
  std::vector<int32_t> history_;                    // prompt + generated
  std::vector<TokenLogprob> pending_;               // scored tokens whose text is not fully released yet
  std::vector<std::pair<size_t, size_t>> span_of_;  // [begin, end) of each pending token's bytes in text_
  std::chrono::steady_clock::time_point t_generate_;
  CompletionResult r_;
  int32_t next_ = -1;
  bool done_ = false, needs_feed_ = false;
  Verification draft_;  // the guesses fed after the token fed last (feed_with_draft)
  Tensor rows_;         // [k + 1, n_vocab]: the logits of that feed
  std::unique_ptr<std::atomic<bool>> cancel_requested_ = std::make_unique<std::atomic<bool>>(false);  // stays put
  std::optional<GrammarMatcher> grammar_;  // with a grammar: where the answer is in it
  std::vector<uint8_t> allowed_;           // [n_vocab], the grammar's mask of this step
};

}  // namespace toy::serve
