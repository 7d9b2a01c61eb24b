// kernels/thread_pool.cpp — a persistent pool of worker threads behind parallel_for.
//
// Decoding one token calls parallel_for ~100 times, so a call must cost about a microsecond,
// not the tens of microseconds of waking sleeping threads. Workers therefore spin (with a
// pause instruction) for kSpin after each job before they block on a condition variable; the
// caller takes part in the work and spins (then yields) until the chunks that others claimed
// are done.
//
// A job is a range [0, n) cut into chunks whose size depends only on n and grain; threads
// claim chunks one at a time. Which thread runs a chunk varies from run to run, which
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
constexpr int64_t kMaxChunks = 256;                     // chunks per call, at most (fits 16 bits)

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until pred() holds, for at most `limit`; returns whether it does.
template <class Pred>
bool spin_until(Pred pred, std::chrono::microseconds limit) {
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

// One parallel_for call in flight. Claiming a chunk is one compare-and-swap on `word`, which
// packs the job id (bits 32-63), its number of chunks (16-31) and the next unclaimed chunk
// (0-15). A successful claim proves the job is current and unfinished, so the plain fields
// (fn, n, chunk) are this job's: the caller writes them before publishing the word and leaves
// them alone until every claimed chunk is done. The caller therefore waits only for chunks
// that were claimed, never for a worker that is asleep or descheduled and claimed nothing.
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
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const uint32_t id = job_id(word_.load(std::memory_order_relaxed)) + 1;
    word_.store(pack(id, uint32_t(n_chunks), 0), std::memory_order_seq_cst);  // publishes the job
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lk(mu_);
      cv_.notify_all();
    }
    t_inside_job = true;
    run_chunks(id);
    t_inside_job = false;
    auto done = [&] { return done_.load(std::memory_order_acquire) == n_chunks; };
    if (!spin_until(done, kSpin))
      while (!done()) std::this_thread::yield();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static uint64_t pack(uint32_t id, uint32_t n_chunks, uint32_t next) {
    return uint64_t(id) << 32 | uint64_t(n_chunks) << 16 | next;
  }
  static uint32_t job_id(uint64_t word) { return uint32_t(word >> 32); }

  // Claims and runs chunks of job `id` until none is left (or the job is no longer current).
  void run_chunks(uint32_t id) {
    uint64_t w = word_.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t n_chunks = (w >> 16) & 0xffff, c = w & 0xffff;
      if (job_id(w) != id || c >= n_chunks) return;
      if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          (*fn_)(int64_t(c) * chunk_, std::min(n_, int64_t(c + 1) * chunk_));
        } catch (...) {
          std::lock_guard lk(error_mu_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);  // the remaining chunks are skipped
        }
      }
      done_.fetch_add(1, std::memory_order_release);
      w = word_.load(std::memory_order_acquire);
    }
  }

  void start(int n) {
    if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
    stopping_.store(false);
    // A worker waits for a job after the current one, read here: read in the new thread, it
    // could already be the id of a job started before the thread ran.
    const uint32_t current = job_id(word_.load(std::memory_order_acquire));
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, current] { worker(current); });
  }

  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_.store(true);
      word_.store(pack(job_id(word_.load()) + 1, 0, 0), std::memory_order_seq_cst);  // an empty job
      cv_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void worker(uint32_t seen) {
    t_inside_job = true;  // a nested parallel_for from a chunk runs inline
    for (;;) {
      auto changed = [&] { return job_id(word_.load(std::memory_order_seq_cst)) != seen; };
      if (!spin_until(changed, kSpin)) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lk, changed);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = job_id(word_.load(std::memory_order_acquire));
      if (stopping_.load()) return;
      run_chunks(seen);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the thread running a job
  std::mutex mu_;    // for sleeping workers
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> word_{0};    // job id | number of chunks | next chunk (see above)
  std::atomic<int64_t> done_{0};     // chunks of the current job finished
  std::atomic<bool> failed_{false};  // a chunk of the current job threw
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::mutex error_mu_;
  std::exception_ptr error_;
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
