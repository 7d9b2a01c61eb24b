// serve/handle_embeddings.cpp — POST /v1/embeddings (OpenAI's API; the vectors as llama-server's).
//
// The request is checked whole first (fields, token ids against the vocabulary, each input's
// length against a slot's context: 4xx), then waits for a slot like a completion (503 when the
// queue is full), so --parallel also bounds how many embedding forwards run at once. The slot's
// KV cache is left alone: an input is fed without a cache (embeddings.h), so the slot's cached
// prompt is still there for the next completion.
#include "toy/serve/embeddings.h"
#include "toy/serve/openai_format.h"
#include "toy/serve/server_impl.h"

namespace toy::serve {

void Server::Impl::handle_embeddings(const httplib::Request& http_req, const std::string& body,
                                     httplib::Response& res) {
  if (stopping) throw no_slot();  // 503 shutting down
  const EmbeddingsRequest r = parse_embeddings(parse_json_body(body));
  const int64_t D = model.config().d_model, n_ctx = slots.n_ctx();
  if (r.dimensions && *r.dimensions != D)
    throw bad_request(
        "dimensions",
        "this model's embeddings have " + std::to_string(D) + " dimensions; other sizes are not supported",
        "unsupported_value");
  warn_ignored_fields(http_req.path, r.ignored_fields);

  // Each input as token ids: text as a completion's prompt is tokenized (BOS as the tokenizer
  // says, special tokens recognised), ids as given.
  std::vector<std::vector<int32_t>> inputs;
  int64_t n_tokens = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    const std::string param = r.inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    std::vector<int32_t> ids = in.is_ids ? in.ids
                                         : tokenizer->encode(in.text, /*add_special=*/true,
                                                             /*parse_special=*/true);
    for (int32_t id : ids)
      if (id >= tokenizer->n_vocab())
        throw bad_request(param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(tokenizer->n_vocab()) + ")");
    if (int64_t(ids.size()) > n_ctx)
      throw ApiError(400,
                     "'" + param + "' has " + std::to_string(ids.size()) +
                         " tokens, more than this model's maximum context length of " + std::to_string(n_ctx),
                     param, "context_length_exceeded");
    n_tokens += int64_t(ids.size());
    inputs.push_back(std::move(ids));
  }

  auto lease = slots.acquire();
  if (!lease) throw no_slot();
  const std::shared_ptr<const Model> m = adapters.model(adapters.request_scales(std::nullopt));  // global scales
  const int fd = client_socket();
  json data = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!client_alive(fd)) {  // nobody to answer: stop computing
      log(http_req.path + " slot " + std::to_string(lease->slot()) + ": client went away after " + std::to_string(i) +
          " of " + std::to_string(inputs.size()) + " inputs");
      return;
    }
    const std::vector<float> e = embed(*m, inputs[i], config.pooling);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", r.base64 ? json(base64_floats(e)) : json(e)}});
  }
  log(http_req.path + " slot " + std::to_string(lease->slot()) + ": " + std::to_string(inputs.size()) + " input(s), " +
      std::to_string(n_tokens) + " tokens, " + pooling_name(config.pooling) + " pooling");
  lease->release();
  metrics.count_embeddings(int64_t(inputs.size()), n_tokens);
  send_json(res, {{"object", "list"},
                  {"data", std::move(data)},
                  {"model", config.model_name},
                  {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}});
}

}  // namespace toy::serve
