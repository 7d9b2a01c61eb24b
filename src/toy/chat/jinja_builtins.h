// jinja_builtins.h (internal to the engine): the operations templates call by name: Jinja's filters and
// tests, the Python str/list/dict methods templates use (`content.strip()`, `message.get('x')`), the
// global functions, and the binary operators. All work on Values and throw EvalError, which the evaluator
// turns into a positioned TemplateError. The supported names are listed in docs/chat-templates.md.
#pragma once

#include <ctime>
#include <optional>
#include <string_view>

#include "toy/chat/jinja_value.h"

namespace toy::chat {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
bool apply_test(std::string_view name, const Value& input, const CallArgs& args);

// self.name(args) for a Python str or dict method; nullopt when self has no such method.
std::optional<Value> call_method(const Value& self, std::string_view name, const CallArgs& args);

// range, namespace, dict, raise_exception and strftime_now (which formats `now`). Each namespace()
// is also added to `namespaces`, which must outlive the functions: the renderer empties them at the end,
// breaking any reference cycles a template built between namespaces.
Dict global_functions(const std::tm& now, std::vector<Value>* namespaces);

// a op b for op in + - * / // % ** ~ (Python semantics; int64 overflow is an error), and `item in container`.
Value binary_op(std::string_view op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

}  // namespace toy::chat
