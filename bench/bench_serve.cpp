// bench/bench_serve.cpp — load generator for an OpenAI-compatible server: aggregate generated
// tokens/s, time to first token and time per output token at 1, 4, 8 and 16 concurrent streams.
//
// Starts `toy serve` in this process on an ephemeral loopback port (nothing leaves the machine),
// with as many slots as the largest client count, or drives the server at --port (`toy serve`
// or llama.cpp's `llama-server` on the same GGUF, for a side-by-side). For each level it runs
// that many client threads, each sending `--requests` streaming chat requests back to back.
// Generation is greedy with ignore_eos (llama-server takes it too), so every request produces
// exactly --max-tokens tokens and runs are comparable. Bounded: levels × requests requests in all.
//
//   bench_serve [MODEL] [--port P] [--levels 1,4,8,16] [--requests 4] [--max-tokens 64] [--prompt-words 32]
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "toy/archs/model.h"
#include "toy/serve/server.h"
#include "toy/tokenizer/tokenizer.h"

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

struct Sample {
  double latency_s = 0, ttft_s = 0;
  int64_t tokens = 0;
  bool ok = false;
};

// Whether an SSE event carries generated text (not the role-only first chunk, nor usage).
bool has_content(const json& chunk) {
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) return false;
  const json& delta = chunk["choices"][0].value("delta", json::object());
  return delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty();
}

// One streaming chat request; counts the generated tokens from the usage chunk. The time to first
// token is that of the first chunk with text.
Sample one_request(int port, const std::string& body) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(300, 0);
  Sample s;
  std::string buffer;
  const auto t0 = clock_type::now();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string ev = buffer.substr(0, end);
      if (ev.rfind("data: {", 0) == 0) {
        const json j = json::parse(ev.substr(6), nullptr, false);
        if (s.ttft_s == 0 && has_content(j)) s.ttft_s = std::chrono::duration<double>(clock_type::now() - t0).count();
        if (j.is_object() && j.contains("usage") && j["usage"].is_object()) s.tokens = j["usage"]["completion_tokens"];
      }
      if (ev == "data: [DONE]") s.ok = true;
    }
    return true;
  };
  auto res = cli.send(req);
  s.latency_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  s.ok = s.ok && res && res->status == 200;
  return s;
}

