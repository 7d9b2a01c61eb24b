// jinja_value.cpp: Python's data model for chat templates (see jinja_value.h).
#include "toy/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace toy::chat {

namespace {
constexpr int kMaxDepth = 512;  // nesting of lists, dicts and namespaces that str/tojson/== walk

void check_depth(int depth) {
  if (depth > kMaxDepth) throw EvalError("value nested deeper than 512 levels");
}

// Bytes in the UTF-8 sequence at s[i]; 1 for a byte that does not start a valid sequence.
size_t utf8_char_size(std::string_view s, size_t i) {
  uint8_t b = uint8_t(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}
}  // namespace

// The last owner of a container moves its children to a worklist and frees them one by one, so a
// list nested a million levels deep is not destroyed with a million nested destructor calls.
Value::~Value() {
  if (kind() < Kind::List || kind() > Kind::Namespace) return;
  std::vector<Value> pending;
  release_children(pending);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    v.release_children(pending);
  }
}

void Value::release_children(std::vector<Value>& out) {
  // Only nested containers go to the worklist; everything else can be freed in place.
  auto keep = [&](Value& v) {
    if (v.kind() >= Kind::List && v.kind() <= Kind::Namespace) out.push_back(std::move(v));
  };
  if (auto* l = std::get_if<std::shared_ptr<List>>(&v_); l && *l && l->use_count() == 1) {
    for (Value& v : **l) keep(v);
    (*l)->clear();
  } else if (auto* d = std::get_if<std::shared_ptr<Dict>>(&v_); d && *d && d->use_count() == 1) {
    for (auto& entry : (*d)->entries) keep(entry.second);
    (*d)->entries.clear();
  } else if (auto* n = std::get_if<std::shared_ptr<Namespace>>(&v_); n && *n && n->use_count() == 1) {
    for (auto& entry : (*n)->attrs.entries) keep(entry.second);
    (*n)->attrs.entries.clear();
  }
}

Value Value::list(List items) {
  Value v;
  v.v_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.v_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::ns(Dict attrs) {
  Value v;
  v.v_ = std::make_shared<Namespace>(Namespace{std::move(attrs)});
  return v;
}

Value Value::function(Function f) {
  Value v;
  v.v_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json(j, 0); }

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  check_depth(depth);
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
      return none();
    case T::boolean:
      return j.get<bool>();
    case T::number_integer:
      return j.get<int64_t>();
    case T::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? Value(int64_t(u)) : Value(double(u));
    }
    case T::number_float:
      return j.get<double>();
    case T::string:
      return j.get<std::string>();
    case T::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return list(std::move(items));
    }
    case T::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.entries.emplace_back(k, from_json(e, depth + 1));
      return dict(std::move(d));
    }
    default:
      throw EvalError("unsupported JSON value of type " + std::string(j.type_name()));
  }
}

std::string Value::type_name() const {
  static const char* names[] = {"undefined", "NoneType", "bool", "int",       "float",
                                "str",       "list",     "dict", "Namespace", "function"};
  return names[v_.index()];
}

int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(v_);
  if (is_int()) return std::get<int64_t>(v_);
  throw EvalError("expected an int, got " + type_name());
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  if (is_int() || is_bool()) return double(as_int());
  throw EvalError("expected a number, got " + type_name());
}

const std::string& Value::as_string() const {
  if (!is_string()) throw EvalError("expected a str, got " + type_name());
  return *std::get<std::shared_ptr<const std::string>>(v_);
}

const List& Value::as_list() const {
  if (!is_list()) throw EvalError("expected a list, got " + type_name());
  return *std::get<std::shared_ptr<List>>(v_);
}

const Dict& Value::as_dict() const {
  if (!is_dict()) throw EvalError("expected a dict, got " + type_name());
  return *std::get<std::shared_ptr<Dict>>(v_);
}

Dict& Value::as_namespace() const {
  if (!is_namespace()) throw EvalError("expected a namespace, got " + type_name());
  return std::get<std::shared_ptr<Namespace>>(v_)->attrs;
}

const Function& Value::as_function() const {
  if (!is_function()) throw EvalError("'" + type_name() + "' object is not callable");
  return *std::get<std::shared_ptr<const Function>>(v_);
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return as_int() != 0;
    case Kind::Float:
      return as_double() != 0.0;
    case Kind::String:
      return !as_string().empty();
    case Kind::List:
      return !as_list().empty();
    case Kind::Dict:
      return !as_dict().entries.empty();
    default:
      return true;
  }
}

