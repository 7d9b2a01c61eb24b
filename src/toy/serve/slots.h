// serve/slots.h — `--parallel N` decode slots (each a DecodeEngine with its own KV cache) and the
// bounded queue of requests waiting for one.
//
// A request holds a slot (a Lease) for as long as it generates; answers of concurrent requests
// are therefore independent. Waiting requests are served first come, first served; when
// `max_queue` are waiting already, acquire() refuses at once (the server answers 503), and after
// close() every waiter is refused (shutdown).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "toy/engines/decode.h"

namespace toy::serve {

class SlotPool {
 public:
  SlotPool(const Model& model, int n_slots, int64_t n_ctx, DType kv_type, int max_queue);

  class Lease {
   public:
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.pool_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease() { release(); }
    DecodeEngine& engine() const { return *pool_->engines_[size_t(slot_)]; }
    int slot() const { return slot_; }
    // Runs the slot's engine on `m` (the served model with some LoRA scales, adapters.h) unless it
    // does already; a switch forgets the cached prompt. The slot holds `m` until the next switch.
    void use_model(std::shared_ptr<const Model> m) const;
    void release();  // gives the slot back early (idempotent)

   private:
    friend class SlotPool;
    Lease(SlotPool* p, int s) : pool_(p), slot_(s) {}
    SlotPool* pool_;
    int slot_;
  };

  std::optional<Lease> acquire();  // nullopt: the queue is full, or the pool is closed
  void close();                    // refuse waiters and new requests from now on

  struct Stats {
    int slots = 0, busy = 0, waiting = 0, max_queue = 0;
    bool closed = false;
  };
  Stats stats() const;
  // Each slot now: whether it is generating, and (when idle) how many tokens its KV cache holds
  // for the next request to reuse (-1 while busy: the decode loop owns its engine then).
  struct SlotState {
    bool busy = false;
    int64_t n_cached = -1;
  };
  std::vector<SlotState> slot_states() const;
  int64_t n_ctx() const { return n_ctx_; }

 private:
  int free_slot() const;  // -1 when all are busy; call with mu_ held
  void give_back(int slot);

  const int64_t n_ctx_;
  const int max_queue_;
  std::vector<std::unique_ptr<DecodeEngine>> engines_;
  std::vector<std::shared_ptr<const Model>> models_;  // what each engine runs, when not the pool's model
  std::vector<bool> busy_;
  std::deque<uint64_t> waiting_;  // tickets, in arrival order
  uint64_t next_ticket_ = 0;
  bool closed_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace toy::serve