std::vector<int> parse_levels(const std::string& text) {
  std::vector<int> v;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const int n = std::atoi(text.substr(pos, end - pos).c_str());
    if (n > 0 && n <= 64) v.push_back(n);
    pos = end + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, levels_text = "1,4,8,16";
  int requests = 4, max_tokens = 64, prompt_words = 32, external_port = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--levels")
      levels_text = next();
    else if (a == "--requests")
      requests = std::atoi(next().c_str());
    else if (a == "--max-tokens")
      max_tokens = std::atoi(next().c_str());
    else if (a == "--prompt-words")
      prompt_words = std::atoi(next().c_str());
    else if (a == "--port")
      external_port = std::atoi(next().c_str());
    else if (a == "--help" || a == "-h") {
      std::puts(
          "usage: bench_serve [MODEL] [--port P] [--levels 1,4,8,16] [--requests 4] [--max-tokens 64] "
          "[--prompt-words 32]\n  --port P: drive the server listening on 127.0.0.1:P (toy serve or llama-server, "
          "started with at least as many slots as the largest level) instead of starting one");
      return 0;
    } else
      model_path = a;
  }
  if (model_path
          .empty()) {  // the real-vocabulary fixture: $TOY_FIXTURES, or ../shared/fixtures from the repository root
    const char* fx = std::getenv("TOY_FIXTURES");
    for (std::string dir :
         {std::string(fx ? fx : ""), std::string("../shared/fixtures"), std::string("../../shared/fixtures")})
      if (!dir.empty() && model_path.empty() && std::filesystem::exists(dir + "/real/llama-2-tiny-random.gguf"))
        model_path = dir + "/real/llama-2-tiny-random.gguf";
    if (model_path.empty()) model_path = "../shared/fixtures/real/llama-2-tiny-random.gguf";
  }
  const std::vector<int> levels = parse_levels(levels_text);
  if (levels.empty() || requests < 1 || requests > 1000 || max_tokens < 1 || prompt_words < 0 || external_port < 0 ||
      external_port > 65535) {
    std::fputs("bench_serve: bad arguments (see --help)\n", stderr);
    return 2;
  }
  if (!std::filesystem::exists(model_path)) {
    std::fprintf(stderr, "bench_serve: %s not found (pass a MODEL or set TOY_FIXTURES)\n", model_path.c_str());
    return 3;
  }

  auto file = toy::gguf::GgufFile::open(model_path);
  auto model = toy::load_model(file);
  auto tokenizer = toy::Tokenizer::from_gguf(*file);
  toy::serve::ServerConfig cfg;
  cfg.model_name = "bench";
  cfg.parallel = *std::max_element(levels.begin(), levels.end());
  cfg.queue = 64;
  cfg.n_ctx = std::min<int64_t>(model->config().n_ctx, 2048);
  cfg.log_requests = false;
  std::unique_ptr<toy::serve::Server> server;
  std::thread serving;
  int port = external_port;
  if (port == 0) {
    server = std::make_unique<toy::serve::Server>(*model, tokenizer,
                                                  toy::serve::chat_prompt_source(*file, tokenizer.get()), cfg);
    port = server->bind("127.0.0.1", 0);
    serving = std::thread([&] { server->run(); });
  }

  std::string prompt = "Tell me a story.";
  for (int w = 0; w < prompt_words; ++w) prompt += " word" + std::to_string(w);
  const std::string body = json{{"model", "bench"},
                                {"messages", {{{"role", "user"}, {"content", prompt}}}},
                                {"max_tokens", max_tokens},
                                {"temperature", 0},
                                {"ignore_eos", true},
                                {"stream", true},
                                {"stream_options", {{"include_usage", true}}}}
                               .dump();
  one_request(port, body);  // warm-up

  const std::string where =
      server ? std::to_string(cfg.parallel) + " slots in process" : "the server on port " + std::to_string(port);
  std::printf("model %s (%s, n_vocab %lld), %s, %d requests per client, %d tokens each\n",
              std::filesystem::path(model_path).filename().c_str(), model->config().arch.c_str(),
              (long long)model->config().n_vocab, where.c_str(), requests, max_tokens);
  std::printf("%8s %9s %8s %10s %13s %13s %13s %6s\n", "clients", "requests", "req/s", "gen tok/s", "mean TTFT ms",
              "mean TPOT ms", "p50 total ms", "fail");
  for (int clients : levels) {
    std::vector<std::vector<Sample>> per(static_cast<size_t>(clients));
    const auto t0 = clock_type::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&, c] {
        for (int r = 0; r < requests; ++r) per[size_t(c)].push_back(one_request(port, body));
      });
    for (auto& t : threads) t.join();
    const double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    std::vector<Sample> all;
    for (auto& v : per) all.insert(all.end(), v.begin(), v.end());
    int64_t tokens = 0;
    int failed = 0;
    double ttft = 0, tpot = 0;  // TPOT: the time per output token after the first, per request
    std::vector<double> lat;
    for (const Sample& s : all) {
      tokens += s.tokens;
      failed += !s.ok;
      ttft += s.ttft_s;
      if (s.tokens > 1) tpot += (s.latency_s - s.ttft_s) / double(s.tokens - 1);
      lat.push_back(s.latency_s);
    }
    std::sort(lat.begin(), lat.end());
    const double n = double(all.size());
    std::printf("%8d %9zu %8.2f %10.1f %13.1f %13.1f %13.1f %6d\n", clients, all.size(), n / wall,
                double(tokens) / wall, 1000 * ttft / n, 1000 * tpot / n, 1000 * lat[lat.size() / 2], failed);
    std::fflush(stdout);
  }
  if (server) {
    server->stop();
    serving.join();
  }
  return 0;
}
