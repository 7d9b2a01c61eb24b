// engines/distributed.h — L4: the processes of a data-parallel training run (docs/distributed.md).
//
// `mpirun -np N toy train …` starts N processes (ranks). Every rank holds the whole model and
// reads the whole batch of each step (a pure function of the step: no data is shipped); a step
// of K = grad_accum micro-batches gives rank r the micro-batches k = r·m … r·m + m − 1 (m = K/N).
// Each rank computes the gradients g_k of its micro-batches, the group sums them, and every rank
// applies the identical AdamW update to identical gradients.
//
// Bit identity with one process: float addition is not associative, so the sum is always the
// one a single process computes, micro-batch after micro-batch:
//   Σ = ((g_0 + g_1) + g_2) + … + g_{K−1}     elementwise, whatever N
// A single process keeps one running sum; N processes exchange their g_k (a reduce-scatter in
// fixed buckets: rank o owns elements [o·P/N, (o+1)·P/N) of every bucket and adds the K slices
// it receives in the order k = 0 … K − 1), then gather the owned slices (an all-gather).
// Each rank sends (m + 1)·P·(N − 1)/N floats per step (P: trainable parameters).
//
// Overlap: the exchange of a bucket starts during the backward pass of the step's last
// micro-batch, as soon as every parameter in the bucket has its final gradient (start_sum, ready,
// finish_sum), so that the optimizer waits only for what is still in flight. When a bucket starts
// changes nothing in what is added, or in which order.
//
// Without MPI (the build found none) there is only the one-process group, and a process that an
// MPI launcher started says so instead of training N copies of the same run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace toy {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;  // 0 … size() − 1; rank 0 writes the run's files
  virtual int size() const = 0;  // N, the world size
  // The host name of every rank, in rank order.
  virtual const std::vector<std::string>& hosts() const = 0;

  // The sum of the step's gradients, begun before they are all computed:
  //   start_sum(mine, m, sum);   // mine [m, P]: this rank's g_k, k = rank·m … rank·m + m − 1
  //   ready(offset, count);      // elements [offset, offset + count) of mine's last row are final
  //   finish_sum();              // every element was ready once: `sum` [P] holds Σ_k g_k
  // Σ_k g_k is elementwise over all K = size·m micro-batches, added in the order k = 0, 1, …,
  // K − 1: every rank gets the same bits. Rows 0 … m − 2 of `mine` are final at start_sum; the
  // last row fills in as the backward pass goes. `mine` and `sum` stay in place, and what was
  // ready unchanged, until finish_sum returns.
  virtual void start_sum(std::span<const float> mine, int64_t m, std::span<float> sum) = 0;
  virtual void ready(int64_t offset, int64_t count) = 0;
  virtual void finish_sum() = 0;
  // Every rank's `mine` (the same count on each), concatenated in rank order.
  virtual std::vector<double> all_gather(std::span<const double> mine) = 0;
  // True on every rank when `mine` is true on any (a stop request seen by one rank).
  virtual bool any(bool mine) = 0;
  // Rank 0's `v` on every rank.
  virtual int64_t broadcast(int64_t v) = 0;

  int64_t bytes_sent() const { return bytes_sent_; }  // by this rank's collectives so far
  // The gradient sums so far (docs/distributed.md, "Overlap"): how many buckets they had, how
  // many of them started while part of the gradient was not ready yet (so while the backward
  // pass was still running), and how long finish_sum took (the wait after the backward pass).
  struct SumStats {
    int64_t sums = 0, buckets = 0, started_early = 0;
    double wait_seconds = 0;
  };
  const SumStats& sum_stats() const { return sum_stats_; }
  // Ranks on this rank's host (hosts() equal to its own).
  int local_size() const;

 protected:
  int64_t bytes_sent_ = 0;
  SumStats sum_stats_;
};

// The group of this process alone: finish_sum adds its own micro-batches in order.
ProcessGroup& one_process();

// True when this toy was built with MPI.
bool mpi_built();
// The number of processes an MPI launcher (mpirun, mpiexec, srun) started this one among, from
// its environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE); 0 when none did.
int launched_size();

// How the MPI group exchanges gradients, from the environment of rank 0 (docs/distributed.md):
//   TOY_GRAD_BUCKET   floats per bucket, 256 … 2^28; default 2^18 (1 MiB)
//   TOY_GRAD_OVERLAP  1 (default): buckets start during the backward pass; 0: after it
// Neither changes a bit of the result.
struct ExchangeOptions {
  int64_t bucket = int64_t(1) << 18;
  bool overlap = true;
};
// Throws std::runtime_error for a value out of range.
ExchangeOptions exchange_options_from_env();

// The group of the processes the launcher started: MPI_COMM_WORLD, joined on the first call
// (MPI_Init), or one_process() when no launcher started this one. Throws std::runtime_error when
// a launcher started it but toy was built without MPI, or for a bad TOY_GRAD_* variable.
ProcessGroup& world();
// Leaves MPI after a run that ended the same way on every rank (MPI_Finalize); nothing without
// MPI. A rank that fails does not call it: it exits, and the launcher ends the other ranks.
void leave_world();

}  // namespace toy
