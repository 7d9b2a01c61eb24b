// cli/cmd_serve.cpp — `toy serve MODEL`: the OpenAI-compatible HTTP server (serve/server.h).
//
// This file only reads flags, loads the model and handles signals: SIGINT/SIGTERM stop
// accepting, answer waiting requests 503 and let running ones finish; a second signal exits at
// once. Once listening it prints "listening on http://HOST:PORT" on stdout (tests and scripts
// started with --port 0 read the port from there).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "cli/common.h"
#include "cli/generation.h"
#include "toy/primitives/device.h"
#include "toy/serve/server.h"

namespace toy::cli {
namespace {

// How /v1/embeddings pools: --pooling, else the file's `<arch>.pooling_type` (an embedding model
// says which it was trained with), else the mean (llama-server's `--pooling mean`).
serve::Pooling pooling(const Args& a, const gguf::GgufFile& file, const std::string& arch) {
  if (a.has("pooling")) {
    const auto p = serve::pooling_named(a.str("pooling"));
    if (!p) throw UsageError("--pooling must be mean, cls or last, got '" + a.str("pooling") + "'");
    return *p;
  }
  const gguf::Value* v = file.find(arch + ".pooling_type");
  if (!v || !v->is_integer()) return serve::Pooling::Mean;
  if (const auto p = serve::pooling_from_gguf(v->as_int())) return *p;
  std::fprintf(stderr, "toy serve: warning: %s.pooling_type %lld has no single vector per input; embeddings use mean\n",
               arch.c_str(), (long long)v->as_int());
  return serve::Pooling::Mean;
}

// Waits for SIGINT/SIGTERM on its own thread (they are blocked everywhere else): the first
// stops the server gracefully, the second exits at once.
void watch_signals(serve::Server& server, sigset_t set) {
  std::thread([&server, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "toy serve: %s: finishing running requests (again to quit at once)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
    sigwait(&set, &sig);
    std::_Exit(kInterrupted);
  }).detach();
}

int run(const Args& a) {
  // Block the signals before any thread exists, so that every thread inherits the mask and
  // only the watcher receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  apply_threads(a);
  const long long port = a.integer("port"), parallel = a.integer("parallel"), queue = a.integer("queue"),
                  ctx = a.integer("ctx");
  const long long max_body = a.integer("max-body"), timeout = a.integer("timeout"),
                  per_client = a.integer("conns-per-client");
  if (port < 0 || port > 65535) throw UsageError("--port must be between 0 and 65535");
  if (parallel < 1 || parallel > 256) throw UsageError("--parallel must be between 1 and 256");
  if (queue < 0 || queue > 4096) throw UsageError("--queue must be between 0 and 4096");
  if (ctx < 0) throw UsageError("--ctx must be ≥ 0");
  if (max_body < 1024) throw UsageError("--max-body must be at least 1024 bytes");
  if (timeout < 1 || timeout > 86400) throw UsageError("--timeout must be between 1 and 86400 seconds");
  if (per_client < 1 || per_client > 4096) throw UsageError("--conns-per-client must be between 1 and 4096");

  Loaded l = load_model_and_tokenizer(a);
  if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer, which the server needs");
  if (ctx > l.model->config().n_ctx)
    throw UsageError("--ctx " + std::to_string(ctx) + " exceeds the model's context of " +
                     std::to_string(l.model->config().n_ctx));

  place_model(a, *l.model);  // before the first request: a server that cannot get its device does not start

  serve::ChatPromptSource chat = serve::chat_prompt_source(*l.file, l.tokenizer.get());
  if (a.has("chat-template")) {
    std::ifstream in(a.str("chat-template"), std::ios::binary);
    if (!in) throw InputError(a.str("chat-template") + ": cannot read");
    chat.template_source.assign(std::istreambuf_iterator<char>(in), {});
    chat.origin = a.str("chat-template");
  }

  serve::ServerConfig cfg;
  cfg.model_name = a.has("name") ? a.str("name") : std::filesystem::path(l.file->path()).stem().string();
  cfg.model_file = l.file->path();
  cfg.parallel = int(parallel);
  cfg.queue = int(queue);
  cfg.n_ctx = ctx;
  cfg.kv_type = kv_type(a);
  cfg.max_body_bytes = size_t(max_body);
  cfg.api_key = a.str("api-key");
  cfg.timeout_s = int(timeout);
  cfg.max_connections_per_address = int(per_client);
  cfg.log_requests = !a.flag("quiet");
  cfg.pooling = pooling(a, *l.file, l.model->config().arch);
  // Adapters stay apart from the model: each set of scales a request asks for is the base loaded
  // once more with them attached (serve/adapters.h), its weights the same mapping, or on a device
  // the same device memory (only the adapters go up).
  Model* served = l.model.get();
  serve::AdapterSetup adapters{.adapters = read_lora_flags(a), .load_base = [file = l.file, served] {
                                 std::unique_ptr<Model> m = load_model(file);
                                 if (!served->device().is_cpu()) m->share_params(*served);
                                 return m;
                               }};
  const DraftFlags draft = draft_flags(a, l);
  cfg.draft_model = draft.model.get();
  cfg.ngram_n = draft.ngram_n;
  cfg.ngram_m = draft.ngram_m;
  cfg.speculation = draft.limits;
  serve::Server server(*l.model, l.tokenizer, chat, cfg, std::move(adapters));
  if (!server.chat().parse_error().empty())
    std::fprintf(stderr,
                 "toy serve: warning: the chat template (%s) does not parse: %s\n  chat requests will get 400 until it "
                 "is fixed; see --chat-template\n",
                 chat.origin.c_str(), server.chat().parse_error().c_str());

  const std::string host = a.str("host");
  int bound = 0;
  try {
    bound = server.bind(host, int(port));
  } catch (const std::exception& e) {
    throw NetworkError(e.what());
  }
  watch_signals(server, set);
  std::fprintf(stderr,
               "toy serve: model '%s' (%s), %lld slot(s) of %lld tokens, queue %lld, chat template: %s, embeddings: "
               "%s pooling\n",
               cfg.model_name.c_str(), l.model->config().arch.c_str(), parallel, (long long)server.config().n_ctx,
               queue, chat.origin.c_str(), serve::pooling_name(cfg.pooling));
  std::printf("listening on http://%s:%d\n", host.c_str(), bound);
  std::fflush(stdout);
  server.run();
  std::fprintf(stderr, "toy serve: stopped\n");
  return kOk;
}

std::vector<Flag> flags() {
  std::vector<Flag> f = {
      model_flag(),
      {"host", FlagType::String, "127.0.0.1", "address to listen on (0.0.0.0: every interface)"},
      {"port", FlagType::Int, "8080", "TCP port (0: any free port; the line 'listening on …' says which)"},
      {"name", FlagType::String, "", "model id clients ask for (default: the file name without .gguf)"},
      {"parallel", FlagType::Int, "1", "requests generating at once, each with its own KV cache; decoded as one batch"},
      {"queue", FlagType::Int, "16", "requests that may wait for a slot; more get 503"},
      {"ctx",
       FlagType::Int,
       "0",
       "context per slot, prompt + completion (0: the model's, at most 4096)",
       'c',
       {"--ctx-size"}},
      {"max-body", FlagType::Int, "1048576", "largest request body in bytes; larger: 413"},
      {"api-key", FlagType::String, "", "require 'Authorization: Bearer KEY' on the API routes"},
      {"chat-template", FlagType::Path, "", "a Jinja chat template to use instead of the model's"},
      {"timeout", FlagType::Int, "30",
       "seconds a client has to send a whole request (line, headers, body); also the longest a write may "
       "stall"},
      {"conns-per-client", FlagType::Int, "16",
       "connections one client address may hold open at once; more are answered 429 and closed"},
      {"quiet", FlagType::Bool, "", "do not log each request on stderr"},
      {"pooling", FlagType::String, "",
       "how /v1/embeddings pools an input's hidden states: mean, cls or last (default: the file's "
       "pooling_type, else mean)"},
      kv_type_flag(),
      device_flag(),
      gpu_layers_flag(),
      lora_flag(),
      lora_scaled_flag(),
      threads_flag()};
  for (Flag& g : speculation_flags()) f.push_back(std::move(g));
  return f;
}

Registrar reg({
    .name = "serve",
    .summary = "serve a model over the OpenAI HTTP API (completions, chat, streaming, embeddings)",
    .positionals = {{"MODEL", "a GGUF model with a tokenizer (default: the embedded story model)", false}},
    .flags = flags(),
    .run = run,
    .details = "example:\n  toy serve model.gguf --port 8080 --name smol --parallel 4\n"
               "  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' -d "
               "'{\"model\":\"smol\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'\n"
               "API, limits and errors: docs/serve.md",
});

}  // namespace
}  // namespace toy::cli
