// kernels/bandwidth.cpp — read-bandwidth probe (see bandwidth.h).
#include "toy/kernels/bandwidth.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "toy/kernels/kernels.h"

namespace toy::kernels {

namespace {

// Sums 64-bit words with 8 independent accumulators: integer adds are associative, so the
// compiler turns this into wide vector loads (AVX2 when the CPU has it).
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, int64_t n) {
  uint64_t a[8] = {};
  for (int64_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

uint64_t sum_portable(const uint64_t* p, int64_t n) {
  uint64_t a[8] = {};
  for (int64_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += p[i + k];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

}  // namespace

double measure_read_bandwidth_gbs(int reps, long long bytes) {
  const int64_t n = bytes / 8;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, size_t(n) * 8));
  if (!buf) return 0;
  std::memset(buf, 1, size_t(n) * 8);  // touch every page before timing
  const bool avx2 = __builtin_cpu_supports("avx2");
  const int threads = num_threads();
  std::vector<uint64_t> sink(size_t(threads) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const int64_t chunk = (n / threads) / 8 * 8;
    parallel_for(threads, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t len = c + 1 == threads ? n - c * chunk : chunk;
        sink[size_t(c) * 8] += avx2 ? sum_avx2(buf + c * chunk, len) : sum_portable(buf + c * chunk, len);
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(n) * 8 / s / 1e9);
  }
  std::free(buf);
  volatile uint64_t keep = sink[0];
  (void)keep;
  return best;
}

}  // namespace toy::kernels
