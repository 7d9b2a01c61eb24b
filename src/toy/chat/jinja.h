// jinja.h: a Jinja2 template engine, enough for the chat templates that models ship in
// `tokenizer.chat_template`. A template is lexed and parsed once into a tree (Template::parse) and then
// rendered any number of times against a JSON context (Template::render).
//
// Supported (semantics follow Python Jinja2 3.x; the full list is in docs/chat-templates.md):
//   {{ expr }}, {% stmt %}, {# comment #}, whitespace control {%- -%} {{- -}} {#- -#} {%+ +%},
//   trim_blocks / lstrip_blocks / keep_trailing_newline, {% raw %};
//   if/elif/else, for (tuple targets, `if` filter, else, loop.*, break/continue), set (names, tuples,
//   namespace attributes, block form), macro (defaults, caller), call blocks, filter blocks,
//   {% generation %} (HF's marker, rendered as its body);
//   expressions: literals, lists, dicts, arithmetic, ~, comparisons, and/or/not, in, is-tests,
//   conditional expressions, attributes, subscripts and slices, calls, filters;
//   globals: range, namespace, raise_exception, strftime_now.
// Not supported: template inheritance and includes (extends, block, include, import), recursive loops,
// autoescaping, *args/**kwargs in calls, arbitrary-precision ints (int64 overflow is an error).
//
// Bad templates never crash the process: syntax errors, unknown filters/tests and runtime errors throw
// TemplateError with the line and column; recursion depth, loop iterations and output size are bounded.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace toy::chat {

// A syntax or runtime error in a template, or a template's own raise_exception(message).
// what() is "line L, column C: message" (without the position when it is unknown).
class TemplateError : public std::runtime_error {
 public:
  TemplateError(const std::string& message, int line, int column);
  const std::string& message() const { return message_; }
  int line() const { return line_; }      // 1-based; 0 when unknown
  int column() const { return column_; }  // 1-based, in bytes

 private:
  std::string message_;
  int line_, column_;
};

// Whitespace handling, as jinja2.Environment's options of the same names. The defaults are Jinja's;
// HF transformers and llama.cpp render chat templates with trim_blocks and lstrip_blocks on.
struct ParseOptions {
  bool trim_blocks = false;            // drop the first newline after a block tag or comment
  bool lstrip_blocks = false;          // drop spaces and tabs before a block tag or comment that starts a line
  bool keep_trailing_newline = false;  // keep the template's final newline
};

// A render's budgets. Values are shared, so the bytes of every value a render makes (strings, and
// lists and dicts at their in-memory size per item, nested copies included: `a + [a]` costs all of a
// again) bound the memory it can hold; scanning a value costs its size too. Beyond any budget the
// render fails with TemplateError naming it, so a hostile template (one in a downloaded GGUF) costs
// at most this much per render.
struct RenderOptions {
  std::optional<std::tm> now = {};        // what strftime_now() formats; unset: the local time when rendering
  int64_t max_steps = 1'000'000;          // loop iterations plus macro calls
  int64_t max_bytes = int64_t(64) << 20;  // bytes of values made or scanned (see above)
  double max_seconds = 10;                // wall-clock time
};

class Template {
 public:
  // Throws TemplateError on a syntax error, an unknown filter or test, or absurdly deep nesting.
  static Template parse(std::string_view source, const ParseOptions& options = {});

  // `context` is a JSON object whose keys become template variables (object key order is kept, as in
  // Python dicts; pass nlohmann::ordered_json to control it). Throws TemplateError.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  struct Impl;  // the parsed tree (jinja_ast.h)

 private:
  explicit Template(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace toy::chat
