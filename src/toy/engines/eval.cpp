// engines/eval.cpp — log-probabilities and the two perplexity windowing methods (see eval.h).
#include "toy/engines/eval.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace toy {

double log_sum_exp(std::span<const float> z) {
  const float mx = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (float v : z) s += std::exp(double(v) - double(mx));
  return double(mx) + std::log(s);
}

double token_logprob(std::span<const float> z, int32_t id) { return double(z[size_t(id)]) - log_sum_exp(z); }

std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> z, int k) {
  return top_logprobs(z, k, log_sum_exp(z));
}

std::vector<std::pair<int32_t, double>> top_logprobs(std::span<const float> z, int k, double lse) {
  std::vector<std::pair<int32_t, double>> r;
  if (k <= 0 || z.empty()) return r;
  std::vector<int32_t> idx(z.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t n = std::min(size_t(k), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + long(n), idx.end(), [&](int32_t a, int32_t b) {
    return z[size_t(a)] > z[size_t(b)] || (z[size_t(a)] == z[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < n; ++i) r.emplace_back(idx[i], double(z[size_t(idx[i])]) - lse);
  return r;
}

std::vector<TokenScore> score_logits(const Tensor& logits, std::span<const int32_t> ids, int top_k) {
  auto [T, V] = logits.dims<2>("score_logits: logits");
  if (size_t(T) != ids.size())
    throw std::invalid_argument("score_logits: " + std::to_string(T) + " rows for " + std::to_string(ids.size()) +
                                " ids");
  std::vector<TokenScore> out;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    std::span<const float> row(logits.data() + int64_t(t) * V, size_t(V));  // predicts ids[t + 1]
    const double lse = log_sum_exp(row);
    out.push_back(
        {.id = ids[t + 1], .logprob = double(row[size_t(ids[t + 1])]) - lse, .top = top_logprobs(row, top_k, lse)});
  }
  return out;
}

namespace {

// Running sums of the per-token negative log-likelihoods, as llama.cpp keeps them.
struct NllSum {
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  void add(std::span<const float> row, int32_t target) {
    const double v = -token_logprob(row, target);
    sum += v;
    sum2 += v * v;
    ++count;
  }
  double ppl() const { return std::exp(sum / double(count)); }
};

PerplexityResult finish(const NllSum& s, PerplexityResult r) {
  r.n_scored = s.count;
  r.nll = s.sum / double(s.count);
  r.ppl = std::exp(r.nll);
  // llama.cpp: var = E[v²] − E[v]²; stderr of the mean = sqrt(var / (n − 1)); scaled by ppl
  // (first-order propagation through exp).
  const double var = s.sum2 / double(s.count) - r.nll * r.nll;
  r.ppl_stderr = (var > 0 && s.count > 1) ? std::sqrt(var / double(s.count - 1)) * r.ppl : 0;
  return r;
}

// llama.cpp `perplexity()`: consecutive chunks of n_ctx, BOS in front, score the second half.
PerplexityResult chunked(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  const int64_t N = int64_t(tokens.size()), n_ctx = o.n_ctx;
  int64_t n_chunk = N / n_ctx;
  if (n_ctx < 3)
    throw std::invalid_argument("perplexity: chunks of fewer than 3 tokens score nothing (use a larger --ctx)");
  if (n_chunk == 0)
    throw std::invalid_argument("perplexity: " + std::to_string(N) + " tokens are fewer than one chunk of " +
                                std::to_string(n_ctx) + " (use a smaller --ctx)");
  if (o.max_windows > 0) n_chunk = std::min(n_chunk, o.max_windows);
  DecodeEngine engine(model, n_ctx, o.kv_type);
  const size_t V = size_t(model.config().n_vocab);
  const int64_t first = n_ctx / 2;  // the first half only gives context
  NllSum s;
  PerplexityResult r;
  r.n_tokens = N;
  r.n_windows = n_chunk;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t i = 0; i < n_chunk; ++i) {
    std::copy_n(tokens.begin() + i * n_ctx, n_ctx, chunk.begin());
    if (o.bos >= 0) chunk[0] = o.bos;  // llama.cpp overwrites the first token, it does not insert
    engine.reset();
    const Tensor logits = engine.feed(chunk);  // [n_ctx, V]
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const std::span<const float> row(logits.data() + size_t(j) * V, V);
      s.add(row, chunk[size_t(j + 1)]);
      if (o.scored) o.scored(row, chunk[size_t(j + 1)]);
    }
    r.window_ppl.push_back(s.ppl());
    if (o.progress) o.progress(i + 1, n_chunk);
  }
  return finish(s, std::move(r));
}

// Hugging Face's strided sliding window: every token from position 1 on is scored once, by the
// first window that contains it with at least one token before it.
PerplexityResult strided(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  const int64_t N = int64_t(tokens.size()), n_ctx = o.n_ctx, stride = o.stride;
  if (N < 2) throw std::invalid_argument("perplexity: need at least 2 tokens");
  int64_t total = 1;  // windows the loop below will run
  while ((total - 1) * stride + n_ctx < N) ++total;
  if (o.max_windows > 0) total = std::min(total, o.max_windows);
  DecodeEngine engine(model, n_ctx, o.kv_type);
  const size_t V = size_t(model.config().n_vocab);
  NllSum s;
  PerplexityResult r;
  r.n_tokens = N;
  int64_t prev_end = 0;
  for (int64_t begin = 0; r.n_windows < total; begin += stride) {
    const int64_t end = std::min(begin + n_ctx, N);
    engine.reset();
    const Tensor logits = engine.feed(tokens.subspan(size_t(begin), size_t(end - begin)));  // [end − begin, V]
    for (int64_t p = std::max(prev_end, begin + 1); p < end; ++p)  // row p − 1 − begin predicts token p
      s.add(std::span<const float>(logits.data() + size_t(p - 1 - begin) * V, V), tokens[size_t(p)]);
    prev_end = end;
    ++r.n_windows;
    r.window_ppl.push_back(s.ppl());
    if (o.progress) o.progress(r.n_windows, total);
    if (end == N) break;
  }
  return finish(s, std::move(r));
}

}  // namespace

namespace {

int64_t best(const std::vector<double>& score) {
  return int64_t(std::max_element(score.begin(), score.end()) - score.begin());  // the first of equals
}

}  // namespace

int64_t ChoiceScores::by_sum() const { return best(logprob); }

int64_t ChoiceScores::by_letter() const {
  std::vector<double> s;
  for (size_t c = 0; c < logprob.size(); ++c) s.push_back(logprob[c] / double(std::max<int64_t>(letters[c], 1)));
  return best(s);
}

int64_t ChoiceScores::by_token() const {
  std::vector<double> s;
  for (size_t c = 0; c < logprob.size(); ++c) s.push_back(logprob[c] / double(tokens[c]));
  return best(s);
}

ChoiceScores score_choices(const Model& model, const Tokenizer& tokenizer, const ChoiceTask& task, DType kv_type) {
  std::vector<std::vector<int32_t>> seqs;  // context + " " + choice, as tokens
  for (const std::string& choice : task.choices) seqs.push_back(tokenizer.encode(task.context + " " + choice, true));
  // The prefix every choice shares, leaving each at least one token to score.
  size_t shared = seqs[0].size();
  for (const std::vector<int32_t>& s : seqs) {
    shared = std::min(shared, s.size() - 1);
    while (shared > 0 && !std::equal(s.begin(), s.begin() + long(shared), seqs[0].begin())) --shared;
  }
  shared = std::max<size_t>(shared, 1);  // the first token has nothing before it
  size_t longest = 0;
  for (size_t c = 0; c < seqs.size(); ++c) {
    if (seqs[c].size() <= shared) throw std::invalid_argument("choice " + std::to_string(c) + " has no token to score");
    if (int64_t(seqs[c].size()) > model.config().n_ctx)
      throw std::invalid_argument("choice " + std::to_string(c) + " is " + std::to_string(seqs[c].size()) +
                                  " tokens with its context, beyond the model's context of " +
                                  std::to_string(model.config().n_ctx));
    longest = std::max(longest, seqs[c].size());
  }
  ChoiceScores out;
  DecodeEngine engine(model, int64_t(longest), kv_type);
  const size_t V = size_t(model.config().n_vocab);
  for (size_t c = 0; c < seqs.size(); ++c) {
    const std::vector<int32_t>& s = seqs[c];
    engine.reset();
    const Tensor logits = engine.feed(s);  // [T, V], row t predicts s[t + 1]
    double sum = 0;
    for (size_t t = shared; t < s.size(); ++t)
      sum += token_logprob(std::span<const float>(logits.data() + (t - 1) * V, V), s[t]);
    out.logprob.push_back(sum);
    out.tokens.push_back(int64_t(s.size() - shared));
    const std::string text = " " + task.choices[c];
    out.letters.push_back(std::count_if(text.begin(), text.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
  }
  return out;
}

PerplexityResult perplexity(const Model& model, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  if (o.n_ctx < 2) throw std::invalid_argument("perplexity: the context must be at least 2 tokens");
  if (o.stride < 0 || o.stride > o.n_ctx)
    throw std::invalid_argument("perplexity: the stride must be between 1 and the context (" + std::to_string(o.n_ctx) +
                                ")");
  return o.stride == 0 ? chunked(model, tokens, o) : strided(model, tokens, o);
}

}  // namespace toy
