// engines/distributed.cpp — the one-process group, and finding out whether a launcher started us.
// The MPI group is in distributed_mpi.cpp (built only when CMake finds MPI: TOY_MPI).
#include "toy/engines/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace toy {

#ifdef TOY_MPI
ProcessGroup& mpi_world(const ExchangeOptions& o);  // distributed_mpi.cpp
void mpi_finalize();
#endif

int ProcessGroup::local_size() const {
  const std::vector<std::string>& h = hosts();
  return int(std::count(h.begin(), h.end(), h[size_t(rank())]));
}

namespace {

class OneProcess final : public ProcessGroup {
 public:
  OneProcess() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    hosts_ = {host};
  }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  // Nothing to exchange: finish_sum adds the micro-batches in order.
  void start_sum(std::span<const float> mine, int64_t m, std::span<float> sum) override {
    if (m < 1 || mine.size() != size_t(m) * sum.size()) throw std::invalid_argument("start_sum: mine is not [m, P]");
    mine_ = mine, m_ = m, sum_ = sum;
  }
  void ready(int64_t, int64_t) override {}
  void finish_sum() override {
    const size_t P = sum_.size();
    std::copy(mine_.begin(), mine_.begin() + ptrdiff_t(P), sum_.begin());
    for (int64_t k = 1; k < m_; ++k)
      for (size_t i = 0; i < P; ++i) sum_[i] += mine_[size_t(k) * P + i];
    ++sum_stats_.sums;
  }
  std::vector<double> all_gather(std::span<const double> mine) override { return {mine.begin(), mine.end()}; }
  bool any(bool mine) override { return mine; }
  int64_t broadcast(int64_t v) override { return v; }

 private:
  std::vector<std::string> hosts_;
  std::span<const float> mine_;
  int64_t m_ = 1;
  std::span<float> sum_;
};

}  // namespace

ProcessGroup& one_process() {
  static OneProcess g;
  return g;
}

bool mpi_built() {
#ifdef TOY_MPI
  return true;
#else
  return false;
#endif
}

int launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})  // Open MPI's mpirun; MPICH's mpiexec, srun
    if (const char* v = std::getenv(var); v && *v) return std::max(1, std::atoi(v));
  return 0;
}

ExchangeOptions exchange_options_from_env() {
  ExchangeOptions o;
  auto integer = [](const char* name, int64_t lo, int64_t hi, int64_t& v) {
    const char* s = std::getenv(name);
    if (!s) return;
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(s, &end, 10);
    if (!*s || *end || errno || n < lo || n > hi)
      throw std::runtime_error(std::string(name) + "='" + s + "': expected a whole number from " + std::to_string(lo) +
                               " to " + std::to_string(hi) + " (or unset it)");
    v = n;
  };
  integer("TOY_GRAD_BUCKET", 256, int64_t(1) << 28, o.bucket);
  int64_t overlap = 1;
  integer("TOY_GRAD_OVERLAP", 0, 1, overlap);
  o.overlap = overlap == 1;
  return o;
}

ProcessGroup& world() {
  const int n = launched_size();
  if (n == 0) return one_process();
#ifdef TOY_MPI
  return mpi_world(exchange_options_from_env());
#else
  throw std::runtime_error("started by an MPI launcher (" + std::to_string(n) +
                           " processes), but this toy was built without MPI: install libopenmpi-dev "
                           "(scripts/setup.sh does) and rebuild, or run toy without mpirun");
#endif
}

void leave_world() {
#ifdef TOY_MPI
  if (launched_size() > 0) mpi_finalize();
#endif
}

}  // namespace toy
