// bench/bench_kernels.cpp — throughput of the kernels at SmolLM2-135M shapes.
//
// Prints: the machine's memory read bandwidth (the ceiling for decode), the cost of an empty
// parallel_for, matmul_wt for every weight dtype at the model's projection shapes for M = 1
// (decode: GB/s of weights streamed from memory, GFLOP/s) and M = 128 (prompt: GFLOP/s), and
// gemm GFLOP/s, and attention for one decoded token at a few context lengths. For M = 1 the weights are cycled through enough copies (> 64 MiB) that they
// come from DRAM, not from the 32 MiB L3, as in a real decode step.
//
// Usage: bench_kernels [--quick] [--cpu-time] [--attention]   (TOY_SIMD=scalar for the portable path)
//   --quick     shorter measurements, small shapes only
//   --attention only the attention table
//   --cpu-time  one thread, timed by the thread's CPU time instead of the wall clock: for a
//               machine busy with other work (memory-bound figures then still include the
//               time the thread waits for memory, but not the time it waits for a core)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "toy/kernels/bandwidth.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"
#include "toy/tensor/quant.h"

using namespace toy;
using namespace toy::kernels;
using Clock = std::chrono::steady_clock;

namespace {

double g_min_seconds = 0.25;          // time per measurement
double g_worst_share = 1.0;           // least share of its threads' time the process got while measured
bool g_cpu_time = false;              // --cpu-time
std::vector<int> g_threads = {1, 2};  // thread counts measured

double cpu_seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

double now_seconds() {
  return g_cpu_time ? cpu_seconds(CLOCK_THREAD_CPUTIME_ID)
                    : std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// A table cell: the value, or "-" for a thread count not measured (NaN).
std::string cell(double v, int width) {
  char buf[32];
  if (std::isnan(v))
    std::snprintf(buf, sizeof buf, "%*s", width, "-");
  else
    std::snprintf(buf, sizeof buf, "%*.1f", width, v);
  return buf;
}

// Seconds per call of fn: repeats until g_min_seconds have passed (after one warm-up call).
// With the wall clock, also notes how much CPU time the process got meanwhile: on a busy
// machine the numbers measure the machine's load, and main() says so.
double time_per_call(const std::function<void()>& fn) {
  fn();
  int64_t calls = 0;
  const double t0 = now_seconds(), cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = now_seconds() - t0;
  } while (elapsed < g_min_seconds);
  if (!g_cpu_time)
    g_worst_share = std::min(g_worst_share, (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / (elapsed * num_threads()));
  return elapsed / double(calls);
}

void bench_bandwidth() {
  std::printf("memory read bandwidth (toy bench's probe, 1 GiB, wall clock):");
  for (int threads : g_threads) {
    set_num_threads(threads);
    std::printf("  %d thread%s %5.1f GB/s", threads, threads > 1 ? "s" : "", measure_read_bandwidth_gbs());
  }
  std::printf("\n");
}

void bench_parallel_for_overhead() {
  std::printf("empty parallel_for(2 chunks):");
  for (int threads : g_threads) {
    set_num_threads(threads);
    const double s = time_per_call([] {
      for (int i = 0; i < 1000; ++i) parallel_for(2, 1, [](int64_t, int64_t) {});
    });
    std::printf("  %d thread%s %.2f us", threads, threads > 1 ? "s" : "", s / 1000 * 1e6);
  }
  std::printf("\n");
}

std::vector<uint8_t> make_weights(DType t, int64_t N, int64_t K) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<uint8_t> w(size_t(row_bytes(t, N * K)));
  if (can_quantize(t)) {
    std::vector<float> f(static_cast<size_t>(K));
    for (int64_t n = 0; n < N; ++n) {
      for (float& v : f) v = dist(rng);
      quantize(t, f.data(), w.data() + n * row_bytes(t, K), K);
    }
    return w;
  }
  for (uint8_t& b : w) b = uint8_t(rng());  // K-quants: random blocks with a small half scale
  const uint16_t d = f32_to_fp16(1e-3f);
  for (int64_t i = 0; i < N * K / QK_K; ++i) {
    uint8_t* blk = w.data() + i * info(t).type_size;
    std::memcpy(t == DType::Q6_K ? blk + offsetof(BlockQ6_K, d) : blk, &d, 2);
    if (t != DType::Q6_K) std::memcpy(blk + 2, &d, 2);
  }
  return w;
}

struct MatShape {
  const char* what;
  int64_t N, K;
};

void bench_matmul(bool quick) {
  const MatShape shapes[] = {
      {"attn_q/o", 576, 576}, {"ffn_up", 1536, 576}, {"ffn_down", 576, 1536}, {"output", 49152, 576}};
  const DType types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                         DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  std::printf(
      "\nmatmul_wt  y[M, N] = x[M, K] · W[N, K]ᵀ\n"
      "(decode M = 1: GB/s of weights read and GFLOP/s; prompt M = 128: GFLOP/s)\n");
  std::printf("%-6s %-9s %6s %5s | %8s %8s %8s | %8s %8s\n", "dtype", "tensor", "N", "K", "M=1 1t", "M=1 2t", "GFLOP/s",
              "M=128 1t", "M=128 2t");
  for (DType t : types) {
    for (const MatShape& s : shapes) {
      if (s.K % info(t).block_size != 0) continue;  // K-quants need K % 256 == 0
      if (quick && s.N > 2000) continue;
      const int64_t bytes = row_bytes(t, s.N * s.K);
      const int copies = int(std::max<int64_t>(1, (int64_t(96) << 20) / bytes));
      const std::vector<uint8_t> one = make_weights(t, s.N, s.K);
      std::vector<uint8_t> ring(size_t(bytes) * size_t(copies));
      for (int c = 0; c < copies; ++c) std::memcpy(ring.data() + size_t(c) * size_t(bytes), one.data(), size_t(bytes));
      std::vector<float> x(size_t(128 * s.K), 0.5f), y(size_t(128 * s.N));
      double gbs[2] = {NAN, NAN}, gflops_decode = 0, gflops_prompt[2] = {NAN, NAN};
      for (int threads : g_threads) {
        set_num_threads(threads);
        int c = 0;
        const double s1 = time_per_call([&] {
          matmul_wt(x.data(), ring.data() + size_t(c) * size_t(bytes), t, y.data(), 1, s.N, s.K);
          c = (c + 1) % copies;
        });
        gbs[threads - 1] = double(bytes) / s1 / 1e9;
        gflops_decode = 2.0 * double(s.N * s.K) / s1 / 1e9;
        const double s128 = time_per_call([&] { matmul_wt(x.data(), one.data(), t, y.data(), 128, s.N, s.K); });
        gflops_prompt[threads - 1] = 2.0 * 128 * double(s.N * s.K) / s128 / 1e9;
      }
      std::printf("%-6s %-9s %6lld %5lld | %s %s %s | %s %s\n", std::string(name(t)).c_str(), s.what, (long long)s.N,
                  (long long)s.K, cell(gbs[0], 8).c_str(), cell(gbs[1], 8).c_str(), cell(gflops_decode, 8).c_str(),
                  cell(gflops_prompt[0], 8).c_str(), cell(gflops_prompt[1], 8).c_str());
    }
  }
}

void bench_gemm() {
  std::printf("\ngemm  C[M, N] = op(A)·op(B), f32 (GFLOP/s)\n");
  std::printf("%-18s %8s %8s\n", "M x N x K, op", "1t", "2t");
  struct Case {
    int64_t M, N, K;
    bool ta, tb;
  };
  for (Case c : {Case{512, 512, 512, false, false}, Case{512, 512, 512, false, true}, Case{512, 512, 512, true, false},
                 Case{128, 576, 576, false, true}, Case{64, 64, 64, false, true}}) {
    std::vector<float> A(size_t(c.M * c.K), 0.5f), B(size_t(c.K * c.N), 0.25f), C(size_t(c.M * c.N));
    double gf[2] = {NAN, NAN};
    for (int threads : g_threads) {
      set_num_threads(threads);
      const double s = time_per_call([&] { gemm(c.ta, c.tb, c.M, c.N, c.K, A.data(), B.data(), C.data(), false); });
      gf[threads - 1] = 2.0 * double(c.M * c.N * c.K) / s / 1e9;
    }
    char label[64];
    std::snprintf(label, sizeof label, "%lldx%lldx%lld %s%s", (long long)c.M, (long long)c.N, (long long)c.K,
                  c.ta ? "T" : "N", c.tb ? "T" : "N");
    std::printf("%-18s %s %s\n", label, cell(gf[0], 8).c_str(), cell(gf[1], 8).c_str());
  }
}

// One decode step's attention in one layer of SmolLM2-135M (9 query heads over 3 KV heads of 64),
// over 30 layers' KV caches in turn so that they come from L3 or DRAM, as in a real decode step.
void bench_attention() {
  constexpr int64_t H = 9, Hkv = 3, Dh = 64, kLayers = 30;
  std::printf("\nattention, decode (T = 1, %lld query heads over %lld KV heads of %lld; us per layer)\n", (long long)H,
              (long long)Hkv, (long long)Dh);
  std::printf("%-6s %6s | %8s %8s\n", "cache", "S", "1t", "2t");
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qv(size_t(H * Dh));
  for (float& x : qv) x = dist(rng);
  const Tensor q = Tensor::from({1, 1, H, Dh}, qv);
  for (DType t : {DType::F32, DType::F16})
    for (int64_t S : {128, 512, 2048}) {
      std::vector<Tensor> k, v;
      for (int64_t l = 0; l < kLayers; ++l)
        for (auto* kv : {&k, &v}) {
          Tensor x = Tensor::empty({1, S, Hkv, Dh}, t);
          for (int64_t i = 0; i < x.numel(); ++i) {
            const float f = dist(rng);
            if (t == DType::F16)
              static_cast<uint16_t*>(x.raw_mut())[i] = f32_to_fp16(f);
            else
              x.data_mut()[i] = f;
          }
          kv->push_back(x);
        }
      double us[2] = {NAN, NAN};
      for (int threads : g_threads) {
        set_num_threads(threads);
        size_t l = 0;
        us[threads - 1] = 1e6 * time_per_call([&] {
                            attention(q, k[l], v[l], {.scale = 0.125f});
                            l = (l + 1) % k.size();
                          });
      }
      std::printf("%-6s %6lld | %s %s\n", std::string(name(t)).c_str(), (long long)S, cell(us[0], 8).c_str(),
                  cell(us[1], 8).c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, attention_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      g_min_seconds = 0.05;
    } else if (std::strcmp(argv[i], "--cpu-time") == 0) {
      g_cpu_time = true;
      g_threads = {1};
    } else if (std::strcmp(argv[i], "--attention") == 0) {
      attention_only = true;
    } else {
      std::fprintf(stderr, "usage: bench_kernels [--quick] [--cpu-time] [--attention]\n");
      return 2;
    }
  }
  const int threads = num_threads();
  std::printf("toy kernels: simd %s, %d threads by default%s\n", simd_level().c_str(), threads,
              g_cpu_time ? "; timed by thread CPU time, 1 thread" : "");
  if (!attention_only) {
    bench_bandwidth();
    bench_parallel_for_overhead();
    bench_matmul(quick);
    bench_gemm();
  }
  bench_attention();
  set_num_threads(threads);
  if (g_worst_share < 0.9)
    std::printf("\nwarning: the machine was busy: at worst the benchmark's threads got %.0f%% of their cores' time\n",
                100 * g_worst_share);
  return 0;
}
