// jinja_builtins.cpp: filters, tests, methods, global functions and operators (see jinja_builtins.h).
// Each follows the Python function it is named after: Jinja's filters.py/tests.py, or Python's str,
// list and dict methods. Case mapping is ASCII-only.
#include "toy/chat/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace toy::chat {
namespace {

constexpr size_t kMaxStringBytes = size_t(16) << 20;  // bigger strings or lists are refused (runaway templates)
constexpr size_t kMaxListItems = size_t(1) << 20;
constexpr int64_t kMaxRange = 100000;  // range() length, as Jinja's sandbox (MAX_RANGE)

Value checked_string(std::string s) {
  if (s.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
  return s;
}
Value checked_list(List l) {
  if (l.size() > kMaxListItems) throw EvalError("list result exceeds 1M items");
  return Value::list(std::move(l));
}

bool is_py_space(char c) { return c && std::strchr(" \t\n\r\v\f\x1c\x1d\x1e\x1f", c); }
bool absent(const Value& v) { return v.is_undefined() || v.is_none(); }

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(uint8_t(ch)));
  return s;
}
std::string upper(std::string s) {
  for (char& ch : s) ch = char(std::toupper(uint8_t(ch)));
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = char(std::toupper(uint8_t(out[0])));
  return out;
}
// Python's str.title(): a letter after a letter is lowered, any other letter raised.
std::string py_title(std::string s) {
  bool prev_letter = false;
  for (char& ch : s) {
    bool letter = std::isalpha(uint8_t(ch));
    if (letter) ch = char(prev_letter ? std::tolower(uint8_t(ch)) : std::toupper(uint8_t(ch)));
    prev_letter = letter;
  }
  return s;
}
// Jinja's title filter: words start after whitespace or any of "-({[<"; the rest of a word is lowered.
std::string jinja_title(std::string s) {
  bool start = true;
  for (char& ch : s) {
    if (is_py_space(ch) || std::strchr("-({[<", ch)) {
      start = true;
      continue;
    }
    ch = char(start ? std::toupper(uint8_t(ch)) : std::tolower(uint8_t(ch)));
    start = false;
  }
  return s;
}

// str.strip/lstrip/rstrip: `chars` none means whitespace, otherwise the set of its code points.
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const bool whitespace = absent(chars);
  std::vector<std::string_view> set;
  if (!whitespace) set = utf8_chars(chars.as_string());
  const std::string_view text = s;
  auto strippable = [&](std::string_view rest, bool front) -> size_t {  // bytes of a strippable char, or 0
    if (whitespace) return is_py_space(front ? rest.front() : rest.back()) ? 1 : 0;
    for (std::string_view c : set)
      if (front ? rest.starts_with(c) : rest.ends_with(c)) return c.size();
    return 0;
  };
  size_t b = 0, e = text.size(), n;
  while (left && b < e && (n = strippable(text.substr(b, e - b), true))) b += n;
  while (right && e > b && (n = strippable(text.substr(b, e - b), false))) e -= n;
  return std::string(text.substr(b, e - b));
}

