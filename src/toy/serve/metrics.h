// serve/metrics.h — the server's counters, for GET /metrics (Prometheus text format) and /props.
//
// Every request counts once by its HTTP status, as the request log writes it (including requests
// refused before they reached a route: 401, 404, 413, 429 ...); every completion adds its tokens
// and times, every embeddings request its inputs and tokens. Throughputs are totals over totals (tokens / seconds spent on them), as llama-server
// reports them. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "toy/serve/completion.h"
#include "toy/serve/slots.h"

namespace toy::serve {

class Metrics {
 public:
  void count_request(int status);
  void count_completion(const CompletionResult& r);
  void count_embeddings(int64_t inputs, int64_t tokens);  // one /v1/embeddings request answered

  // The Prometheus text exposition of the counters and of the slots' state now.
  std::string prometheus(const SlotPool::Stats& slots) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;  // HTTP status -> requests answered with it
  uint64_t completions_ = 0;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t cache_hits_ = 0, cached_tokens_ = 0;  // completions that reused KV rows, and how many rows
  double prompt_seconds_ = 0, generate_seconds_ = 0;
  uint64_t draft_tokens_ = 0, draft_accepted_ = 0;  // speculative decoding's guesses, and the ones kept
  uint64_t embeddings_ = 0, embedding_tokens_ = 0;  // inputs embedded, and their tokens
};

}  // namespace toy::serve
