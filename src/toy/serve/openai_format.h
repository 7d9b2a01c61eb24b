// serve/openai_format.h — the JSON objects of OpenAI's completions and chat completions APIs.
//
// Shapes follow the API reference as the official SDKs parse them:
//   completion        {"id","object":"text_completion","created","model","choices":[{"text","index",
//                      "logprobs","finish_reason"}],"usage"}
//   chat.completion   {"id","object":"chat.completion",...,"choices":[{"index","message":{"role",
//                      "content", "tool_calls"?},"logprobs","finish_reason"}],"usage"}
//   stream chunks     "chat.completion.chunk" with choices[].delta (the first carries the role,
//                      the last an empty delta and finish_reason) / "text_completion" with text;
//                      with stream_options.include_usage every chunk has "usage": null and one
//                      more chunk with "choices": [] carries the usage.
// Logprobs: chat {"content": [{"token","logprob","bytes","top_logprobs":[...]}]}; completions the
// legacy {"tokens","token_logprobs","top_logprobs":[{text: logprob}],"text_offset"}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "toy/serve/completion.h"
#include "toy/serve/request.h"

namespace toy::serve {

using json = nlohmann::ordered_json;

// What every response object of one request shares.
struct ResponseHeader {
  Endpoint endpoint;
  std::string id;       // "chatcmpl-…" / "cmpl-…"
  int64_t created = 0;  // unix seconds
  std::string model;
  bool include_usage = false;
};

ResponseHeader make_header(Endpoint endpoint, const std::string& model, bool include_usage);

// The complete (non-streamed) answer, choice i from results[i] (n ≥ 1). `echo`: the prompt text in
// front (completions only).
json response_json(const ResponseHeader& h, const std::vector<CompletionResult>& results, const Tokenizer& t,
                   bool logprobs, const std::string* echo);

// The usage of a request's choices together: the prompt counted once (with the cached tokens of
// the first choice's prompt), the completion tokens of all choices.
CompletionResult total_usage(const std::vector<CompletionResult>& results);
// llama-server's "timings": cache_n, prompt_n (the prompt tokens fed), prompt_ms,
// prompt_per_token_ms, prompt_per_second, predicted_* likewise, and with speculative decoding
// draft_n and draft_n_accepted. In a complete answer (all choices) and in each choice's last chunk.
json timings_json(const CompletionResult& r);

// Builds the stream chunks of one request, one choice after the other (set_choice); keeps the
// running text offset for legacy logprobs.
class ChunkWriter {
 public:
  ChunkWriter(ResponseHeader h, const Tokenizer& t, bool logprobs) : h_(std::move(h)), t_(t), logprobs_(logprobs) {}
  void set_choice(int index) {  // the chunks from now on belong to choice `index`
    index_ = index;
    offset_ = 0;
  }
  json first(const std::string& echo_text,
             const std::vector<TokenLogprob>& echo_tokens);  // role (chat) / echoed prompt
  json delta(const Delta& d);
  // Chat: a piece of a tool call as OpenAI streams them: the call's index, id, type and name with
  // empty arguments first, then pieces of its arguments (tool_calls.h, ToolCallStream).
  json tool_call(const ToolCallDelta& d);
  json last(const CompletionResult& r);  // the finish_reason, and llama-server's timings
  json usage(const CompletionResult& r);

 private:
  json chunk(json choice);
  ResponseHeader h_;
  const Tokenizer& t_;
  bool logprobs_;
  int index_ = 0;
  size_t offset_ = 0;
};

// OpenAI's usage object; prompt_tokens_details.cached_tokens: prompt tokens served from the
// slot's KV cache (cache_prompt).
json usage_json(const CompletionResult& r);

// SSE framing: "data: <json>\n\n"; invalid UTF-8 from byte tokens becomes U+FFFD.
std::string sse(const json& j);
std::string dump(const json& j);

}  // namespace toy::serve
