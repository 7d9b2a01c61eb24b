// engines/distributed_mpi.cpp — the ProcessGroup of MPI_COMM_WORLD (built when CMake finds MPI).
//
// Only the main thread calls MPI (MPI_THREAD_FUNNELED); the kernels' thread pool never does.
// MPI's default error handler (MPI_ERRORS_ARE_FATAL) stays: a failed call ends the whole job,
// and a rank that dies makes the launcher end the others, so no rank waits forever.
#ifdef TOY_MPI
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "toy/engines/distributed.h"

namespace toy {

namespace {

// Elements per bucket of the gradient exchange (16 MiB of floats): buffers stay bounded for
// any model size and MPI's int counts cannot overflow. The sum does not depend on it.
constexpr int64_t kBucket = int64_t(1) << 22;

class MpiWorld final : public ProcessGroup {
 public:
  MpiWorld() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    std::vector<char> all(sizeof host * size_t(size_));
    MPI_Allgather(host, sizeof host, MPI_CHAR, all.data(), sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size_; ++r) hosts_.emplace_back(all.data() + sizeof host * size_t(r));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }

  // Per bucket [b0, b1): rank o owns [lo(o), lo(o + 1)); an all-to-all brings the owner every
  // rank's slices (received in rank order, so in micro-batch order k = r·m + j), the owner adds
  // them k = 0 … K − 1, and an all-gather gives every rank every owned slice.
  void sum_in_order(std::span<const float> mine, int64_t m, std::span<float> sum) override {
    const int64_t P = int64_t(sum.size()), N = size_;
    if (m < 1 || int64_t(mine.size()) != m * P) throw std::invalid_argument("sum_in_order: mine is not [m, P]");
    if (m * kBucket > INT_MAX) throw std::invalid_argument("sum_in_order: too many micro-batches per rank");
    const size_t ranks = size_t(N);
    std::vector<int> send_n(ranks), send_at(ranks), recv_n(ranks), recv_at(ranks), own_n(ranks), own_at(ranks);
    std::vector<float> send, recv, owned;
    for (int64_t b0 = 0; b0 < P; b0 += kBucket) {
      const int64_t len = std::min(kBucket, P - b0);
      auto lo = [&](int64_t o) { return len * o / N; };  // offsets in the bucket
      const int64_t my_lo = lo(rank_), my_len = lo(rank_ + 1) - my_lo;
      send.clear();
      for (int64_t o = 0; o < N; ++o) {
        send_at[size_t(o)] = int(send.size());
        for (int64_t j = 0; j < m; ++j) {
          const float* g = mine.data() + j * P + b0;
          send.insert(send.end(), g + lo(o), g + lo(o + 1));
        }
        send_n[size_t(o)] = int(send.size()) - send_at[size_t(o)];
        recv_n[size_t(o)] = int(m * my_len);
        recv_at[size_t(o)] = int(o * m * my_len);
        own_n[size_t(o)] = int(lo(o + 1) - lo(o));
        own_at[size_t(o)] = int(lo(o));
      }
      recv.resize(size_t(N * m * my_len));  // [K, my_len]
      MPI_Alltoallv(send.data(), send_n.data(), send_at.data(), MPI_FLOAT, recv.data(), recv_n.data(), recv_at.data(),
                    MPI_FLOAT, MPI_COMM_WORLD);
      owned.assign(recv.begin(), recv.begin() + my_len);  // g_0
      for (int64_t k = 1; k < N * m; ++k)
        for (int64_t i = 0; i < my_len; ++i) owned[size_t(i)] += recv[size_t(k * my_len + i)];
      MPI_Allgatherv(owned.data(), int(my_len), MPI_FLOAT, sum.data() + b0, own_n.data(), own_at.data(), MPI_FLOAT,
                     MPI_COMM_WORLD);
      bytes_sent_ += int64_t(sizeof(float)) * (m * (len - my_len) + my_len * (N - 1));
    }
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
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
};

}  // namespace

ProcessGroup& mpi_world() {
  static MpiWorld w;
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