namespace {

// Python's float repr: the shortest digits that round-trip, positional for 1e-4 <= |x| < 1e16,
// otherwise scientific with at least two exponent digits ("1e+16", "1.5e-05").
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
  std::string s(buf, end), sign;
  if (s[0] == '-') sign = "-", s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ex[16];
    std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + m + ex;
  }
  if (exp < 0) return sign + "0." + std::string(size_t(-exp - 1), '0') + digits;
  if (digits.size() <= size_t(exp) + 1) digits += std::string(size_t(exp) + 1 - digits.size(), '0');
  std::string frac = digits.substr(size_t(exp) + 1);
  return sign + digits.substr(0, size_t(exp) + 1) + "." + (frac.empty() ? "0" : frac);
}

uint32_t decode_utf8(std::string_view c) {
  auto b = [&](size_t i) { return uint32_t(uint8_t(c[i])); };
  if (c.size() == 2) return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
  if (c.size() == 3) return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
  if (c.size() == 4) return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
  return b(0);
}

// Python's repr of a str: single quotes unless the text has ' and no ".
std::string string_repr(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == q) {
          out += '\\', out += c;
        } else if (uint8_t(c) < 0x20 || c == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(uint8_t(c)));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out + q;
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  auto u = [&](uint32_t cp) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "\\u%04x", unsigned(cp));
    out += hex;
  };
  for (std::string_view c : utf8_chars(s)) {
    uint32_t cp = decode_utf8(c);
    if (cp == '"')
      out += "\\\"";
    else if (cp == '\\')
      out += "\\\\";
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (cp == '\b')
      out += "\\b";
    else if (cp == '\f')
      out += "\\f";
    else if (cp < 0x20 || (ensure_ascii && cp >= 0x7f && cp < 0x10000))
      u(cp);
    else if (ensure_ascii && cp >= 0x10000)
      u(0xD800 + ((cp - 0x10000) >> 10)), u(0xDC00 + ((cp - 0x10000) & 0x3FF));
    else
      out += c;
  }
  return out + "\"";
}

void dump_json(const Value& v, int indent, int level, bool sort_keys, bool ascii, std::string& out) {
  check_depth(level);
  auto newline = [&](int lvl) {
    if (indent >= 0) out += "\n" + std::string(size_t(indent) * size_t(lvl), ' ');
  };
  const char* sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_int() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float: {
      double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case Value::Kind::String:
      out += json_string(v.as_string(), ascii);
      return;
    case Value::Kind::List: {
      const List& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        dump_json(items[i], indent, level + 1, sort_keys, ascii, out);
      }
      newline(level);
      out += "]";
      return;
    }
    case Value::Kind::Dict: {
      auto entries = v.as_dict().entries;
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
      out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        out += json_string(entries[i].first, ascii) + ": ";
        dump_json(entries[i].second, indent, level + 1, sort_keys, ascii, out);
      }
      newline(level);
      out += "}";
      return;
    }
    default:
      throw EvalError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

// Python's index normalization for x[i]: negative counts from the end; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t i, size_t n) {
  if (i < 0) i += int64_t(n);
  if (i < 0 || i >= int64_t(n)) return std::nullopt;
  return size_t(i);
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const { return repr(0); }

std::string Value::repr(int depth) const {
  check_depth(depth);
  switch (kind()) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return as_int() ? "True" : "False";
    case Kind::Int:
      return std::to_string(as_int());
    case Kind::Float:
      return float_repr(as_double());
    case Kind::String:
      return string_repr(as_string());
    case Kind::List: {
      std::string out = "[";
      for (const Value& e : as_list()) out += (out.size() > 1 ? ", " : "") + e.repr(depth + 1);
      return out + "]";
    }
    case Kind::Dict: {
      std::string out = "{";
      for (const auto& [k, e] : as_dict().entries)
        out += (out.size() > 1 ? ", " : "") + string_repr(k) + ": " + e.repr(depth + 1);
      return out + "}";
    }
    case Kind::Namespace:
      return "<Namespace>";
    case Kind::Function:
      return "<function>";
  }
  return "";
}

std::string Value::to_json(int indent, bool sort_keys, bool ensure_ascii) const {
  std::string out;
  dump_json(*this, indent, 0, sort_keys, ensure_ascii, out);
  return out;
}

