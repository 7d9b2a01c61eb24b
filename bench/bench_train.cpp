// bench/bench_train.cpp — training throughput: tokens/s and achieved GFLOP/s of full training
// steps (forward, cross-entropy, backward, clipping, AdamW) of TrainEngine on random data.
//
//   (a) tiny:   d_model 128, 4 layers, 4 heads / 2 KV heads, d_ff 384, vocab 512, T 128, B 16
//   (b) smollm: SmolLM2-135M shapes: d_model 576, 30 layers, 9 / 3 heads, d_ff 1536,
//               vocab 49152, T 256, B 4 (a couple of steps)
//
// FLOPs per step (PaLM, appendix B): 6·N·tokens for the matrix products, N = every matrix
// parameter including the output projection (counted even when tied to token_embd; the
// embedding lookup itself is free), plus attention 6·2·n_layer·T·(n_head·d_head) per token
// (QKᵀ and PV, forward 2 + backward 4, causal masking not discounted).
//
// When `python3 -c "import torch"` works, bench/torch_train.py runs the same model and step in
// PyTorch and both are printed side by side. Usage:
//   bench_train [tiny|smollm|all] [--steps N] [--threads N] [--no-torch]
// Columns: wall ms/step, CPU ms/step (all threads; on a busy machine the honest figure), tokens/s
// and GFLOP/s from the wall time, then PyTorch's wall and CPU ms/step and the wall-time speedup.
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <utility>

#include "toy/archs/model.h"
#include "toy/engines/train.h"
#include "toy/kernels/kernels.h"

using namespace toy;

namespace {

struct Shape_ {
  const char* name;
  int64_t d_model, n_layer, n_head, n_kv_head, d_ff, n_vocab, T, B, steps;
};

double flops_per_step(const Shape_& s) {
  const double D = double(s.d_model), dh = D / double(s.n_head), kv = dh * double(s.n_kv_head), F = double(s.d_ff);
  const double per_layer = D * D + 2 * D * kv + D * D + 3 * D * F;         // q, k, v, o, gate, up, down
  const double N = double(s.n_layer) * per_layer + double(s.n_vocab) * D;  // + output projection
  const double tokens = double(s.B * s.T);
  return 6 * N * tokens + 12 * double(s.n_layer) * double(s.T) * D * tokens;
}

struct Result {
  double ms_per_step = 0, cpu_ms_per_step = 0, first_loss = 0;
};

// CPU time of the process (all threads): on a busy machine, wall time overstates the cost.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

Result bench_toy(const Shape_& s, int steps) {
  std::unique_ptr<Model> m = random_model({.arch = "llama",
                                           .n_vocab = s.n_vocab,
                                           .d_model = s.d_model,
                                           .n_layer = s.n_layer,
                                           .n_head = s.n_head,
                                           .n_kv_head = s.n_kv_head,
                                           .d_ff = s.d_ff,
                                           .n_ctx = s.T,
                                           .tied_output = true,
                                           .keys = {}},
                                          0);
  Model& model = *m;
  TrainEngine engine(model, {.schedule = {.kind = ScheduleKind::Constant, .lr = 1e-3f, .warmup = 0, .total = steps + 1},
                             .adamw = {},
                             .clip = 1.0f});
  std::mt19937 rng(0);
  std::uniform_int_distribution<int32_t> id(0, int32_t(s.n_vocab) - 1);
  std::vector<int32_t> ids(size_t(s.B * (s.T + 1)));
  for (int32_t& x : ids) x = id(rng);
  const Batch batch = make_batch(ids, s.B, s.T);
  Result r;
  r.first_loss = engine.step(batch).loss;  // warm-up: allocations, page faults, the pool
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_ms();
  for (int i = 0; i < steps; ++i) engine.step(batch);
  r.ms_per_step = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
  r.cpu_ms_per_step = (cpu_ms() - c0) / steps;
  return r;
}

// Runs torch_train.py; returns {wall, cpu} ms/step, or negative values when PyTorch is not available.
std::pair<double, double> bench_torch(const Shape_& s, int steps, int threads) {
  const std::filesystem::path script = std::filesystem::path(__FILE__).parent_path() / "torch_train.py";
  if (!std::filesystem::exists(script)) return {-1, -1};
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (std::system((std::string(py) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) continue;
    char cmd[1024];
    std::snprintf(cmd, sizeof cmd,
                  "%s %s --d-model %lld --layers %lld --heads %lld --kv-heads %lld --ff %lld --vocab %lld "
                  "--context %lld --batch %lld --steps %d --threads %d",
                  py, script.c_str(), (long long)s.d_model, (long long)s.n_layer, (long long)s.n_head,
                  (long long)s.n_kv_head, (long long)s.d_ff, (long long)s.n_vocab, (long long)s.T, (long long)s.B,
                  steps, threads);
    FILE* p = popen(cmd, "r");
    if (!p) return {-1, -1};
    double ms = -1, cpu = -1;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
      std::sscanf(line, "ms_per_step %lf", &ms);
      std::sscanf(line, "cpu_ms_per_step %lf", &cpu);
    }
    pclose(p);
    return {ms, cpu};
  }
  return {-1, -1};
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  int steps = 0, threads = 0;
  bool torch = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--no-torch")
      torch = false;
    else
      which = a;
  }
  if (threads > 0) kernels::set_num_threads(threads);
  if (!std::getenv("TOY_BENCH_MMAP")) {  // as `toy train` does: keep freed memory for the next step
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  const Shape_ shapes[] = {
      {"tiny", 128, 4, 4, 2, 384, 512, 128, 16, 10},
      {"smollm", 576, 30, 9, 3, 1536, 49152, 256, 4, 2},
  };
  std::printf("threads: %d\n", kernels::num_threads());
  std::printf("%-7s %9s %9s %9s %9s | %11s %11s %9s\n", "model", "ms/step", "cpu ms", "tok/s", "GFLOP/s", "torch ms",
              "torch cpu", "speedup");
  for (const Shape_& s : shapes) {
    if (which != "all" && which != s.name) continue;
    const int n = steps > 0 ? steps : int(s.steps);
    const Result r = bench_toy(s, n);
    const double tokens = double(s.B * s.T);
    std::printf("%-7s %9.1f %9.1f %9.0f %9.1f", s.name, r.ms_per_step, r.cpu_ms_per_step, tokens / r.ms_per_step * 1e3,
                flops_per_step(s) / r.ms_per_step / 1e6);
    std::fflush(stdout);
    const auto [t, tc] = torch ? bench_torch(s, n, kernels::num_threads()) : std::pair<double, double>{-1, -1};
    if (t > 0)
      std::printf(" | %11.1f %11.1f %8.2fx\n", t, tc, t / r.ms_per_step);
    else
      std::printf(" | %11s %11s %9s\n", "-", "-", "-");
  }
  return 0;
}