// str.split(sep=None, maxsplit=-1).
List split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (absent(sep)) {  // runs of whitespace, ignoring leading and trailing ones
    size_t i = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        out.emplace_back(s.substr(i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.as_string();
  if (d.empty()) throw EvalError("empty separator");
  size_t i = 0;
  for (size_t j; (maxsplit < 0 || int64_t(out.size()) < maxsplit) && (j = s.find(d, i)) != std::string::npos;
       i = j + d.size())
    out.emplace_back(s.substr(i, j - i));
  out.emplace_back(s.substr(i));
  return out;
}

// str.replace(old, new, count=-1); an empty `old` matches between all characters, as in Python.
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    auto chars = utf8_chars(s);
    for (size_t i = 0; i <= chars.size(); ++i) {
      if (count < 0 || int64_t(i) < count) out += to;
      if (i < chars.size()) out += chars[i];
      if (out.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
    }
    return out;
  }
  size_t i = 0;
  for (size_t j; count-- != 0 && (j = s.find(from, i)) != std::string::npos; i = j + from.size()) {
    out += s.substr(i, j - i) + to;
    if (out.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
  }
  return out + s.substr(i);
}

bool starts_or_ends(const std::string& s, const Value& affix, bool start) {
  if (affix.is_list()) {
    const List& options = affix.as_list();
    return std::any_of(options.begin(), options.end(), [&](const Value& a) { return starts_or_ends(s, a, start); });
  }
  const std::string& a = affix.as_string();
  return start ? s.starts_with(a) : s.ends_with(a);
}

// An attribute path as map/selectattr/sort take it: "a.b", "items.0".
Value get_path(Value v, const std::string& path) {
  size_t i = 0;
  while (true) {
    size_t j = path.find('.', i);
    std::string part = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    int64_t index = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    v = (ec == std::errc() && end == part.data() + part.size()) ? v.item(Value(index)) : v.attr(part);
    if (j == std::string::npos) return v;
    i = j + 1;
  }
}

// Arguments after the first n positional ones (the arguments a filter or test name passes on).
CallArgs rest(const CallArgs& a, size_t n) {
  CallArgs r;
  if (a.positional.size() > n) r.positional.assign(a.positional.begin() + long(n), a.positional.end());
  r.named = a.named;
  return r;
}

// The sort key for sort/unique/dictsort: optional attribute, strings lowered unless case-sensitive.
Value sort_key(const Value& v, const Value& attribute, bool case_sensitive) {
  Value k = absent(attribute) ? v : get_path(v, attribute.str());
  return (!case_sensitive && k.is_string()) ? Value(lower(k.as_string())) : k;
}

List sorted(List items, bool reverse, auto key) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Value::compare(y.first, x.first) < 0 : Value::compare(x.first, y.first) < 0;
  });
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// A string equal for values Python's == calls equal (1, 1.0 and True alike), for unique's set.
std::string identity(const Value& v) {
  if (v.is_float() && std::trunc(v.as_double()) == v.as_double() && std::fabs(v.as_double()) < 9e18)
    return std::to_string(int64_t(v.as_double()));
  return (v.is_int() || v.is_bool()) ? std::to_string(v.as_int()) : v.repr();
}

