// serve/slots.cpp — slot leasing with a FIFO wait queue.
#include "toy/serve/slots.h"

#include <algorithm>

namespace toy::serve {

SlotPool::SlotPool(const Model& model, int n_slots, int64_t n_ctx, DType kv_type, int max_queue)
    : n_ctx_(n_ctx), max_queue_(max_queue) {
  for (int i = 0; i < n_slots; ++i) engines_.push_back(std::make_unique<DecodeEngine>(model, n_ctx, kv_type));
  busy_.assign(size_t(n_slots), false);
  models_.resize(size_t(n_slots));
}

int SlotPool::free_slot() const {
  for (size_t i = 0; i < busy_.size(); ++i)
    if (!busy_[i]) return int(i);
  return -1;
}

std::optional<SlotPool::Lease> SlotPool::acquire() {
  std::unique_lock lk(mu_);
  if (closed_) return std::nullopt;
  if (waiting_.empty()) {
    if (int s = free_slot(); s >= 0) {
      busy_[size_t(s)] = true;
      return Lease(this, s);
    }
  }
  if (int(waiting_.size()) >= max_queue_) return std::nullopt;
  const uint64_t ticket = next_ticket_++;
  waiting_.push_back(ticket);
  cv_.wait(lk, [&] { return closed_ || (waiting_.front() == ticket && free_slot() >= 0); });
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
  cv_.notify_all();  // the next in line may be able to go too
  if (closed_) return std::nullopt;
  const int s = free_slot();
  busy_[size_t(s)] = true;
  return Lease(this, s);
}

void SlotPool::give_back(int slot) {
  {
    std::lock_guard lk(mu_);
    busy_[size_t(slot)] = false;
  }
  cv_.notify_all();
}

void SlotPool::Lease::release() {
  if (pool_) pool_->give_back(slot_);
  pool_ = nullptr;
}

void SlotPool::Lease::use_model(std::shared_ptr<const Model> m) const {
  DecodeEngine& e = engine();
  if (&e.model() == m.get()) return;
  e.set_model(*m);
  pool_->models_[size_t(slot_)] = std::move(m);  // only the lease holder touches its slot's entry
}

void SlotPool::close() {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

SlotPool::Stats SlotPool::stats() const {
  std::lock_guard lk(mu_);
  Stats s{.slots = int(busy_.size()), .waiting = int(waiting_.size()), .max_queue = max_queue_, .closed = closed_};
  s.busy = int(std::count(busy_.begin(), busy_.end(), true));
  return s;
}

std::vector<SlotPool::SlotState> SlotPool::slot_states() const {
  std::lock_guard lk(mu_);  // an idle slot's engine cannot be leased while mu_ is held
  std::vector<SlotState> out;
  for (size_t i = 0; i < busy_.size(); ++i)
    out.push_back({.busy = busy_[i], .n_cached = busy_[i] ? -1 : engines_[i]->n_past()});
  return out;
}

}  // namespace toy::serve
