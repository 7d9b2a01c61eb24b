// serve/request.h — OpenAI request bodies, validated into one typed struct.
//
// parse_request() is the only place that looks at client JSON: every field the server uses is
// checked for type and range here, and a mistake becomes ApiError 400 naming the field (never
// an exception from deep inside generation). Unknown fields are ignored, as many clients send
// extras (user, service_tier, ...), and listed in ignored_fields for the log; fields whose meaning we cannot honour (best_of > 1, suffix,
// non-text content parts, JSON Schema keywords a grammar cannot enforce) are refused rather than silently dropped.
// A `grammar` (GBNF) or a `response_format` of json_object / json_schema is compiled here, so a
// malformed one is a 400 naming the line or the schema path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "toy/engines/grammar.h"
#include "toy/engines/sampler.h"
#include "toy/serve/api_error.h"
#include "toy/serve/tool_calls.h"

namespace toy::serve {

enum class Endpoint { Completions, Chat };

// One adapter's scale, as llama-server's `lora` field and POST /lora-adapters list them.
struct LoraScale {
  int64_t id = 0;  // the adapter's index in GET /lora-adapters
  float scale = 0;
};

// What a request samples with when it sets nothing: OpenAI's temperature 1 and no cut, the
// other samplers off (llama-server's penalty window of 64 tokens).
inline SamplerConfig openai_sampling() {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  return c;
}

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::optional<std::string> model;  // absent: the served model

  // /v1/completions: a text prompt or token ids (ids get no BOS added, as in llama.cpp).
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  // /v1/chat/completions: messages with string content (text parts joined), and tools if given.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when absent; else validated [{"type": "function", "function": {"name", …}}]
  ToolChoice tool_choice;        // tool_choice: auto (the default with tools), none, required, a named function
  bool parallel_tool_calls = true;

  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens; absent: default
  // Sampling (engines/sampler.h) with OpenAI's defaults: temperature 1, no cut. The rest under
  // llama-server's names (top_k, min_p, typical_p, mirostat, dry_*, xtc_*, samplers, …). The
  // seed is per choice; logit_bias's ids are checked against the vocabulary once it is known.
  SamplerConfig sampling = openai_sampling();
  std::vector<std::pair<std::string, float>> logit_bias_text;     // llama.cpp's [["text", bias]]: on each of its tokens
  std::optional<std::vector<std::string>> dry_sequence_breakers;  // absent: llama.cpp's ("\n", ":", "\"", "*")
  std::optional<uint64_t> seed;                                   // choice i samples with seed + i
  int n = 1;                                                      // choices, generated one after the other
  std::vector<std::string> stop;                                  // up to 16 non-empty strings
  bool stream = false, include_usage = false;
  int logprobs = -1;         // -1: none; k ≥ 0: the chosen token plus k alternatives
  bool echo = false;         // completions: prompt text (and its logprobs) in the answer
  bool ignore_eos = false;   // extension (llama.cpp)
  bool cache_prompt = true;  // extension (llama.cpp): reuse the slot's KV rows of a shared prompt prefix
  // Constrained decoding: the grammar every answer follows (from `grammar`, or response_format
  // json_object / json_schema); null for free text.
  std::shared_ptr<const Grammar> grammar;
  // extension (llama.cpp): the LoRA adapters' scales for this request (unlisted ones 0); absent:
  // the global scales (serve/adapters.h)
  std::optional<std::vector<LoraScale>> lora;
  // llama-server's speculative.n_max, .n_min, .p_min: a request's own draft limits.
  std::optional<int64_t> draft_max, draft_min;
  std::optional<float> draft_p_min;

  // Top-level fields the server does not read (for a warning in the log), each cut to 40 bytes
  // and printable; at most kMaxIgnoredFields of them.
  std::vector<std::string> ignored_fields;
};
constexpr size_t kMaxIgnoredFields = 8;

// Arrays and objects nested deeper than this are refused (400) while parsing, before they are
// built: deep values cost stack in everything recursive that touches them (dump, templates).
constexpr int kMaxJsonDepth = 64;

// JSON text from a client (or from the model) as a value; discarded when it is not JSON or nests
// deeper than kMaxJsonDepth (then *too_deep is set, if given). Every JSON text the server parses
// goes through here: the body, and strings that hold JSON (tool-call arguments, tool calls in
// an answer).
nlohmann::ordered_json parse_json_text(std::string_view text, bool* too_deep = nullptr);

// A request body as JSON; throws ApiError(400) when it is not JSON or nests deeper than
// kMaxJsonDepth. Every route's body goes through here.
nlohmann::ordered_json parse_json_body(std::string_view text);

// Throws ApiError(400) for a body that is not an object, wrong types, bad ranges, missing fields.
// `n_adapters`: the LoRA adapters the server has (for `lora`, see parse_lora_scales).
CompletionRequest parse_request(const nlohmann::ordered_json& body, Endpoint endpoint, size_t n_adapters);

// `lora` of a request, or POST /lora-adapters' body (`param` names it in errors):
// [{"id": integer, "scale": number}, ...], at most `n_adapters` entries, each id at most once,
// |scale| ≤ kMaxLoraScale. The ids are checked against the adapters the server has by
// AdapterModels. Throws ApiError(400).
constexpr double kMaxLoraScale = 100;
std::vector<LoraScale> parse_lora_scales(const nlohmann::ordered_json& v, const std::string& param, size_t n_adapters);

// POST /v1/embeddings: OpenAI's request. `input` is a string, an array of strings, an array of
// token ids or an array of such arrays: one embedding per string or id list, in order.
struct EmbeddingInput {
  std::string text;          // tokenized like a completion's prompt (BOS as the tokenizer says)
  std::vector<int32_t> ids;  // used as given (no BOS added, as in llama.cpp)
  bool is_ids = false;
};
struct EmbeddingsRequest {
  std::optional<std::string> model;  // absent: the served model
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;                      // encoding_format "base64": each vector as base64 of its float32 bytes
  std::optional<int64_t> dimensions;        // checked against the model's width once it is known
  std::vector<std::string> ignored_fields;  // as CompletionRequest's
};
constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request
// Throws ApiError(400): not an object, no or an empty input (an empty string, array or id list),
// elements of mixed kinds, wrong types, an unknown encoding_format.
EmbeddingsRequest parse_embeddings(const nlohmann::ordered_json& body);

// POST /tokenize: {"content": string, "add_special"?: bool, "with_pieces"?: bool}.
struct TokenizeRequest {
  std::string content;
  bool add_special = false, with_pieces = false;
};
TokenizeRequest parse_tokenize(const nlohmann::ordered_json& body);

// POST /detokenize: {"tokens": [id, ...]}, each id in [0, n_vocab).
std::vector<int32_t> parse_detokenize(const nlohmann::ordered_json& body, int64_t n_vocab);

}  // namespace toy::serve
