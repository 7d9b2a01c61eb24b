// cli/cmd_bench.cpp — `toy bench MODEL`: prompt and generation speed against the memory roofline.
//
// pp N: one batch of N tokens from an empty cache. tg 128: 128 single-token steps after one
// token of context. Each figure is the median of --reps runs after a warm-up, with the
// spread (min–max). Generation reads every weight once per token, so its ceiling is
// bandwidth ÷ bytes of weights per token: the roofline fraction says how close toy gets.
// Peak resident memory is measured after generation, before the prompt runs. The report names
// the SIMD path in use (TOY_SIMD caps it), how the F32/F16/BF16 prompt tile was chosen (TOY_FLOAT_TILE)
// and the matmul kernel each weight dtype of the model takes.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/common.h"
#include "toy/engines/decode.h"
#include "toy/io/progress.h"
#include "toy/kernels/bandwidth.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"

namespace toy::cli {
namespace {

using clock_type = std::chrono::steady_clock;

struct Stat {
  double median = 0, lo = 0, hi = 0;
};

Stat stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

int run(const Args& a) {
  apply_threads(a);
  const int reps = int(a.integer("reps"));
  if (reps < 1 || reps > 100) throw UsageError("--reps must be between 1 and 100");
  const std::string path = resolve_model(*a.positional(0));

  auto t0 = clock_type::now();
  auto file = gguf::GgufFile::open(path);
  auto model = load_model(file);
  place_model(a, *model);  // the upload counts as loading
  const double load_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  const ModelConfig& c = model->config();
  const bool on_cpu = model->device().is_cpu();
  const std::string device = on_cpu ? "cpu" : device_ops(model->device())->name();

  // Bytes of weights one generated token reads: every matrix, except that the input embedding
  // reads one row (unless it is also the output projection).
  const bool tied = file->find_tensor("output.weight") == nullptr;
  double bytes_per_token = 0;
  for (const auto& t : file->tensors())
    bytes_per_token +=
        t.name == "token_embd.weight" && !tied ? double(t.nbytes) / double(t.shape[0]) : double(t.nbytes);

  // The matmul kernel of each dtype of the model's matrices (the input embedding, when it is
  // not also the output projection, is only looked up).
  std::map<std::string, std::string> kernel_of_dtype;
  for (const auto& t : file->tensors())
    if (t.shape.size() >= 2 && !(t.name == "token_embd.weight" && !tied) && dtype_supported(t.dtype))
      kernel_of_dtype[std::string(name(t.dtype))] =
          on_cpu ? kernels::matmul_kernel_name(t.dtype) : "vulkan matvec.comp";

  std::mt19937 rng(1);
  auto random_ids = [&](int64_t n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = int32_t(rng() % uint32_t(c.n_vocab));
    return ids;
  };
  const int64_t n_ctx = std::min<int64_t>(c.n_ctx, 1024);
  DecodeEngine engine(*model, n_ctx, kv_type(a));
  const double kv_mib = double(engine.kv_cache_bytes()) / (1 << 20);
  // Tokens to process: tg128, pp128 and pp512 where they fit the context, each reps + 1 times
  // (the first is the warm-up).
  const int64_t per_rep = (129 <= n_ctx ? 128 : 0) + (128 <= n_ctx ? 128 : 0) + (512 <= n_ctx ? 512 : 0);
  Progress bar("bench", int64_t(reps + 1) * per_rep, Progress::Unit::Count, "tokens");
  int64_t processed = 0;
  auto time_prompt = [&](int64_t n) -> std::optional<Stat> {
    if (n > n_ctx) return std::nullopt;
    std::vector<double> v;
    for (int r = 0; r <= reps; ++r) {  // r == 0 is the warm-up
      engine.reset();
      auto ids = random_ids(n);
      auto s = clock_type::now();
      engine.feed(ids, true);
      if (r) v.push_back(double(n) / std::chrono::duration<double>(clock_type::now() - s).count());
      bar.update(processed += n);
    }
    return stats(v);
  };
  auto time_generation = [&](int64_t n) -> std::optional<Stat> {
    if (n + 1 > n_ctx) return std::nullopt;
    std::vector<double> v;
    for (int r = 0; r <= reps; ++r) {
      engine.reset();
      auto ids = random_ids(n + 1);
      engine.feed(std::span<const int32_t>(ids.data(), 1), true);
      auto s = clock_type::now();
      for (int64_t i = 1; i <= n; ++i) engine.feed(std::span<const int32_t>(&ids[size_t(i)], 1), true);
      if (r) v.push_back(double(n) / std::chrono::duration<double>(clock_type::now() - s).count());
      bar.update(processed += n);
    }
    return stats(v);
  };
  std::fprintf(stderr, "bench: %s, %d threads, %d reps ...\n", path.c_str(), kernels::num_threads(), reps);
  // Generation first, so that the peak resident memory is that of generating (weights, KV
  // cache, one token's activations), before prompt batches and the bandwidth probe add theirs.
  const auto tg128 = time_generation(128);
  const double gen_rss_mib = peak_rss_mib();
  const auto pp128 = time_prompt(128), pp512 = time_prompt(512);
  bar.finish();
  // The roofline is the CPU's: a device's memory bandwidth is not measured yet (no figure then).
  const double bw = on_cpu ? kernels::measure_read_bandwidth_gbs() : 0;
  const double roof = bytes_per_token > 0 ? bw * 1e9 / bytes_per_token : 0;
  const double fraction = tg128 && roof > 0 ? tg128->median / roof : 0;

  if (a.flag("json")) {
    nlohmann::ordered_json j;
    auto put = [&](const char* k, const std::optional<Stat>& s) {
      j[k] = s ? nlohmann::ordered_json(s->median) : nlohmann::ordered_json(nullptr);
      j[std::string(k) + "_min"] = s ? nlohmann::ordered_json(s->lo) : nlohmann::ordered_json(nullptr);
      j[std::string(k) + "_max"] = s ? nlohmann::ordered_json(s->hi) : nlohmann::ordered_json(nullptr);
    };
    j["model"] = path;
    j["device"] = device;
    j["threads"] = kernels::num_threads();
    j["reps"] = reps;
    j["load_s"] = load_s;
    put("pp128", pp128);
    put("pp512", pp512);
    put("tg128", tg128);
    j["bytes_per_token"] = bytes_per_token;
    j["bandwidth_gbs"] = bw;
    j["roofline_tok_s"] = roof;
    j["roofline_fraction"] = fraction;
    j["peak_rss_mib"] = gen_rss_mib;
    j["file_mib"] = double(file->file_size()) / (1 << 20);
    j["kv_cache_mib"] = kv_mib;
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return v ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
    };
    j["isa"] = {{"cpu", kernels::cpu_simd_features()},
                {"level", kernels::simd_level()},
                {"TOY_SIMD", env("TOY_SIMD")},
                {"float_tile", kernels::float_tile_choice()},
                {"TOY_FLOAT_TILE", env("TOY_FLOAT_TILE")}};
    j["kernels"] = kernel_of_dtype;
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  auto line = [](const char* name, const std::optional<Stat>& s) {
    if (s)
      std::printf("  %-6s %9.1f tok/s   (min %.1f, max %.1f)\n", name, s->median, s->lo, s->hi);
    else
      std::printf("  %-6s        —      (context too small)\n", name);
  };
  std::printf("%s  (%s, %.1f MiB, %d threads, median of %d)\n", path.c_str(), c.arch.c_str(),
              double(file->file_size()) / (1 << 20), kernels::num_threads(), reps);
  std::printf("  device %s\n", device.c_str());
  std::printf("  load   %9.3f s\n", load_s);
  std::printf("  SIMD   %s (CPU: %s; float tile %s)\n", kernels::simd_level().c_str(),
              kernels::cpu_simd_features().c_str(), kernels::float_tile_choice().c_str());
  for (const auto& [dtype, kernel] : kernel_of_dtype) std::printf("  %-6s %s\n", dtype.c_str(), kernel.c_str());
  line("pp128", pp128);
  line("pp512", pp512);
  line("tg128", tg128);
  if (on_cpu) {
    std::printf("  weights read per token %.1f MiB; memory read bandwidth %.1f GB/s -> roofline %.1f tok/s\n",
                bytes_per_token / (1 << 20), bw, roof);
    std::printf("  generation at %.0f%% of the roofline\n", 100 * fraction);
  } else {
    std::printf("  weights read per token %.1f MiB (the device's memory bandwidth is not measured yet)\n",
                bytes_per_token / (1 << 20));
  }
  std::printf("  peak resident memory while generating %.1f MiB (file %.1f MiB + KV cache %.1f MiB)\n", gen_rss_mib,
              double(file->file_size()) / (1 << 20), kv_mib);
  return kOk;
}

Registrar reg({
    .name = "bench",
    .summary = "measure load, prompt (pp128, pp512) and generation (tg128) speed against the memory roofline",
    .positionals = {{"MODEL", "a GGUF model (toy init makes real-sized ones)"}},
    .flags = {{"reps", FlagType::Int, "3", "repetitions per figure (after one warm-up)"},
              {"json", FlagType::Bool, "",
               "print one JSON object (keys pp128, pp512, tg128, bandwidth_gbs, roofline_fraction, peak_rss_mib, isa, "
               "kernels, ...)"},
              kv_type_flag(),
              device_flag(),
              gpu_layers_flag(),
              threads_flag()},
    .run = run,
    .details =
        "example: toy init --preset smollm2-135m --dtype Q8_0 -o /tmp/s.gguf && toy bench /tmp/s.gguf --threads 2",
});

}  // namespace
}  // namespace toy::cli
