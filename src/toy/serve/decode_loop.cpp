// serve/decode_loop.cpp — the loop thread: sample every ready Run, then one batched forward.
#include "toy/serve/decode_loop.h"

#include <algorithm>

namespace toy::serve {

Run::Run(DecodeLoop& loop, SlotPool::Lease lease, Completion completion, bool stream)
    : loop_(loop),
      lease_(std::move(lease)),
      completion_(std::move(completion)),
      stream_(stream),
      slot_(lease_->slot()) {}

bool Run::wait(std::chrono::milliseconds timeout, std::vector<Delta>& deltas) {
  std::unique_lock lk(loop_.mu_);
  cv_.wait_for(lk, timeout, [&] { return ended_ || !out_.empty(); });
  if (!out_.empty()) {
    deltas.insert(deltas.end(), std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
    out_.clear();
    loop_.cv_.notify_one();  // it may have been waiting for this Run to have room
  }
  return ended_;
}

void Run::cancel() {
  std::lock_guard lk(loop_.mu_);
  cancelled_ = true;
  completion_.request_cancel();  // a long grammar step under way ends now, not after it
  loop_.cv_.notify_one();
}

DecodeLoop::DecodeLoop() : thread_([this] { loop(); }) {}

DecodeLoop::~DecodeLoop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

SlotPool::Lease Run::take_lease() {
  std::lock_guard lk(loop_.mu_);
  SlotPool::Lease l = std::move(*lease_);
  lease_.reset();
  return l;
}

std::shared_ptr<Run> DecodeLoop::start(SlotPool::Lease lease, Completion completion, bool stream) {
  auto run = std::make_shared<Run>(*this, std::move(lease), std::move(completion), stream);
  std::lock_guard lk(mu_);
  runs_.push_back(run);
  cv_.notify_one();
  return run;
}

DecodeLoop::Stats DecodeLoop::stats() {
  std::lock_guard lk(mu_);
  return stats_;
}

void DecodeLoop::publish(Run& r, Delta d) {
  if (!r.stream_ || (d.text.empty() && d.tokens.empty())) return;
  r.out_.push_back(std::move(d));
  r.cv_.notify_one();
}

void DecodeLoop::end(Run& r, const std::string& error) {
  r.ended_ = true;
  r.error_ = error;
  r.cv_.notify_one();
  runs_.erase(std::find_if(runs_.begin(), runs_.end(), [&](const auto& p) { return p.get() == &r; }));
}

void DecodeLoop::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] {
      return (stopping_ && runs_.empty()) ||
             std::any_of(runs_.begin(), runs_.end(), [&](const auto& r) { return ready(*r); });
    });
    if (runs_.empty()) return;
    std::vector<std::shared_ptr<Run>> now;  // the Runs that take this step
    std::vector<bool> cancelled;
    for (const auto& r : runs_)
      if (ready(*r)) {
        now.push_back(r);
        cancelled.push_back(r->cancelled_);
      }
    lk.unlock();

    // 1. Sample each Run's next token.
    struct Outcome {
      std::vector<Delta> deltas;
      bool ended = false;
      std::string error;
    };
    std::vector<Outcome> out(now.size());
    std::vector<Run*> going;  // the Runs that feed a token
    std::vector<DecodeEngine*> engines;
    std::vector<int32_t> ids;
    for (size_t i = 0; i < now.size(); ++i) {
      Completion& c = now[i]->completion_;
      try {
        if (cancelled[i])
          c.cancel();
        else if (!c.done())
          out[i].deltas.push_back(c.step());  // done() already: max_tokens 0
        if (c.done()) {
          out[i].deltas.push_back(c.finish());
          out[i].ended = true;
        } else if (c.needs_feed()) {  // not when it drew a guess fed with its draft
          going.push_back(now[i].get());
          engines.push_back(&c.engine());
          ids.push_back(c.next_token());
        }
      } catch (const std::exception& e) {
        out[i] = {.deltas = {}, .ended = true, .error = e.what()};
      }
    }
    lk.lock();
    for (size_t i = 0; i < now.size(); ++i) {
      for (Delta& d : out[i].deltas) publish(*now[i], std::move(d));
      if (out[i].ended) end(*now[i], out[i].error);
    }
    lk.unlock();

    // 2. Feed all their tokens as one batch per model (while the HTTP threads send the text):
    // Runs with other LoRA scales run another model (adapters.h). A speculating Run with a draft
    // feeds its token and the draft on its own.
    std::string error;
    uint64_t batches = 0;
    try {
      std::vector<bool> fed(going.size(), false);
      for (size_t b = 0; b < going.size(); ++b)
        if ((fed[b] = going[b]->completion_.feed_with_draft())) ++batches;
      for (size_t first = 0; first < going.size(); ++first) {
        if (fed[first]) continue;
        std::vector<size_t> batch;  // the Runs on the model of Run `first`
        for (size_t b = first; b < going.size(); ++b)
          if (!fed[b] && &engines[b]->model() == &engines[first]->model()) batch.push_back(b);
        std::vector<DecodeEngine*> batch_engines;
        std::vector<int32_t> batch_ids;
        for (size_t b : batch) {
          batch_engines.push_back(engines[b]);
          batch_ids.push_back(ids[b]);
          fed[b] = true;
        }
        const Tensor logits = DecodeEngine::feed_batch(batch_engines, batch_ids);  // [B, V]
        const size_t V = size_t(logits.size(1));
        for (size_t i = 0; i < batch.size(); ++i)
          going[batch[i]]->completion_.set_logits(std::span<const float>(logits.data() + i * V, V));
        ++batches;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    lk.lock();
    if (!error.empty())
      for (Run* r : going) end(*r, error);
    stats_ = {.steps = stats_.steps + batches, .tokens = stats_.tokens + going.size()};
  }
}

}  // namespace toy::serve
