// kernels/thread_pool.cpp — a persistent pool of worker threads behind parallel_for.
//
// Decoding one token calls parallel_for ~100 times, so a call must cost about a microsecond,
// not the tens of microseconds of waking sleeping threads. Workers therefore spin (with a
// pause instruction) for kSpin after each job before they block on a condition variable; the
// caller takes part in the work and spins (then yields) until the workers are done.
//
// A job is a range [0, n) cut into chunks whose size depends only on n and grain; threads
// take chunks from an atomic counter. Which thread runs a chunk varies from run to run, which
// is why every kernel computes each output element inside one chunk, in an order that does
// not depend on the chunk boundaries: results are then identical for any thread count.
//
// Nested calls (parallel_for inside a chunk) and calls from a second thread while the pool is
// busy run serially on the calling thread, over the same chunks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "toy/kernels/kernels.h"

namespace toy::kernels {
namespace {

constexpr auto kSpin = std::chrono::microseconds(100);  // busy-wait before sleeping
constexpr int64_t kMaxChunks = 256;                      // chunks per call, at most (grain permitting)

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() holds, for at most `limit`; returns whether it does.
template <class Pred> bool spin_until(Pred pred, std::chrono::microseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}

thread_local bool t_inside_job = false;  // this thread is running a chunk

int default_threads() {
  if (const char* env = std::getenv("TOY_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? int(hw) : 1;
}

struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 1, n_chunks = 0;
  std::atomic<int64_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;

  void run_chunks() {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < n_chunks;) {
      try {
        (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      } catch (...) {
        std::lock_guard lk(error_mu);
        if (!error) error = std::current_exception();
        next.store(n_chunks, std::memory_order_relaxed);  // skip the remaining chunks
      }
    }
  }
};

class Pool {
 public:
  Pool() { start(default_threads()); }
  ~Pool() { stop(); }

  int threads() const { return int(workers_.size()) + 1; }

  void resize(int n) {
    std::lock_guard busy(busy_);  // waits for a running job
    stop();
    start(n);
  }

  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    const int64_t chunk = std::max({grain, int64_t(1), (n + kMaxChunks - 1) / kMaxChunks});
    const int64_t n_chunks = (n + chunk - 1) / chunk;
    std::unique_lock busy(busy_, std::defer_lock);
    if (n_chunks == 1 || workers_.empty() || t_inside_job || !busy.try_lock()) {
      for (int64_t c = 0; c < n_chunks; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
      return;
    }
    Job job;
    job.fn = &fn;
    job.n = n;
    job.chunk = chunk;
    job.n_chunks = n_chunks;
    job_ = &job;
    pending_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes job_
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lk(mu_);
      cv_.notify_all();
    }
    t_inside_job = true;
    job.run_chunks();
    t_inside_job = false;
    auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(done, kSpin))
      while (!done()) std::this_thread::yield();
    job_ = nullptr;
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  void start(int n) {
    if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
    stopping_ = false;
    // A worker waits for the generation after the current one, read here: read in the new
    // thread, it could already be the generation of a job started before the thread ran.
    const uint64_t current = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, current] { worker(current); });
  }

  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_seq_cst);
      cv_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void worker(uint64_t seen) {
    t_inside_job = true;  // a nested parallel_for from a chunk runs inline
    for (;;) {
      auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(changed, kSpin)) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lk, changed);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stopping_) return;
      job_->run_chunks();
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;                     // held by the thread running a job
  std::mutex mu_;                       // for sleeping workers
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0}; // bumped to start a job (or to stop)
  std::atomic<int> sleepers_{0};
  std::atomic<int> pending_{0};         // workers still in the current job
  Job* job_ = nullptr;
  bool stopping_ = false;               // written under mu_ before a generation bump
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_num_threads(int n) { pool().resize(n); }
int num_threads() { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  pool().parallel_for(n, grain, fn);
}

}  // namespace toy::kernels