Value to_int(const Value& v, const Value& fallback, int base) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) {
    double d = std::trunc(v.as_double());
    return (std::isfinite(d) && std::fabs(d) < 9.2e18) ? Value(int64_t(d)) : fallback;
  }
  if (!v.is_string()) return fallback;
  std::string s = strip(v.as_string(), Value(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (base < 2 || base > 36) throw EvalError("int() base must be >= 2 and <= 36");
  int64_t i = 0;
  auto [end, ec] = std::from_chars(s.data() + (s.starts_with('+')), s.data() + s.size(), i, base);
  if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return i;
  char* fend = nullptr;
  double d = std::strtod(s.c_str(), &fend);
  return (!s.empty() && fend == s.c_str() + s.size()) ? to_int(Value(d), fallback, base) : fallback;
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return v.as_double();
  if (!v.is_string()) return fallback;
  std::string s = strip(v.as_string(), Value(), true, true);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  return (!s.empty() && end == s.c_str() + s.size()) ? Value(d) : fallback;
}

// Jinja's indent: every line but the first (unless `first`) gets the prefix; blank lines only if `blank`.
std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  if (!width.is_string() && width.as_int() > 1000) throw EvalError("indent width over 1000");
  std::string prefix =
      width.is_string() ? width.as_string() : std::string(size_t(std::max<int64_t>(0, width.as_int())), ' ');
  std::vector<std::string> lines;
  for (size_t i = 0; i <= s.size();) {
    size_t j = s.find('\n', i);
    if (j == std::string::npos) j = s.size();
    std::string line = s.substr(i, j - i);
    if (line.ends_with('\r')) line.pop_back();
    if (j < s.size() || !line.empty()) lines.push_back(line);
    i = j + 1;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += prefix;
    out += lines[i];
    if (out.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
  }
  if (s.ends_with('\n')) out += "\n";
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

// Jinja's round: "common" is Python's round(), which takes halves to even (2.5 -> 2.0).
Value round_number(double x, int64_t precision, const std::string& method) {
  if (method != "common" && method != "ceil" && method != "floor")
    throw EvalError("method must be common, ceil or floor");
  const double scale = std::pow(10.0, double(precision)), y = x * scale;
  return (method == "ceil" ? std::ceil(y) : method == "floor" ? std::floor(y) : std::nearbyint(y)) / scale;
}

// first (index 0) or last (-1) item; undefined when there is none.
Value end_item(const Value& v, int index) {
  if (v.is_list() || v.is_string()) return v.item(index);
  List items = v.elements();
  return items.empty() ? Value() : index == 0 ? items.front() : items.back();
}

using FilterFn = Value (*)(const Value&, const CallArgs&);
using TestFn = bool (*)(const Value&, const CallArgs&);

Value select_or_reject(const Value& in, const CallArgs& a, bool select, bool by_attr) {
  size_t test_at = by_attr ? 1 : 0;
  Value test = a.get(test_at, "");
  if (!absent(test) && !is_test(test.str())) throw EvalError("unknown test '" + test.str() + "'");
  CallArgs test_args = rest(a, test_at + 1);
  List out;
  for (const Value& item : in.elements()) {
    Value v = by_attr ? get_path(item, a.get(0, "").str()) : item;
    bool ok = absent(test) ? v.truthy() : apply_test(test.as_string(), v, test_args);
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value map_filter(const Value& in, const CallArgs& a) {
  List out;
  Value attribute = a.get(SIZE_MAX, "attribute");
  if (!absent(attribute)) {
    Value fallback = a.get(SIZE_MAX, "default");
    for (const Value& item : in.elements()) {
      Value v = get_path(item, attribute.str());
      out.push_back(v.is_undefined() ? fallback : v);
    }
    return Value::list(std::move(out));
  }
  std::string name = a.get(0, "").str();
  if (!is_filter(name)) throw EvalError("unknown filter '" + name + "'");
  CallArgs filter_args = rest(a, 1);
  for (const Value& item : in.elements()) out.push_back(apply_filter(name, item, filter_args));
  return Value::list(std::move(out));
}

const std::unordered_map<std::string_view, FilterFn>& filters() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs",
       [](const Value& v, const CallArgs&) -> Value {
         if (v.is_float()) return std::fabs(v.as_double());
         if (v.as_int() == INT64_MIN) throw EvalError("integer overflow");
         return v.as_int() < 0 ? -v.as_int() : v.as_int();
       }},
      {"attr", [](const Value& v, const CallArgs& a) { return v.attr(a.get(0, "name").str()); }},
      {"batch",
       [](const Value& v, const CallArgs& a) {
         int64_t n = a.get(0, "linecount").as_int();
         if (n <= 0 || size_t(n) > kMaxListItems) throw EvalError("batch size must be in 1..1M");
         Value fill = a.get(1, "fill_with");
         List out, items = v.elements();
         for (size_t i = 0; i < items.size(); i += size_t(n)) {
           List batch(items.begin() + long(i), items.begin() + long(std::min(items.size(), i + size_t(n))));
           while (!absent(fill) && batch.size() < size_t(n)) batch.push_back(fill);
           out.push_back(Value::list(std::move(batch)));
         }
         return Value::list(std::move(out));
       }},
      {"capitalize", [](const Value& v, const CallArgs&) { return Value(capitalize(v.str())); }},
      {"count", [](const Value& v, const CallArgs&) { return Value(int64_t(v.length())); }},
      {"default",
       [](const Value& v, const CallArgs& a) {
         bool boolean = a.get(1, "boolean", false).truthy();
         return (v.is_undefined() || (boolean && !v.truthy())) ? a.get(0, "default_value", "") : v;
       }},
      {"dictsort",
       [](const Value& v, const CallArgs& a) {
         bool cs = a.get(0, "case_sensitive", false).truthy(), by_value = a.get(1, "by", "key").str() == "value";
         List pairs;
         for (const auto& [k, e] : v.as_dict().entries) pairs.push_back(Value::list({k, e}));
         return Value::list(sorted(std::move(pairs), a.get(2, "reverse", false).truthy(),
                                   [&](const Value& p) { return sort_key(p.as_list()[by_value], Value(), cs); }));
       }},
      {"escape", [](const Value& v, const CallArgs&) { return Value(html_escape(v.str())); }},
      {"first", [](const Value& v, const CallArgs&) { return end_item(v, 0); }},
      {"float", [](const Value& v, const CallArgs& a) { return to_float(v, a.get(0, "default", 0.0)); }},
      {"indent",
       [](const Value& v, const CallArgs& a) {
         return Value(indent(v.str(), a.get(0, "width", 4), a.get(1, "first", false).truthy(),
                             a.get(2, "blank", false).truthy()));
       }},
      {"int", [](const Value& v,
                 const CallArgs& a) { return to_int(v, a.get(0, "default", 0), int(a.get(1, "base", 10).as_int())); }},
      {"items",
       [](const Value& v, const CallArgs&) {
         List out;
         if (!v.is_undefined())
           for (const auto& [k, e] : v.as_dict().entries) out.push_back(Value::list({k, e}));
         return Value::list(std::move(out));
       }},
      {"join",
       [](const Value& v, const CallArgs& a) {
         std::string sep = a.get(0, "d", "").str(), out;
         Value attribute = a.get(1, "attribute");
         List items = v.elements();
         for (size_t i = 0; i < items.size(); ++i) {
           out += (i ? sep : "") + (absent(attribute) ? items[i] : get_path(items[i], attribute.str())).str();
           if (out.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
         }
         return Value(std::move(out));
       }},
      {"last", [](const Value& v, const CallArgs&) { return end_item(v, -1); }},
      {"length", [](const Value& v, const CallArgs&) { return Value(int64_t(v.length())); }},
      {"list", [](const Value& v, const CallArgs&) { return Value::list(v.elements()); }},
      {"lower", [](const Value& v, const CallArgs&) { return Value(lower(v.str())); }},
      {"map", map_filter},
      {"reject", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, false); }},
      {"rejectattr", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, true); }},
      {"replace",
       [](const Value& v, const CallArgs& a) {
         Value count = a.get(2, "count");
         return checked_string(
             replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(), absent(count) ? -1 : count.as_int()));
       }},
      {"reverse",
       [](const Value& v, const CallArgs&) -> Value {
         List items = v.elements();
         std::reverse(items.begin(), items.end());
         if (!v.is_string()) return Value::list(std::move(items));
         std::string out;
         for (const Value& ch : items) out += ch.as_string();
         return out;
       }},
      {"round",
       [](const Value& v, const CallArgs& a) {
         return round_number(v.as_double(), a.get(0, "precision", 0).as_int(), a.get(1, "method", "common").str());
       }},
      {"safe", [](const Value& v, const CallArgs&) { return v; }},
      {"select", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, false); }},
      {"selectattr", [](const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, true); }},
      {"sort",
       [](const Value& v, const CallArgs& a) {
         bool cs = a.get(1, "case_sensitive", false).truthy();
         Value attribute = a.get(2, "attribute");
         return Value::list(sorted(v.elements(), a.get(0, "reverse", false).truthy(),
                                   [&](const Value& x) { return sort_key(x, attribute, cs); }));
       }},
      {"string", [](const Value& v, const CallArgs&) { return Value(v.str()); }},
      {"title", [](const Value& v, const CallArgs&) { return Value(jinja_title(v.str())); }},
      {"tojson",
       [](const Value& v, const CallArgs& a) {
         Value ind = a.get(0, "indent");
         return Value(v.to_json(absent(ind) ? -1 : int(std::clamp<int64_t>(ind.as_int(), 0, 64)),
                                a.get(SIZE_MAX, "sort_keys", false).truthy(),
                                a.get(SIZE_MAX, "ensure_ascii", false).truthy()));
       }},
      {"trim", [](const Value& v, const CallArgs& a) { return Value(strip(v.str(), a.get(0, "chars"), true, true)); }},
      {"unique",
       [](const Value& v, const CallArgs& a) {
         bool cs = a.get(0, "case_sensitive", false).truthy();
         Value attribute = a.get(1, "attribute");
         List out;
         std::unordered_set<std::string> seen;
         for (const Value& item : v.elements())
           if (seen.insert(identity(sort_key(item, attribute, cs))).second) out.push_back(item);
         return Value::list(std::move(out));
       }},
      {"upper", [](const Value& v, const CallArgs&) { return Value(upper(v.str())); }},
      {"wordcount",
       [](const Value& v, const CallArgs&) {
         int64_t n = 0;
         bool in_word = false;
         for (char ch : v.str()) {
           bool w = std::isalnum(uint8_t(ch)) || ch == '_' || uint8_t(ch) >= 0x80;
           n += w && !in_word;
           in_word = w;
         }
         return Value(n);
       }},
  };
  return table;
}

