// engines/distributed_mpi.cpp — the ProcessGroup of MPI_COMM_WORLD (built when CMake finds MPI).
//
// Only the main thread calls MPI (MPI_THREAD_FUNNELED); the kernels' thread pool never does.
// MPI's default error handler (MPI_ERRORS_ARE_FATAL) stays: a failed call ends the whole job,
// and a rank that dies makes the launcher end the others, so no rank waits forever.
#ifdef TOY_MPI
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <stdexcept>

#include "toy/engines/distributed.h"

namespace toy {

namespace {

class MpiWorld final : public ProcessGroup {
 public:
  explicit MpiWorld(ExchangeOptions o) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    std::vector<char> all(sizeof host * size_t(size_));
    MPI_Allgather(host, sizeof host, MPI_CHAR, all.data(), sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size_; ++r) hosts_.emplace_back(all.data() + sizeof host * size_t(r));
    int64_t options[2] = {o.bucket, o.overlap};  // rank 0's: every rank must cut the same buckets
    MPI_Bcast(options, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
    options_ = {options[0], options[1] != 0};
    void* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    tag_ub_ = found ? *static_cast<int*>(tag_ub) : 32767;  // the least MPI guarantees
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }

  // The parameter vector [P] is cut into buckets of options_.bucket floats; in each bucket
  // [b0, b0 + len) rank o owns the slice [lo(o), lo(o + 1)) (offsets in the bucket). A bucket
  // goes through two exchanges, all non-blocking, matched by their tags (2·b, 2·b + 1) whatever
  // order the buckets start in:
  //   1. send: every rank sends each owner o its m rows of o's slice; the owner receives the
  //      other ranks' rows (rank r's are micro-batches k = r·m … r·m + m − 1);
  //   2. sum:  once they have all arrived, the owner adds its slice's K rows in the order
  //      k = 0 … K − 1 into `sum`, and sends the result to every rank (an all-gather).
  // A bucket is sent as soon as all its elements are ready. MPI moves data only while the
  // process is inside an MPI call, and only the main thread calls MPI (FUNNELED), so ready()
  // also tests the buckets in flight and sums those that have arrived: the backward pass gives
  // MPI a call each time a parameter's gradient is final, which is often enough for the
  // transfers to proceed under the computation. A communication thread would progress MPI
  // continuously but needs MPI_THREAD_MULTIPLE and would spin on a core that the kernels' threads
  // need (processes × threads = cores).
  void start_sum(std::span<const float> mine, int64_t m, std::span<float> sum) override {
    const int64_t P = int64_t(sum.size()), N = size_, B = options_.bucket;
    if (m < 1 || int64_t(mine.size()) != m * P) throw std::invalid_argument("start_sum: mine is not [m, P]");
    if (m * B > INT_MAX || P > INT_MAX) throw std::invalid_argument("start_sum: too many floats for MPI's int counts");
    if (2 * ((P + B - 1) / B) > tag_ub_)
      throw std::invalid_argument("start_sum: " + std::to_string((P + B - 1) / B) + " buckets exceed MPI's tags (" +
                                  std::to_string(tag_ub_) + "): raise TOY_GRAD_BUCKET");
    mine_ = mine, m_ = m, sum_ = sum;
    buckets_.clear();
    int64_t received_at = 0;
    for (int64_t b0 = 0; b0 < P; b0 += B) {
      Bucket& b = buckets_.emplace_back();
      b.begin = b0, b.len = std::min(B, P - b0), b.received_at = received_at;
      received_at += (N - 1) * m * (lo(b, rank_ + 1) - lo(b, rank_));
    }
    received_.resize(size_t(received_at));  // [buckets][other ranks, m, my slice]
    in_flight_.clear();
    sent_.clear();
    unready_ = P;
  }

  void ready(int64_t offset, int64_t count) override {
    unready_ -= count;
    for (int64_t i = offset / options_.bucket; i < int64_t(buckets_.size()) && i * options_.bucket < offset + count;
         ++i) {  // the buckets that [offset, offset + count) overlaps
      Bucket& b = buckets_[size_t(i)];
      b.ready += std::min(offset + count, b.begin + b.len) - std::max(offset, b.begin);
      if (b.ready > b.len) throw std::logic_error("ready: an element was reported twice");
      if (b.ready == b.len && options_.overlap) send(b);
    }
    int done = 0;  // a call into MPI, for the transfers in flight to proceed
    MPI_Testall(int(in_flight_.size()), in_flight_.data(), &done, MPI_STATUSES_IGNORE);
    std::erase_if(sent_, [&](Bucket* b) { return sum_if_arrived(*b, false); });
  }

