// kernels/bandwidth.cpp — read-bandwidth probe (see bandwidth.h).
//
// What it takes to see the bandwidth generation can get rather than a fraction of it (measured
// on a 2-core Zen 4 VM with a 32 MiB L3, where a naive probe read 22-33 GB/s and this one reads
// 31-45, the host's load deciding):
//   * a buffer far larger than the last-level cache: 1 GiB (512 MiB read ~15% lower);
//   * pages touched before timing, each with different bytes (identical pages can be merged by
//     a VM's host), in 4 KiB pages like the weights mapped from a file (huge pages, where the
//     kernel grants them, read up to 64 GB/s here: not what reading a model gets);
//   * explicit 256-bit loads into 4 independent accumulators, so the loop is bound by memory,
//     not by the latency of the adds;
//   * the buffer cut into 4 MiB chunks that the pool's threads claim as they come, so a thread
//     that is descheduled for a moment does not stretch the pass (the others take its chunks);
//   * the median of several passes: on a VM a pass now and then reads faster than the memory
//     can deliver (a clock hiccup, host effects), and the best pass would report that.
#include "toy/kernels/bandwidth.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"

namespace toy::kernels {

namespace {

constexpr int64_t kChunk = int64_t(4) << 20;  // bytes per claimed chunk
constexpr int64_t kHugePage = int64_t(2) << 20;

// Sums n bytes (a multiple of 128) as 64-bit words; the sum only keeps the loads alive.
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

uint64_t read_portable(const uint8_t* p, int64_t n) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a[8] = {};
  for (int64_t i = 0; i < n / 8; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += w[i + k];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

long long default_bytes() {
  const long long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const long long ram = pages > 0 && page > 0 ? pages * page : 0;
  return std::max<long long>(kChunk, std::min<long long>(1ll << 30, ram / 4));
}

}  // namespace

double measure_read_bandwidth_gbs(int reps, long long bytes) {
  if (bytes <= 0) bytes = default_bytes();
  const int64_t n = (int64_t(bytes) + kChunk - 1) / kChunk * kChunk;
  void* mem = std::aligned_alloc(size_t(kHugePage), size_t(n));
  if (!mem) return 0;
  auto* buf = static_cast<uint8_t*>(mem);
  madvise(buf, size_t(n), MADV_NOHUGEPAGE);  // 4 KiB pages, like most mappings of a model file
  const int64_t chunks = n / kChunk;
  // Touch every page before timing, each 4 KiB page with different bytes.
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    std::memset(buf + c0 * kChunk, 1, size_t((c1 - c0) * kChunk));
    for (int64_t at = c0 * kChunk; at < c1 * kChunk; at += 4096) std::memcpy(buf + at, &at, sizeof at);
  });
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = simd() >= Simd::avx2;
#endif
  std::atomic<uint64_t> sink{0};
  std::vector<double> gbs;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      const uint8_t* p = buf + c0 * kChunk;
      const int64_t len = (c1 - c0) * kChunk;
#if defined(__x86_64__) || defined(__i386__)
      sink.fetch_add(avx2 ? read_avx2(p, len) : read_portable(p, len), std::memory_order_relaxed);
#else
      sink.fetch_add(read_portable(p, len), std::memory_order_relaxed);
#endif
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbs.push_back(double(n) / s / 1e9);
  }
  std::free(mem);
  volatile uint64_t keep = sink.load();
  (void)keep;
  std::sort(gbs.begin(), gbs.end());
  return gbs.empty() ? 0 : gbs[gbs.size() / 2];
}

}  // namespace toy::kernels