bool compare_test(const Value& v, const CallArgs& a, bool (*ok)(int)) {
  return ok(Value::compare(v, a.get(0, "other")));
}

const std::unordered_map<std::string_view, TestFn>& tests() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_bool() && v.truthy(); }},
      {"false", [](const Value& v, const CallArgs&) { return v.is_bool() && !v.truthy(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, const CallArgs&) { return v.is_float(); }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_dict(); }},
      // Jinja's Undefined is an empty iterable.
      {"iterable",
       [](const Value& v, const CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
      {"sequence",
       [](const Value& v, const CallArgs&) { return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined(); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.is_function(); }},
      {"even", [](const Value& v, const CallArgs&) { return v.as_int() % 2 == 0; }},
      {"odd", [](const Value& v, const CallArgs&) { return v.as_int() % 2 != 0; }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         int64_t d = a.get(0, "num").as_int();
         if (d == 0) throw EvalError("integer division or modulo by zero");
         return d == -1 || v.as_int() % d == 0;
       }},
      {"eq", [](const Value& v, const CallArgs& a) { return v == a.get(0, "other"); }},
      {"ne", [](const Value& v, const CallArgs& a) { return !(v == a.get(0, "other")); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare_test(v, a, [](int c) { return c < 0; }); }},
      {"le", [](const Value& v, const CallArgs& a) { return compare_test(v, a, [](int c) { return c <= 0; }); }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare_test(v, a, [](int c) { return c > 0; }); }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare_test(v, a, [](int c) { return c >= 0; }); }},
      {"in", [](const Value& v, const CallArgs& a) { return contains(a.get(0, "seq"), v); }},
      {"sameas", [](const Value& v,
                    const CallArgs& a) { return v.kind() == a.get(0, "other").kind() && v == a.get(0, "other"); }},
      {"lower",
       [](const Value& v, const CallArgs&) {
         std::string s = v.str();
         return s == lower(s) && s != upper(s);
       }},
      {"upper",
       [](const Value& v, const CallArgs&) {
         std::string s = v.str();
         return s == upper(s) && s != lower(s);
       }},
  };
  return table;
}

