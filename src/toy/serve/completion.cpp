// serve/completion.cpp — prompt, sampling loop, stop strings and logprob bookkeeping.
#include "toy/serve/completion.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "toy/engines/eval.h"

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
std::vector<float> feed_prompt(DecodeEngine& engine, std::span<const int32_t> prompt, int top,
                               std::vector<TokenLogprob>* scores) {
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
      if (begin + i + 1 < prompt.size())
        scores->push_back(score(row, prompt[begin + i + 1], top));
      else
        last.assign(row.begin(), row.end());
    }
  }
  return last;
}

}  // namespace

Completion::Completion(DecodeEngine& engine, const Tokenizer& tokenizer, std::vector<int32_t> prompt,
                       GenerationSettings settings)
    : engine_(engine),
      tokenizer_(tokenizer),
      s_(std::move(settings)),
      sampler_(s_.sampler),
      text_(s_.stop),
      history_(std::move(prompt)) {
  r_.prompt_tokens = int64_t(history_.size());
  r_.finish_reason = "length";
  if (s_.grammar) {
    grammar_.emplace(*s_.grammar);
    grammar_->set_cancel(cancel_requested_.get());
  }
}

const std::vector<TokenLogprob>& Completion::prefill() {
  // The longest prefix the engine holds already, short of the prompt's last token.
  size_t reuse = 0;
  if (s_.cache_prompt && !s_.prompt_logprobs) {
    const std::vector<int32_t>& held = engine_.tokens();
    const size_t most = std::min(held.size(), history_.size() - 1);
    while (reuse < most && held[reuse] == history_[reuse]) ++reuse;
  }
  engine_.truncate(int64_t(reuse));
  reuse = size_t(engine_.n_past());  // a recurrent model (qwen35) starts over rather than rewind
  r_.cached_tokens = int64_t(reuse);
  const auto t0 = clock_type::now();
  logits_ = feed_prompt(engine_, std::span<const int32_t>(history_).subspan(reuse), std::max(s_.logprobs, 0),
                        s_.prompt_logprobs ? &r_.prompt : nullptr);
  r_.prompt_seconds = seconds_since(t0);
  t_generate_ = clock_type::now();
  if (s_.max_tokens <= 0) done_ = true;
  return r_.prompt;
}

// Moves into the delta the pending tokens that are done: those whose bytes are all released, or
// after a stop, those that begin before the stop string (the others are dropped with it).
void Completion::take_tokens(Delta& d) {
  size_t n = 0;
  while (n < pending_.size() &&
         (text_.stopped() ? span_of_[n].first < text_.stop_at() : span_of_[n].second <= text_.released()))
    ++n;
  d.tokens.assign(pending_.begin(), pending_.begin() + long(n));
  r_.tokens.insert(r_.tokens.end(), d.tokens.begin(), d.tokens.end());
  if (text_.stopped()) n = pending_.size();
  pending_.erase(pending_.begin(), pending_.begin() + long(n));
  span_of_.erase(span_of_.begin(), span_of_.begin() + long(n));
}

void Completion::end(const char* finish_reason) {
  r_.finish_reason = finish_reason;
  done_ = true;
  draft_.forget(engine_);
}

bool Completion::feed_with_draft() {
  if (!s_.speculation.drafter) return false;
  std::vector<int32_t> draft = s_.speculation.draft_after(engine_, next_, s_.max_tokens - r_.completion_tokens - 1);
  if (draft.empty()) return false;
  r_.draft_tokens += int64_t(draft.size());
  rows_ = draft_.feed(engine_, next_, std::move(draft));  // [k + 1, V]
  set_logits(std::span<const float>(rows_.data(), size_t(rows_.size(1))));
  return true;
}

bool Completion::constrain(std::vector<float>& z) {
  const std::vector<int32_t>& ends = grammar_->trie().end_tokens();
  std::vector<float> end_logits;  // the end-of-generation tokens' logits, kept where the grammar may end
  for (int32_t id : ends) end_logits.push_back(size_t(id) < z.size() ? z[size_t(id)] : 0.0f);
  grammar_->allowed(allowed_);
  bool any = false;
  for (size_t id = 0; id < z.size(); ++id) {
    const bool ok = id < allowed_.size() && allowed_[id];
    if (!ok) z[id] = -std::numeric_limits<float>::infinity();
    any = any || ok;
  }
  if (grammar_->can_end() && !s_.ignore_eos)
    for (size_t i = 0; i < ends.size(); ++i)
      if (size_t(ends[i]) < z.size()) {
        z[size_t(ends[i])] = end_logits[i];
        any = true;
      }
  return any;
}

Delta Completion::step() {
  try {
    return sample();
  } catch (const GrammarCancelled&) {
    cancel();
  } catch (const GrammarLimitError& e) {
    r_.grammar_error = e.what();
    end("error");
  }
  return {};
}

Delta Completion::sample() {
  Delta d;
  int32_t next;
  if (grammar_) {
    std::vector<float> z = logits_;
    if (grammar_->finished() || !constrain(z)) {  // nothing may follow: the answer is whole
      end("stop");
      return d;
    }
    next = sampler_.sample(z, history_);
    // Every token the grammar allows banned by logit_bias: the grammar's likeliest, never one it refuses.
    if (std::isinf(z[size_t(next)])) next = argmax(z);
  } else {
    next = sampler_.sample(logits_, history_);
  }
  if (!s_.ignore_eos && tokenizer_.is_eog(next)) {
    end("stop");
    return d;
  }
  ++r_.completion_tokens;
  history_.push_back(next);
  if (grammar_ && !grammar_->accept(grammar_->trie().text(next)))
    throw std::logic_error("sampled token " + std::to_string(next) + " is outside the grammar");
  const size_t begin = text_.size();
  d.text = text_.push(tokenizer_.piece(next));
  if (s_.logprobs >= 0) {
    pending_.push_back(score(logits_, next, s_.logprobs));
    span_of_.emplace_back(begin, text_.size());
  }
  take_tokens(d);
  r_.text += d.text;
  if (text_.stopped())
    end("stop");
  else if (r_.completion_tokens == s_.max_tokens || draft_.valid(engine_) >= engine_.n_ctx())
    end("length");
  else if (draft_.take(next)) {  // a guess drawn: fed already, its row at hand
    ++r_.draft_accepted;
    const size_t V = size_t(rows_.size(1)), row = size_t(draft_.row());
    logits_.assign(rows_.data() + row * V, rows_.data() + (row + 1) * V);
  } else {
    draft_.forget(engine_);
    next_ = next;
    needs_feed_ = true;
  }
  return d;
}

void Completion::set_logits(std::span<const float> row) {
  logits_.assign(row.begin(), row.end());
  needs_feed_ = false;
}

void Completion::cancel() {
  r_.cancelled = true;
  done_ = true;
  draft_.forget(engine_);
}

Delta Completion::finish() {
  Delta d;
  if (!r_.cancelled) {
    d.text = text_.finish();
    take_tokens(d);
    r_.text += d.text;
  }
  r_.generate_seconds = seconds_since(t_generate_);
  return d;
}

}  // namespace toy::serve
