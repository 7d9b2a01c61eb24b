// serve/decode_loop.h — the generation of every running request, batched across slots.
//
// A request's prompt is fed on its own HTTP thread (one batch, as `toy infer` does); the request
// then joins this loop as a Run. The loop's one thread repeats a step:
//   1. every Run ready to go samples its next token (its own sampler, seed, stop strings,
//      logprobs, max_tokens) and the text it releases is handed to the Run's HTTP thread;
//   2. the new tokens of all Runs that go on are fed through the model as one batch [B, 1]
//      (DecodeEngine::feed_batch), so each weight matrix is read once per step, not once per
//      request; Runs with other LoRA scales (another model, adapters.h) form a batch of their own.
//      A Run that speculates (toy serve -md, --spec-type ngram) feeds its token with a draft on its
//      own instead, and while it draws the guessed tokens it needs no feed at all.
// Batched logits equal single-sequence logits bit for bit, so an answer does not depend on what
// ran beside it. A Run whose client has not taken its text (kMaxBacklog deltas) sits out steps
// without holding the others back; a cancelled Run (client gone) ends at the next step, or within
// a long grammar step under way (Completion::request_cancel). When a Run ends its HTTP thread
// takes its slot back (take_lease) for the request's next choice, or gives it back; a Run dropped
// without that gives it back as it goes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "toy/serve/completion.h"
#include "toy/serve/slots.h"

namespace toy::serve {

class DecodeLoop;

// One request in the loop. Its HTTP thread waits for output and may cancel; everything else
// (the completion, the slot) belongs to the loop until the Run has ended.
class Run {
 public:
  Run(DecodeLoop& loop, SlotPool::Lease lease, Completion completion, bool stream);
  // Waits at most `timeout` for text or the end; moves the text released so far into `deltas`
  // (streamed Runs only). Returns true once the Run has ended: result() and error() are final.
  bool wait(std::chrono::milliseconds timeout, std::vector<Delta>& deltas);
  void cancel();  // the client went away: ends at the next step
  const CompletionResult& result() const { return completion_.result(); }
  const std::string& error() const { return error_; }  // non-empty: generation failed (a bug)
  int slot() const { return slot_; }
  SlotPool::Lease take_lease();  // once wait() has returned true: the slot, back to the request

 private:
  friend class DecodeLoop;
  DecodeLoop& loop_;
  std::optional<SlotPool::Lease> lease_;
  Completion completion_;
  const bool stream_;
  const int slot_;
  // Guarded by the loop's mutex:
  std::deque<Delta> out_;  // released text the HTTP thread has not taken yet
  bool cancelled_ = false, ended_ = false;
  std::string error_;
  std::condition_variable cv_;  // the HTTP thread waits here
};

class DecodeLoop {
 public:
  static constexpr size_t kMaxBacklog = 16;  // deltas a streamed Run may have waiting for its client

  DecodeLoop();
  ~DecodeLoop();  // after every Run has ended
  DecodeLoop(const DecodeLoop&) = delete;
  DecodeLoop& operator=(const DecodeLoop&) = delete;

  // Hands a prefilled completion (on the slot of `lease`) to the loop.
  std::shared_ptr<Run> start(SlotPool::Lease lease, Completion completion, bool stream);

  struct Stats {
    uint64_t steps = 0;   // batched forward passes so far
    uint64_t tokens = 0;  // tokens they fed: tokens / steps is the mean batch
  };
  Stats stats();

 private:
  friend class Run;
  void loop();
  bool ready(const Run& r) const { return r.cancelled_ || r.out_.size() < kMaxBacklog; }
  void publish(Run& r, Delta d);                    // with mu_ held
  void end(Run& r, const std::string& error = {});  // with mu_ held

  std::mutex mu_;
  std::condition_variable cv_;  // the loop waits here
  std::vector<std::shared_ptr<Run>> runs_;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace toy::serve
