// serve/tool_calls.h — OpenAI function calling: the request's tools, the calls in the model's text,
// and the grammar that forces a call.
//
// The chat template decides how a model writes a call; the three formats of the templates toy
// ships fixtures for are recognised from the template's text:
//   Hermes   (Qwen 2.5/3, Hermes, SmolLM3; and ChatML)  <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//   Llama3   (Llama 3.1/3.2)                            {"name": …, "parameters": {…}}
//   Mistral  (Mistral Nemo and others)                  [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
// parse_tool_calls() takes the calls out of an answer's text (calls naming a function the request
// does not declare, or whose JSON does not parse, stay text); a streamed answer's calls go out as
// they are written (ToolCallStream). tool_call_grammar() is the grammar of
// a call for tool_choice "required" or a named function, with each function's arguments compiled
// from its `parameters` schema, so a forced call always parses and validates.
#pragma once

#include <random>
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
  std::string id;    // 9 letters and digits (what Mistral's templates demand of ids sent back)
  std::string name;  // a declared function
  // A JSON object, as text (OpenAI sends a string): the model's text of it without the blanks
  // between tokens (those inside strings kept), so that it can go out while it is written.
  std::string arguments;
};

struct ToolAnswer {
  std::string content;  // the text outside the calls
  std::vector<ToolCall> calls;
  bool cut = false;  // the text ends inside one more call (max_tokens): left out, the others kept
};

// The calls in `text` (ids drawn from `seed`); none when the text holds no well-formed call of a
// declared function. A call the text ends inside, after finished ones (Hermes, Mistral), is left
// out of both calls and content, and `cut` says so. `tools`: the request's validated tools array.
ToolAnswer parse_tool_calls(const std::string& text, ToolFormat f, const nlohmann::ordered_json& tools, uint64_t seed);

// GBNF for a forced call: one call of the named function, or of any declared function
// ("required"), with `parallel` one or more of them (Hermes and Mistral; Llama3 writes one). Throws
// GrammarError for a `parameters` schema that cannot be compiled.
std::string tool_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools, const ToolChoice& choice,
                              bool parallel);

// A call as the beginning of an answer shows it: its name once written whole, and its arguments
// (as ToolCall::arguments) as far as they go.
struct PartialCall {
  std::string name;
  std::string arguments;
};
// The calls the beginning `text` of an answer shows, in the shape the formats write them:
// {"name": "f", "arguments" (Llama3: "parameters"): {…}, …}, the name first and declared. Stops
// before anything else (parse_tool_calls() has the last word once the answer is whole). Arguments
// written as a JSON string are not shown until then. A call's name and arguments only grow as
// `text` does.
std::vector<PartialCall> partial_tool_calls(const std::string& text, ToolFormat f, const nlohmann::ordered_json& tools);

// A piece of a streamed tool call, as OpenAI streams them: first, with `name` set, the call's id
// and name (arguments ""), then its arguments in pieces.
struct ToolCallDelta {
  size_t index = 0;  // which call of the answer
  std::string id, name;
  std::string arguments;
};

// A streamed answer when tools may be called: its content goes out as it comes until a call may
// begin (Hermes: "<tool_call>", or what could be its start; Llama3 and Mistral: an answer whose
// first character is '{', '[' or '<'); from there the text is held, and each call goes out as it
// is written (partial_tool_calls: its id and name, then its arguments as the tokens come). Once
// the answer ends, finish() sends what the whole answer's calls add: calls that were not in the
// streamable shape, the arguments written as a string. Call ids are drawn from `seed` in order,
// as parse_tool_calls() draws them.
class ToolCallStream {
 public:
  ToolCallStream(ToolFormat f, const nlohmann::ordered_json& tools, uint64_t seed);
  struct Update {
    std::string content;               // to go out as content now
    std::vector<ToolCallDelta> calls;  // call pieces to go out now
  };
  Update push(const std::string& text);
  // The pieces that complete `calls` (parse_tool_calls() of the whole answer), whose ids become
  // those that went out. A streamed call the whole answer does not confirm (cut short by
  // max_tokens, broken JSON) stays as it went out: a stream cannot take a piece back.
  std::vector<ToolCallDelta> finish(std::vector<ToolCall>& calls);
  const std::string& held() const { return held_; }
  size_t calls_started() const { return sent_.size(); }

 private:
  std::string content(const std::string& text);  // what of `text` can go out as content
  ToolFormat f_;
  const nlohmann::ordered_json& tools_;
  std::mt19937_64 rng_;  // the calls' ids
  std::string held_;
  bool in_call_ = false, plain_ = false;  // plain_: Llama3/Mistral answers that are not calls
  std::vector<ToolCall> sent_;            // the calls begun, with the arguments sent so far
};

// Text the prompt must end with before a forced call: Mistral's [TOOL_CALLS] is a control token,
// which a grammar over token texts cannot write. "" for the others.
std::string forced_call_prefix(ToolFormat f);

}  // namespace toy::serve