  void finish_sum() override {
    const auto t0 = std::chrono::steady_clock::now();
    for (Bucket& b : buckets_) {
      if (b.ready != b.len) throw std::logic_error("finish_sum: part of the gradient was never ready");
      send(b);
    }
    for (Bucket& b : buckets_) sum_if_arrived(b, true);
    MPI_Waitall(int(in_flight_.size()), in_flight_.data(), MPI_STATUSES_IGNORE);
    sum_stats_.sums++;
    sum_stats_.buckets += int64_t(buckets_.size());
    sum_stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<double> all_gather(std::span<const double> mine) override {
    std::vector<double> all(mine.size() * size_t(size_));
    MPI_Allgather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(), int(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD);
    bytes_sent_ += int64_t(sizeof(double) * mine.size()) * (size_ - 1);
    return all;
  }

  bool any(bool mine) override {
    int v = mine, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return all != 0;
  }

  int64_t broadcast(int64_t v) override {
    MPI_Bcast(&v, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    return v;
  }

 private:
  struct Bucket {
    int64_t begin = 0, len = 0;  // elements [begin, begin + len) of the parameter vector
    int64_t received_at = 0;     // where the other ranks' rows of my slice go in received_
    int64_t ready = 0;           // elements of the last micro-batch's gradient final so far
    enum class State { waiting, sent, summed } state = State::waiting;
    std::vector<MPI_Request> arriving;  // exchange 1: the other ranks' rows of my slice
  };

  int64_t lo(const Bucket& b, int64_t o) const { return b.len * o / size_; }  // rank o's slice starts here

  // Exchange 1 of bucket b: my m rows of every other rank's slice to it, its rows of my slice from it.
  void send(Bucket& b) {
    if (b.state != Bucket::State::waiting) return;
    const int64_t P = int64_t(sum_.size()), my_len = lo(b, rank_ + 1) - lo(b, rank_);
    const int tag = int(2 * (&b - buckets_.data()));
    float* into = received_.data() + b.received_at;
    for (int o = 0; o < size_; ++o) {
      const int64_t len = lo(b, o + 1) - lo(b, o);
      if (o == rank_) continue;
      if (len > 0) {  // rows j = 0 … m − 1 of o's slice, P floats apart in mine_
        MPI_Datatype rows;
        MPI_Type_vector(int(m_), int(len), int(P), MPI_FLOAT, &rows);
        MPI_Type_commit(&rows);
        MPI_Isend(mine_.data() + b.begin + lo(b, o), 1, rows, o, tag, MPI_COMM_WORLD, &in_flight_.emplace_back());
        MPI_Type_free(&rows);  // freed once the send no longer needs it
        bytes_sent_ += int64_t(sizeof(float)) * m_ * len;
      }
      if (my_len > 0) {
        MPI_Irecv(into, int(m_ * my_len), MPI_FLOAT, o, tag, MPI_COMM_WORLD, &b.arriving.emplace_back());
        into += m_ * my_len;
      }
    }
    b.state = Bucket::State::sent;
    sent_.push_back(&b);
    if (unready_ > 0) sum_stats_.started_early++;  // more of the gradient to come: the backward pass goes on
  }

  // Exchange 2 of bucket b, once exchange 1 has arrived (`wait`: wait for it): my slice of the
  // sum, added in micro-batch order, to every other rank, and theirs from them into sum_.
  // True when the bucket is summed.
  bool sum_if_arrived(Bucket& b, bool wait) {
    if (b.state != Bucket::State::sent) return b.state == Bucket::State::summed;
    int arrived = 1;
    if (wait)
      MPI_Waitall(int(b.arriving.size()), b.arriving.data(), MPI_STATUSES_IGNORE);
    else
      MPI_Testall(int(b.arriving.size()), b.arriving.data(), &arrived, MPI_STATUSES_IGNORE);
    if (!arrived) return false;
    b.arriving.clear();
    const int64_t P = int64_t(sum_.size()), m = m_, my_lo = lo(b, rank_), my_len = lo(b, rank_ + 1) - my_lo;
    auto row = [&](int64_t k) -> const float* {  // micro-batch k's gradient of my slice
      const int64_t r = k / m, j = k % m;
      if (r == rank_) return mine_.data() + j * P + b.begin + my_lo;
      return received_.data() + b.received_at + ((r < rank_ ? r : r - 1) * m + j) * my_len;
    };
    float* owned = sum_.data() + b.begin + my_lo;
    std::copy(row(0), row(0) + my_len, owned);  // g_0
    for (int64_t k = 1; k < size_ * m; ++k) {
      const float* g = row(k);
      for (int64_t i = 0; i < my_len; ++i) owned[i] += g[i];
    }
    const int tag = int(2 * (&b - buckets_.data()) + 1);
    for (int o = 0; o < size_; ++o) {
      const int64_t len = lo(b, o + 1) - lo(b, o);
      if (o == rank_) continue;
      if (my_len > 0) {
        MPI_Isend(owned, int(my_len), MPI_FLOAT, o, tag, MPI_COMM_WORLD, &in_flight_.emplace_back());
        bytes_sent_ += int64_t(sizeof(float)) * my_len;
      }
      if (len > 0)
        MPI_Irecv(sum_.data() + b.begin + lo(b, o), int(len), MPI_FLOAT, o, tag, MPI_COMM_WORLD,
                  &in_flight_.emplace_back());
    }
    b.state = Bucket::State::summed;
    return true;
  }

  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  ExchangeOptions options_;
  int tag_ub_ = 32767;
  // The sum in progress.
  std::span<const float> mine_;  // [m, P]
  int64_t m_ = 1;
  std::span<float> sum_;  // [P]
  std::vector<Bucket> buckets_;
  std::vector<Bucket*> sent_;           // buckets whose exchange 1 is under way
  std::vector<float> received_;         // the other ranks' rows of my slices, bucket after bucket
  std::vector<MPI_Request> in_flight_;  // sends, and exchange 2's receives: waited for by finish_sum
  int64_t unready_ = 0;                 // elements of the gradient not yet ready
};

}  // namespace

ProcessGroup& mpi_world(const ExchangeOptions& o) {
  static MpiWorld w(o);
  return w;
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace toy
#endif
