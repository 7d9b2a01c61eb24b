// serve/tool_calls.h — OpenAI function calling: the request's tools, the calls in the model's text,
// and the grammar that forces a call.
//
// The chat template decides how a model writes a call; the three formats of the templates toy
// ships fixtures for are recognised from the template's text:
//   Hermes   (Qwen 2.5/3, Hermes, SmolLM3; and ChatML)  <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//   Llama3   (Llama 3.1/3.2)                            {"name": …, "parameters": {…}}
//   Mistral  (Mistral Nemo and others)                  [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
// parse_tool_calls() takes the calls out of an answer's text (calls naming a function the request
// does not declare, or whose JSON does not parse, stay text). tool_call_grammar() is the grammar of
// a call for tool_choice "required" or a named function, with each function's arguments compiled
// from its `parameters` schema, so a forced call always parses and validates.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace toy::serve {

enum class ToolFormat { Hermes, Llama3, Mistral };

// The format a chat template asks for: Mistral when it writes [TOOL_CALLS], Llama3 when it asks
// for "parameters" (<|python_tag|>), Hermes otherwise.
ToolFormat tool_format(const std::string& template_source);
const char* tool_format_name(ToolFormat f);

struct ToolChoice {
  enum Mode { Auto, None, Required, Named } mode = Auto;
  std::string name;  // Named: the function
};

struct ToolCall {
  std::string id;         // 9 letters and digits (what Mistral's templates demand of ids sent back)
  std::string name;       // a declared function
  std::string arguments;  // a JSON object, as text (OpenAI sends a string)
};

struct ToolAnswer {
  std::string content;  // the text outside the calls
  std::vector<ToolCall> calls;
};

// The calls in `text` (ids drawn from `seed`); none when the text holds no well-formed call of a
// declared function. `tools`: the request's validated tools array.
ToolAnswer parse_tool_calls(const std::string& text, ToolFormat f, const nlohmann::ordered_json& tools, uint64_t seed);

// GBNF for a forced call: one call of the named function, or of any declared function
// ("required"), with `parallel` one or more of them (Hermes and Mistral; Llama3 writes one). Throws
// GrammarError for a `parameters` schema that cannot be compiled.
std::string tool_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools, const ToolChoice& choice,
                              bool parallel);

// A streamed answer when tools may be called: its content goes out as it comes until a call may
// begin (Hermes: "<tool_call>", or what could be its start; Llama3 and Mistral: an answer whose
// first character is '{', '[' or '<'); from there the text is held, to be parsed as calls once the
// answer ends, or sent as content when it is not one.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat f) : f_(f) {}
  std::string push(const std::string& text);  // what can go out as content now
  const std::string& held() const { return held_; }

 private:
  ToolFormat f_;
  std::string held_;
  bool in_call_ = false, plain_ = false;  // plain_: Llama3/Mistral answers that are not calls
};

// Text the prompt must end with before a forced call: Mistral's [TOOL_CALLS] is a control token,
// which a grammar over token texts cannot write. "" for the others.
std::string forced_call_prefix(ToolFormat f);

}  // namespace toy::serve
