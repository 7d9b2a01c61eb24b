// fuzz/fuzz_jinja.cpp — libFuzzer target: any template text is parsed and rendered against a fixed
// chat (system, user, assistant with a tool call, tool result), or refused with TemplateError.
//
// The text is parsed as chat templates are (trim_blocks and lstrip_blocks on) and rendered with a
// step budget well below the server's, so that one input costs milliseconds; what a template may
// do within the budget is bounded by the engine itself (jinja.h), and libFuzzer's -timeout and
// -rss_limit_mb catch a render that escapes it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "toy/chat/jinja.h"

namespace {

using json = nlohmann::ordered_json;

const json& chat_context() {
  static const json context = {
      {"messages", json::array({
                       {{"role", "system"}, {"content", "You are terse."}},
                       {{"role", "user"}, {"content", "Caf\xc3\xa9 \xe2\x9c\x93 <|im_end|> {{ x }}"}},
                       {{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls",
                         json::array({{{"type", "function"},
                                       {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}})}},
                       {{"role", "tool"}, {"content", "{\"temp\": 21.5}"}, {"tool_call_id", "call_0"}},
                       {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "and tomorrow?"}}})}},
                   })},
      {"tools",
       json::array({{{"type", "function"},
                     {"function",
                      {{"name", "get_weather"},
                       {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}})},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"add_generation_prompt", true},
      {"enable_thinking", false},
      {"date_string", "01 Dec 2026"},
  };
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = toy::chat::Template::parse(source, {.trim_blocks = true, .lstrip_blocks = true});
    std::tm now{};
    now.tm_year = 126, now.tm_mon = 11, now.tm_mday = 1;
    (void)t.render(chat_context(), {.now = now, .max_steps = 20'000});
  } catch (const toy::chat::TemplateError&) {  // a bad template is refused, with its position
  }
  return 0;
}
