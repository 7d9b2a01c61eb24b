// jinja_value.h: the values a chat template computes with. This is Python's data model, cut down to what
// Jinja templates use: undefined, none, bool, int (int64), float (double), str (UTF-8), list, dict
// (string keys, insertion order), namespace and function (builtins and macros). Values are shared by
// reference, as in Python. Lists and dicts are immutable once built (as in HF's ImmutableSandboxedEnvironment),
// so only namespaces change: `{% set ns.x = 1 %}` is seen by every holder of `ns`.
//
// Nesting is bounded: operations that walk a value (str, tojson, ==) stop at depth 512 with an EvalError,
// and destroying a deeply nested value does not recurse.
//
// Here: conversion from JSON, Python's str()/repr()/json.dumps() text, truthiness, ==, ordering, len(),
// iteration, attribute/item access and slicing. Not here: operators and filters (jinja_builtins.h),
// parsing and evaluation (jinja.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace toy::chat {

class Value;
struct Dict;
struct Namespace;
struct CallArgs;
using List = std::vector<Value>;
using Function = std::function<Value(const CallArgs&)>;

// Thrown by value operations and builtins. The evaluator adds the template position of the failing
// expression and rethrows it as a TemplateError (jinja.h).
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  // In the order of the variant below.
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() = default;  // undefined
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  ~Value();
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value none() {
    Value v;
    v.v_ = nullptr;
    return v;
  }
  static Value list(List items = {});
  static Value dict(Dict d);
  static Value ns(Dict attrs);
  static Value function(Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_function() const { return kind() == Kind::Function; }

  // Accessors throw EvalError naming the actual type when the kind is wrong.
  int64_t as_int() const;    // int or bool
  double as_double() const;  // any number
  const std::string& as_string() const;
  const List& as_list() const;
  const Dict& as_dict() const;
  Dict& as_namespace() const;  // shared and mutable
  const Function& as_function() const;

  bool truthy() const;
  std::string str() const;   // Python str(); what {{ }} prints (undefined prints "")
  std::string repr() const;  // Python repr(), used inside str() of lists and dicts
  // Python json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys): HF's tojson.
  // indent < 0 means none; separators are (", ", ": ") without indent and ("," , ": ") with it.
  std::string to_json(int indent = -1, bool sort_keys = false, bool ensure_ascii = false) const;
  std::string type_name() const;  // Python's name of the type, for error messages: "str", "NoneType"

  size_t length() const;                    // len(): code points of a str, items of a list/dict; undefined has 0
  List elements() const;                    // list(x): items of a list, keys of a dict, code points of a str
  Value attr(std::string_view name) const;  // x.name; undefined when absent (also on undefined)
  Value item(const Value& key) const;       // x[key]; undefined when absent, negative indexes count back
  Value slice(std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step) const;

  friend bool operator==(const Value& a, const Value& b);
  static int compare(const Value& a, const Value& b);  // <0, 0, >0; EvalError when Python can't order them

 private:
  static bool equal(const Value& a, const Value& b, int depth);
  static int compare(const Value& a, const Value& b, int depth);
  static Value from_json(const nlohmann::ordered_json& j, int depth);
  std::string repr(int depth) const;
  void release_children(std::vector<Value>& out);

  // Strings are shared too: copying a Value never copies text.
  std::variant<std::monostate, std::nullptr_t, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Function>>
      v_;
};

// An insertion-ordered dict with string keys. Linear lookup: template dicts have a handful of keys.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);  // overwrites in place or appends
};

// namespace(): a mutable attribute bag, the only object `{% set obj.attr = ... %}` may assign to.
struct Namespace {
  Dict attrs;
};

// Arguments of a call, as Python binds them: f(1, 2, key=3).
struct CallArgs {
  List positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at position `index`, else the one called `name`, else `fallback`.
  Value get(size_t index, std::string_view name, Value fallback = {}) const;
};

// UTF-8 helpers: the code points of `s` as byte ranges (a stray byte is its own "character"), their
// number, and appending a code point.
std::vector<std::string_view> utf8_chars(std::string_view s);
size_t utf8_length(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace toy::chat
