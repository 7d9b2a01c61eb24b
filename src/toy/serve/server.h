// serve/server.h — `toy serve`: an OpenAI-compatible HTTP server over one model.
//
// Routes (docs/serve.md has the full contract):
//   GET  /health                     {"status": "ok", slots and queue}
//   GET  /v1/models, /v1/models/{id} the one served model
//   POST /v1/completions             text or token-id prompt; stream, logprobs, echo
//   POST /v1/chat/completions        messages through the model's chat template; stream, logprobs
//   POST /v1/embeddings              one vector per input: pooled final hidden states (embeddings.h)
//   POST /tokenize, /detokenize      llama.cpp-style extras
//   GET  /metrics, /props, /slots    Prometheus counters; llama-server's settings and slot states
//   GET, POST /lora-adapters         the LoRA adapters and their global scales (adapters.h)
// (each /v1/x also answers as /x). Requests are validated before they wait for a slot; each then
// runs on one of `parallel` slots (a DecodeEngine with its own KV cache): its prompt on its HTTP
// thread, its generated tokens in the decode loop, which feeds the next token of every running
// request through the model as one batch (decode_loop.h). Batched logits are bit-identical to
// single ones, so concurrent answers are independent. Not here: flag parsing and signals
// (cli/cmd_serve.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "toy/archs/model.h"
#include "toy/engines/speculative.h"
#include "toy/serve/adapters.h"
#include "toy/serve/chat_prompt.h"
#include "toy/serve/embeddings.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::serve {

struct ServerConfig {
  std::string model_name = "toy";   // the model's id: /v1/models lists it, answers carry it (--name)
  std::string model_file;           // the GGUF file's path (its name is also accepted as the model's id)
  int parallel = 1;                 // slots: requests generating at once
  int queue = 16;                   // requests that may wait for a slot; beyond that: 503
  int64_t n_ctx = 0;                // per slot; 0: the model's context, at most 4096
  DType kv_type = DType::F32;       // the slots' KV cache dtype (F32 or F16)
  size_t max_body_bytes = 1 << 20;  // larger bodies: 413
  std::string api_key;              // non-empty: /v1/* needs "Authorization: Bearer <key>"
  int timeout_s = 30;  // a request must arrive whole (line, headers, body) within this; a write may stall this long
  int max_connections_per_address = 16;  // connections one client address may hold open; more get 429
  bool log_requests = true;              // one line per completion on stderr
  Pooling pooling = Pooling::Mean;       // how /v1/embeddings pools an input's hidden states (--pooling)
  // Speculative decoding (-md, --spec-type ngram): a draft model of the same vocabulary (not
  // owned; it must outlive the server), or n-gram lookup of ngram_n tokens (0: none) drafting up to
  // ngram_m; `speculation` holds the defaults of a request's speculative.n_max, .n_min, .p_min.
  const Model* draft_model = nullptr;
  int64_t ngram_n = 0, ngram_m = 48;
  Speculation speculation;
};

class Server {
 public:
  // The model (without adapters) and tokenizer must outlive the server. Throws gguf::GgufError for
  // an adapter that does not fit the model.
  Server(const Model& model, std::shared_ptr<const Tokenizer> tokenizer, ChatPromptSource chat, ServerConfig config,
         AdapterSetup adapters = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (port 0: an ephemeral port) and returns the port; throws std::runtime_error.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns after in-flight requests have finished.
  void run();
  // Stops accepting, answers waiting requests 503, lets running ones finish. Any thread; idempotent.
  void stop();

  const ServerConfig& config() const;
  const ChatPrompter& chat() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace toy::serve