size_t Value::length() const {
  switch (kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return utf8_length(as_string());
    case Kind::List:
      return as_list().size();
    case Kind::Dict:
      return as_dict().entries.size();
    default:
      throw EvalError("object of type '" + type_name() + "' has no len()");
  }
}

List Value::elements() const {
  switch (kind()) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return as_list();
    case Kind::Dict: {
      List keys;
      for (const auto& entry : as_dict().entries) keys.emplace_back(entry.first);
      return keys;
    }
    case Kind::String: {
      List chars;
      for (std::string_view c : utf8_chars(as_string())) chars.emplace_back(std::string(c));
      return chars;
    }
    default:
      throw EvalError("'" + type_name() + "' object is not iterable");
  }
}

Value Value::attr(std::string_view name) const {
  if (is_dict()) return item(Value(std::string(name)));
  if (is_namespace()) {
    const Value* v = as_namespace().find(name);
    return v ? *v : Value();
  }
  return Value();
}

Value Value::item(const Value& key) const {
  if (is_dict()) {
    if (!key.is_string()) return Value();
    const Value* v = as_dict().find(key.as_string());
    return v ? *v : Value();
  }
  if (is_namespace() && key.is_string()) return attr(key.as_string());
  if ((is_list() || is_string()) && (key.is_int() || key.is_bool())) {
    if (is_list()) {
      auto i = normalize_index(key.as_int(), as_list().size());
      return i ? as_list()[*i] : Value();
    }
    const std::string& text = as_string();
    auto i = normalize_index(key.as_int(), utf8_length(text));
    if (!i) return Value();
    size_t at = 0;
    for (size_t k = 0; k < *i; ++k) at += utf8_char_size(text, at);
    return text.substr(at, utf8_char_size(text, at));
  }
  return Value();
}

Value Value::slice(std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step) const {
  if (!is_list() && !is_string()) throw EvalError("'" + type_name() + "' object is not subscriptable");
  std::vector<std::string_view> chars;
  if (is_string()) chars = utf8_chars(as_string());
  const int64_t n = int64_t(is_list() ? as_list().size() : chars.size());
  const int64_t st = step.value_or(1);
  if (st == 0) throw EvalError("slice step cannot be zero");
  // Python's slice.indices(): clamp to [0, n] going forward, to [-1, n-1] going backward.
  auto clamp = [&](std::optional<int64_t> i, int64_t fallback) {
    if (!i) return fallback;
    int64_t v = *i < 0 ? *i + n : *i;
    return st > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t lo = clamp(start, st > 0 ? 0 : n - 1), hi = clamp(stop, st > 0 ? n : -1);
  const int64_t stride = std::clamp<int64_t>(st, -(n + 1), n + 1);  // same elements, no overflow of i
  List items;
  std::string text;
  for (int64_t i = lo; stride > 0 ? i < hi : i > hi; i += stride) {
    if (is_list())
      items.push_back(as_list()[size_t(i)]);
    else
      text += chars[size_t(i)];
  }
  return is_list() ? list(std::move(items)) : Value(std::move(text));
}

bool operator==(const Value& a, const Value& b) { return Value::equal(a, b, 0); }

bool Value::equal(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None:
      return true;
    case K::String:
      return a.as_string() == b.as_string();
    case K::List:
      return std::equal(a.as_list().begin(), a.as_list().end(), b.as_list().begin(), b.as_list().end(),
                        [&](const Value& x, const Value& y) { return equal(x, y, depth + 1); });
    case K::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      return std::all_of(x.entries.begin(), x.entries.end(), [&](const auto& e) {
        const Value* other = y.find(e.first);
        return other && equal(*other, e.second, depth + 1);
      });
    }
    default:
      return a.v_ == b.v_;  // namespaces and functions: identity
  }
}

int Value::compare(const Value& a, const Value& b) { return compare(a, b, 0); }

int Value::compare(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (int c = compare(x[i], y[i], depth + 1)) return c;
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw EvalError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries)
    if (k == key) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : named)
    if (k == name) return v;
  return fallback;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0, n; i < s.size(); i += n) out.push_back(s.substr(i, n = utf8_char_size(s, i)));
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); i += utf8_char_size(s, i)) ++count;
  return count;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | cp >> 6), out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | cp >> 12), out += char(0x80 | (cp >> 6 & 0x3F)), out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | cp >> 18), out += char(0x80 | (cp >> 12 & 0x3F)), out += char(0x80 | (cp >> 6 & 0x3F)),
        out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace toy::chat