// Jinja's other names for the same filters and tests.
std::string_view canonical(std::string_view name) {
  static const std::unordered_map<std::string_view, std::string_view> aliases = {
      {"d", "default"}, {"e", "escape"}, {"equalto", "eq"},     {"==", "eq"}, {"!=", "ne"}, {"lessthan", "lt"},
      {"<", "lt"},      {"<=", "le"},    {"greaterthan", "gt"}, {">", "gt"},  {">=", "ge"}};
  auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

std::optional<Value> string_method(const std::string& s, std::string_view name, const CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip");
  if (name == "split") return Value::list(split(s, a.get(0, "sep"), a.get(1, "maxsplit", -1).as_int()));
  if (name == "startswith" || name == "endswith") return starts_or_ends(s, a.get(0, "prefix"), name == "startswith");
  if (name == "upper") return upper(s);
  if (name == "lower") return lower(s);
  if (name == "title") return py_title(s);
  if (name == "capitalize") return capitalize(s);
  if (name == "replace")
    return checked_string(
        replace(s, a.get(0, "old").as_string(), a.get(1, "new").as_string(), a.get(2, "count", -1).as_int()));
  if (name == "find") {
    size_t at = s.find(a.get(0, "sub").as_string());
    return at == std::string::npos ? int64_t(-1) : int64_t(utf8_length(std::string_view(s).substr(0, at)));
  }
  if (name == "join") {
    std::string out;
    List items = a.get(0, "iterable").elements();
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i ? s : "") + items[i].as_string();
      if (out.size() > kMaxStringBytes) throw EvalError("string result exceeds 16 MiB");
    }
    return Value(std::move(out));
  }
  return std::nullopt;
}

}  // namespace

bool is_filter(std::string_view name) { return filters().contains(canonical(name)); }
bool is_test(std::string_view name) { return tests().contains(canonical(name)); }

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  auto it = filters().find(canonical(name));
  if (it == filters().end()) throw EvalError("unknown filter '" + std::string(name) + "'");
  return it->second(input, args);
}

bool apply_test(std::string_view name, const Value& input, const CallArgs& args) {
  auto it = tests().find(canonical(name));
  if (it == tests().end()) throw EvalError("unknown test '" + std::string(name) + "'");
  return it->second(input, args);
}

std::optional<Value> call_method(const Value& self, std::string_view name, const CallArgs& a) {
  if (self.is_string()) return string_method(self.as_string(), name, a);
  if (self.is_dict()) {
    const Dict& d = self.as_dict();
    if (name == "get") {
      const Value* v = a.get(0, "key").is_string() ? d.find(a.get(0, "key").as_string()) : nullptr;
      return v ? *v : a.get(1, "default", Value::none());
    }
    List out;
    for (const auto& [k, v] : d.entries) {
      if (name == "items")
        out.push_back(Value::list({k, v}));
      else if (name == "keys")
        out.emplace_back(k);
      else if (name == "values")
        out.push_back(v);
    }
    if (name == "items" || name == "keys" || name == "values") return Value::list(std::move(out));
  }
  return std::nullopt;
}

