// fuzz/fuzz_http_request.cpp — libFuzzer target: the body of a completion request, as the server
// receives it, is validated into a CompletionRequest or refused with a client error (4xx).
//
// Input layout: byte 0 chooses the route (bit 0: /v1/completions or /v1/chat/completions); the rest
// is the HTTP body, parsed as the server does (serve::parse_json_text, depth-limited) and given to
// serve::parse_request(), for a server with two LoRA adapters. Any other exception, or an ApiError
// that is not 4xx, is a server error a client could trigger, and aborts. The /tokenize and /detokenize bodies are checked inside their
// handlers in server.cpp, which this target does not reach.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "toy/serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using json = nlohmann::ordered_json;
  using toy::serve::Endpoint;
  if (size == 0) return 0;
  const Endpoint endpoint = data[0] & 1 ? Endpoint::Chat : Endpoint::Completions;
  const std::string_view body_text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const json body = toy::serve::parse_json_text(body_text);
  if (body.is_discarded()) return 0;  // the server answers 400 invalid_json or json_too_deep
  try {
    const toy::serve::CompletionRequest r = toy::serve::parse_request(body, endpoint, /*n_adapters=*/2);
    if (r.prompt_is_ids)
      for (int32_t id : r.prompt_ids)
        if (id < 0) std::abort();  // ids are checked against the vocabulary later, signs here
  } catch (const toy::serve::ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();                  // a client's mistake is never a 5xx
    (void)e.body().dump(-1, ' ', false, json::error_handler_t::replace);  // as the server sends it
  }
  return 0;
}
