// serve/metrics.cpp — counters and their Prometheus text (see metrics.h).
#include "toy/serve/metrics.h"

#include <cstdio>

namespace toy::serve {

void Metrics::count_request(int status) {
  std::lock_guard lk(mu_);
  ++requests_[status];
}

void Metrics::count_completion(const CompletionResult& r) {
  std::lock_guard lk(mu_);
  ++completions_;
  // Only the tokens that went through the model count towards the prompt throughput.
  prompt_tokens_ += uint64_t(r.prompt_tokens - r.cached_tokens);
  generated_tokens_ += uint64_t(r.completion_tokens);
  if (r.cached_tokens > 0) ++cache_hits_;
  cached_tokens_ += uint64_t(r.cached_tokens);
  prompt_seconds_ += r.prompt_seconds;
  generate_seconds_ += r.generate_seconds;
  draft_tokens_ += uint64_t(r.draft_tokens);
  draft_accepted_ += uint64_t(r.draft_accepted);
}

void Metrics::count_embeddings(int64_t inputs, int64_t tokens) {
  std::lock_guard lk(mu_);
  embeddings_ += uint64_t(inputs);
  embedding_tokens_ += uint64_t(tokens);
}

namespace {

// One metric: "# HELP", "# TYPE" and its sample lines.
void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  out += std::string("# HELP toy_") + name + " " + help + "\n# TYPE toy_" + name + " " + type + "\ntoy_" + name + " " +
         buf + "\n";
}

}  // namespace

std::string Metrics::prometheus(const SlotPool::Stats& slots) const {
  std::lock_guard lk(mu_);
  std::string out = "# HELP toy_requests_total HTTP requests answered, by status.\n# TYPE toy_requests_total counter\n";
  for (auto [status, n] : requests_)
    out += "toy_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
  metric(out, "completions_total", "counter", "Completions generated (ended, cancelled or not).", double(completions_));
  metric(out, "prompt_tokens_total", "counter", "Prompt tokens fed through the model (cached ones excluded).",
         double(prompt_tokens_));
  metric(out, "generated_tokens_total", "counter", "Tokens generated.", double(generated_tokens_));
  metric(out, "prompt_seconds_total", "counter", "Seconds spent feeding prompts.", prompt_seconds_);
  metric(out, "generation_seconds_total", "counter", "Seconds from a prompt's end to its completion's end.",
         generate_seconds_);
  metric(out, "prompt_tokens_per_second", "gauge", "Prompt throughput: prompt tokens / prompt seconds so far.",
         prompt_seconds_ > 0 ? double(prompt_tokens_) / prompt_seconds_ : 0);
  metric(out, "generation_tokens_per_second", "gauge",
         "Generation throughput of one request: generated tokens / generation seconds so far.",
         generate_seconds_ > 0 ? double(generated_tokens_) / generate_seconds_ : 0);
  metric(out, "prompt_cache_hits_total", "counter", "Completions that reused KV rows of a previous prompt.",
         double(cache_hits_));
  metric(out, "prompt_cached_tokens_total", "counter", "Prompt tokens whose KV rows were reused.",
         double(cached_tokens_));
  metric(out, "draft_tokens_total", "counter", "Speculative decoding: draft tokens verified.", double(draft_tokens_));
  metric(out, "draft_tokens_accepted_total", "counter", "Speculative decoding: draft tokens the model's draws kept.",
         double(draft_accepted_));
  metric(out, "embeddings_total", "counter", "Inputs embedded (/v1/embeddings).", double(embeddings_));
  metric(out, "embedding_tokens_total", "counter", "Tokens of the inputs embedded.", double(embedding_tokens_));
  metric(out, "requests_waiting", "gauge", "Requests waiting for a slot.", slots.waiting);
  metric(out, "slots_busy", "gauge", "Slots generating.", slots.busy);
  metric(out, "slots_total", "gauge", "Slots (--parallel).", slots.slots);
  return out;
}

}  // namespace toy::serve