Dict global_functions(const std::tm& now, std::vector<Value>* namespaces) {
  Dict g;
  g.set("range", Value::function([](const CallArgs& a) {
          if (a.positional.empty() || a.positional.size() > 3) throw EvalError("range expects 1 to 3 arguments");
          bool one = a.positional.size() == 1;
          int64_t start = one ? 0 : a.positional[0].as_int(), stop = a.positional[one ? 0 : 1].as_int();
          int64_t step = a.positional.size() == 3 ? a.positional[2].as_int() : 1;
          if (step == 0) throw EvalError("range() arg 3 must not be zero");
          const __int128 span = __int128(stop) - start, n = span / step + (span % step != 0);  // ceil for both signs
          if (n > kMaxRange) throw EvalError("range() longer than 100000");
          List out;
          for (__int128 k = 0; k < n; ++k) out.emplace_back(int64_t(start + k * step));
          return Value::list(std::move(out));
        }));
  g.set("namespace", Value::function([namespaces](const CallArgs& a) {
          Dict attrs;
          if (!a.positional.empty()) attrs = a.positional[0].as_dict();
          for (const auto& [k, v] : a.named) attrs.set(k, v);
          namespaces->push_back(Value::ns(std::move(attrs)));
          return namespaces->back();
        }));
  g.set("dict", Value::function([](const CallArgs& a) {
          Dict d;
          for (const auto& [k, v] : a.named) d.set(k, v);
          return Value::dict(std::move(d));
        }));
  g.set("raise_exception",
        Value::function([](const CallArgs& a) -> Value { throw EvalError(a.get(0, "message").str()); }));
  g.set("strftime_now", Value::function([now](const CallArgs& a) {
          std::string format = a.get(0, "format").as_string();
          if (format.empty()) return Value("");
          std::string buf(format.size() * 4 + 64, '\0');
          size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &now);
          buf.resize(n);
          return Value(buf);
        }));
  return g;
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return checked_string(a.str() + b.str());
  auto unsupported = [&] {
    return EvalError("unsupported operand type(s) for " + std::string(op) + ": '" + a.type_name() + "' and '" +
                     b.type_name() + "'");
  };
  if (op == "+" && a.is_string() && b.is_string()) return checked_string(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return checked_list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& times = &seq == &a ? b : a;
    if (!times.is_int() && !times.is_bool()) throw unsupported();
    int64_t n = std::max<int64_t>(0, times.as_int());
    size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
    if (unit && uint64_t(n) > (seq.is_string() ? kMaxStringBytes : kMaxListItems) / unit)
      throw EvalError("repetition result is too large");
    if (seq.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return out;
    }
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return Value::list(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) throw unsupported();
  if (op == "/") {
    if (b.as_double() == 0) throw EvalError("division by zero");
    return a.as_double() / b.as_double();
  }
  if (!a.is_float() && !b.is_float()) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    bool overflow = false;
    if (op == "+")
      overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "-")
      overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == "*")
      overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "//" || op == "%") {
      if (y == 0) throw EvalError("integer division or modulo by zero");
      if (y == -1) {  // avoids INT64_MIN / -1
        overflow = op == "//" && __builtin_sub_overflow(int64_t(0), x, &r);
      } else {
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors toward -inf
        r = op == "//" ? q : m;
      }
    } else if (op == "**") {
      if (y < 0) return std::pow(double(x), double(y));
      r = 1;
      for (int64_t base = x, e = y; e > 0 && !overflow; e >>= 1) {
        if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
        if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
    } else {
      throw unsupported();
    }
    if (overflow) throw EvalError("integer overflow in '" + std::string(op) + "' (ints are 64-bit)");
    return r;
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "**") return std::pow(x, y);
  if (y == 0) throw EvalError("float division by zero");
  if (op == "//") return std::floor(x / y);
  if (op == "%") {
    double m = std::fmod(x, y);
    return (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
  }
  throw unsupported();
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined:
      return false;
    case Value::Kind::String:
      if (!item.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List: {
      const List& l = container.as_list();
      return std::find(l.begin(), l.end(), item) != l.end();
    }
    case Value::Kind::Dict:
      return item.is_string() && container.as_dict().find(item.as_string());
    default:
      throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

}  // namespace toy::chat
