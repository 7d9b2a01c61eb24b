// engines/eval.h — L4: scoring text with a model: per-token log-probabilities and perplexity.
//
// Log-probabilities are those of the raw model distribution, log_softmax(logits), computed in
// double; no temperature, penalty or truncation is applied. Perplexity follows one of two
// documented windowing methods (docs/eval.md):
//   * Chunks (stride 0): llama.cpp's `llama-perplexity`. The tokens are cut into consecutive
//     chunks of n_ctx tokens (a partial tail is dropped); the first token of every chunk is
//     replaced by BOS when the tokenizer adds BOS; only the second half of each chunk is scored:
//     the tokens at chunk positions n_ctx/2 + 1 … n_ctx − 1.
//   * Strided (stride > 0): Hugging Face's "perplexity of fixed-length models" sliding window.
//     Windows [begin, begin + n_ctx) with begin = 0, stride, 2·stride, …; each window scores the
//     tokens not scored by an earlier window (so every token from position 1 on is scored
//     exactly once, with at least n_ctx − stride tokens of context once the window is full).
// Not here: tokenization (the caller passes ids), output formatting (cli/cmd_eval.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "toy/engines/decode.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy {

// log(Σ exp(z)) of one logits row, in double with the max subtracted first.
double log_sum_exp(std::span<const float> logits);

// log_softmax(logits)[id].
double token_logprob(std::span<const float> logits, int32_t id);

// The k most likely tokens of a row with their log-probabilities, most likely first; ties go to
// the lower id (as argmax). `lse` is log_sum_exp(logits) when the caller has it already.
std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> logits, int k);
std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> logits, int k, double lse);

// One scored token: how likely the model found it given everything before it.
struct TokenScore {
  int32_t id = 0;
  double logprob = 0;                           // log p(id | tokens before it)
  std::vector<std::pair<int32_t, double>> top;  // the top-k alternatives at this position
};

// Scores ids[1 …] from the logits of ids ([T, n_vocab], row t predicts ids[t + 1]).
// Returns ids.size() − 1 scores; ids[0] is context only.
std::vector<TokenScore> score_logits(const Tensor& logits, std::span<const int32_t> ids, int top_k);

struct PerplexityOptions {
  int64_t n_ctx = 512;         // tokens per window (llama.cpp's default -c 512)
  int64_t stride = 0;          // 0: llama.cpp chunks; > 0: strided sliding window (≤ n_ctx)
  int32_t bos = -1;            // chunk mode: replaces each chunk's first token (−1: no replacement)
  int64_t max_windows = 0;     // 0: all; else stop after this many chunks/windows (llama.cpp --chunks)
  DType kv_type = DType::F32;  // the KV cache's dtype (F32 or F16)
  std::function<void(int64_t done, int64_t total)> progress;  // after every window
  // Chunk mode: each scored position in order, its logits row and the token that follows (the
  // KL divergence's base file and comparison, engines/kl_divergence.h).
  std::function<void(std::span<const float> logits, int32_t next)> scored;
};

struct PerplexityResult {
  int64_t n_tokens = 0;            // tokens in the input
  int64_t n_scored = 0;            // tokens whose log-probability entered the mean
  int64_t n_windows = 0;           // forward passes of at most n_ctx tokens
  double nll = 0;                  // mean negative log-likelihood of the scored tokens (nats)
  double ppl = 0;                  // exp(nll)
  double ppl_stderr = 0;           // llama.cpp's uncertainty estimate: ppl · sqrt(var(nll_i) / (n − 1))
  std::vector<double> window_ppl;  // running perplexity after each window (llama.cpp's "[i]ppl" list)
};

// Throws std::invalid_argument when there are too few tokens for one window (chunk mode needs
// n_ctx tokens, strided mode 2) or the options are inconsistent.
PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options);

// A multiple-choice task: which choice is the likeliest continuation of the context.
struct ChoiceTask {
  std::string context;
  std::vector<std::string> choices;  // at least 2
  int64_t label = 0;                 // the right one
};

// How each choice scored. Each choice is tokenized as context + " " + choice (BOS as the
// tokenizer says; lm-eval's and llama-perplexity's delimiter); its tokens after the prefix all
// the task's choices share are scored: log p of each given the tokens before it, summed.
struct ChoiceScores {
  std::vector<double> logprob;   // Σ log p over the choice's scored tokens
  std::vector<int64_t> tokens;   // how many were scored
  std::vector<int64_t> letters;  // code points of " " + choice (lm-eval's acc_norm divides by them)
  // The pick by each rule (ties to the first): the sum (lm-eval's acc), the sum per letter
  // (lm-eval's acc_norm), the mean per token (llama-perplexity --hellaswag's acc_norm).
  int64_t by_sum() const;
  int64_t by_letter() const;
  int64_t by_token() const;
};

// Throws std::invalid_argument when a choice does not fit the model's context.
ChoiceScores score_choices(const Model& model, const Tokenizer& tokenizer, const ChoiceTask& task,
                           DType kv_type = DType::F32);

}  // namespace toy
