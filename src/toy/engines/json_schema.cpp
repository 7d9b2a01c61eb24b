// engines/json_schema.cpp — JSON Schema to GBNF (see json_schema.h).
#include "toy/engines/json_schema.h"

#include <cctype>
#include <set>

#include "toy/engines/grammar.h"

namespace toy {
namespace {

using json = nlohmann::ordered_json;

// The building blocks, llama.cpp's json-schema-to-grammar's, with bounded whitespace and digits.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"space", R"(| " " | "\n" [ \t]{0,20})"},
      // \u escapes of surrogates are left out: a lone one is not text, and strict parsers refuse it.
      {"char",
       R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"},
      {"string", R"("\"" char* "\"" space)"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"number", R"("-"? integral-part ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? space)"},
      {"integer", R"("-"? integral-part space)"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)"},
      {"array", R"("[" space (value ("," space value)*)? "]" space)"},
  };
  return p;
}
// What each primitive uses, so that adding one adds them.
const std::map<std::string, std::vector<std::string>>& primitive_uses() {
  static const std::map<std::string, std::vector<std::string>> u = {
      {"string", {"char", "space"}},
      {"number", {"integral-part", "space"}},
      {"integer", {"integral-part", "space"}},
      {"boolean", {"space"}},
      {"null", {"space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"space", "string", "value"}},
      {"array", {"space", "value"}},
  };
  return u;
}

// Keywords that constrain values in ways this compiler cannot: refused, never silently ignored.
const std::set<std::string> kUnsupported = {"pattern",
                                            "format",
                                            "minimum",
                                            "maximum",
                                            "exclusiveMinimum",
                                            "exclusiveMaximum",
                                            "multipleOf",
                                            "oneOf",
                                            "allOf",
                                            "not",
                                            "if",
                                            "then",
                                            "else",
                                            "prefixItems",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "uniqueItems",
                                            "minProperties",
                                            "maxProperties",
                                            "patternProperties",
                                            "propertyNames",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "unevaluatedProperties",
                                            "unevaluatedItems",
                                            "dependencies",
                                            "additionalItems",
                                            "contentEncoding",
                                            "contentMediaType"};

constexpr int kMaxDepth = 64;
constexpr int64_t kMaxCount = 2000;  // largest maxLength / maxItems / minItems compiled

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw GrammarError("schema at " + (path.empty() ? std::string("/") : path) + ": " + what);
}

// A non-negative integer keyword; -1 when absent.
int64_t count_keyword(const json& schema, const char* key, const std::string& path) {
  auto it = schema.find(key);
  if (it == schema.end()) return -1;
  if (!it->is_number_integer() && !it->is_number_unsigned())
    fail(path, std::string("'") + key + "' must be an integer");
  if (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0)
    fail(path, std::string("'") + key + "' must not be negative");
  if (it->get<uint64_t>() > uint64_t(kMaxCount))
    fail(path, std::string("'") + key + "' above " + std::to_string(kMaxCount) + " is not supported");
  return it->get<int64_t>();
}

// {lo,hi} / {lo,} as GBNF.
std::string repeat(int64_t lo, int64_t hi) {
  return "{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
}

// "/properties/a~1b" style JSON pointer segments.
std::string pointer_segment(const std::string& key) {
  std::string s;
  for (char c : key) s += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return s;
}

}  // namespace

std::string JsonGrammarBuilder::literal(std::string_view bytes) {
  static const char* hex = "0123456789ABCDEF";
  std::string s = "\"";
  for (char c : bytes) {
    const uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else if (b < 0x20 || b == 0x7F) {
      s += "\\x";
      s += hex[b >> 4];
      s += hex[b & 15];
    } else {
      s += c;
    }
  }
  return s + "\"";
}

std::string JsonGrammarBuilder::unique_name(const std::string& hint) {
  std::string base;
  for (char c : hint.substr(0, 40)) base += std::isalnum(uint8_t(c)) ? c : '-';
  if (base.empty()) base = "r";
  std::string name = base;
  // Primitive names are kept for primitive(), whether added yet or not.
  for (int n = 2; taken_.count(name) || primitives().count(name); ++n) name = base + "-" + std::to_string(n);
  taken_.insert(name);
  return name;
}

std::string JsonGrammarBuilder::rule(const std::string& name, const std::string& body) {
  if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  const std::string n = unique_name(name);
  rules_.emplace_back(n, body);
  by_body_[body] = n;
  return n;
}

std::string JsonGrammarBuilder::primitive(const std::string& name) {
  if (!taken_.insert(name).second) return name;
  rules_.emplace_back(name, primitives().at(name));
  if (auto u = primitive_uses().find(name); u != primitive_uses().end())
    for (const std::string& dep : u->second) primitive(dep);
  return name;
}

std::string JsonGrammarBuilder::any_object() { return primitive("object"); }

std::string JsonGrammarBuilder::value(const json& schema, const json& document, const std::string& hint) {
  return visit(schema, document, hint, "", 0);
}

std::string JsonGrammarBuilder::gbnf() const {
  std::string out;
  for (const auto& [name, body] : rules_)
    if (name == "root") out += name + " ::= " + body + "\n";
  for (const auto& [name, body] : rules_)
    if (name != "root") out += name + " ::= " + body + "\n";
  return out;
}

std::string JsonGrammarBuilder::visit(const json& schema, const json& document, const std::string& hint,
                                      const std::string& path, int depth) {
  if (depth > kMaxDepth) fail(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) fail(path, "the schema 'false' matches nothing");
    return primitive("value");
  }
  if (!schema.is_object()) fail(path, "a schema must be an object or a boolean");
  for (auto it = schema.begin(); it != schema.end(); ++it)
    if (kUnsupported.count(it.key())) fail(path, "'" + it.key() + "' is not supported");

  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!ref->is_string()) fail(path, "'$ref' must be a string");
    const std::string r = ref->get<std::string>();
    const auto key = std::make_pair(&document, r);
    if (auto known = refs_.find(key); known != refs_.end()) return known->second;
    if (r != "#" && r.rfind("#/", 0) != 0)
      fail(path, "only references into the same schema (\"#/...\") are supported, got '" + r + "'");
    const json* target = &document;
    try {
      if (r != "#") target = &document.at(json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      fail(path, "'$ref' " + r + " points to nothing");
    }
    // The name is taken before the body is compiled, so a recursive reference finds it.
    const std::string name = unique_name(r == "#" ? hint : r.substr(r.rfind('/') + 1));
    refs_[key] = name;
    const std::string body = visit(*target, document, name, r.substr(1), depth + 1);
    rules_.emplace_back(name, body);
    return name;
  }
  if (auto e = schema.find("const"); e != schema.end())
    return "(" + literal(e->dump()) + " " + primitive("space") + ")";
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array() || e->empty()) fail(path, "'enum' must be a non-empty array");
    std::string alts;
    for (const json& v : *e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
    return "(" + alts + ") " + primitive("space");
  }
  if (auto any = schema.find("anyOf"); any != schema.end()) {
    if (!any->is_array() || any->empty()) fail(path, "'anyOf' must be a non-empty array");
    std::string alts;
    for (size_t i = 0; i < any->size(); ++i)
      alts += (alts.empty() ? "" : " | ") +
              visit((*any)[i], document, hint, path + "/anyOf/" + std::to_string(i), depth + 1);
    return rule(hint, alts);
  }

  std::vector<std::string> types;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const json& x : *t) {
        if (!x.is_string()) fail(path, "'type' must be a string or an array of strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      fail(path, "'type' must be a string or an array of strings");
    }
  } else if (schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required")) {
    types.push_back("object");
  } else if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) {
    types.push_back("array");
  } else if (schema.contains("minLength") || schema.contains("maxLength")) {
    types.push_back("string");
  } else {
    return primitive("value");  // no constraint: any JSON value
  }
  std::string alts;
  for (const std::string& type : types) {
    std::string one;
    if (type == "object")
      one = object(schema, document, hint, path, depth);
    else if (type == "array")
      one = array(schema, document, hint, path, depth);
    else if (type == "string")
      one = string_rule(schema, path);
    else if (type == "number" || type == "integer" || type == "boolean" || type == "null")
      one = primitive(type);
    else
      fail(path, "unknown type '" + type + "'");
    alts += (alts.empty() ? "" : " | ") + one;
  }
  return types.size() == 1 ? alts : rule(hint, alts);
}

std::string JsonGrammarBuilder::string_rule(const json& schema, const std::string& path) {
  const int64_t lo = count_keyword(schema, "minLength", path), hi = count_keyword(schema, "maxLength", path);
  if (lo < 0 && hi < 0) return primitive("string");
  if (hi >= 0 && lo > hi) fail(path, "'minLength' is above 'maxLength'");
  primitive("char");
  return rule("string", "\"\\\"\" char" + repeat(std::max<int64_t>(lo, 0), hi) + " \"\\\"\" " + primitive("space"));
}

std::string JsonGrammarBuilder::array(const json& schema, const json& document, const std::string& hint,
                                      const std::string& path, int depth) {
  const int64_t lo = std::max<int64_t>(count_keyword(schema, "minItems", path), 0),
                hi = count_keyword(schema, "maxItems", path);
  if (hi >= 0 && lo > hi) fail(path, "'minItems' is above 'maxItems'");
  std::string item = primitive("value");
  if (auto it = schema.find("items"); it != schema.end())
    item = visit(*it, document, hint + "-item", path + "/items", depth + 1);
  const std::string open = "\"[\" " + primitive("space"), close = "\"]\" " + primitive("space");
  if (hi == 0) return rule(hint, open + " " + close);
  // item ("," space item){lo-1, hi-1}, optional as a whole when lo is 0.
  const std::string more = "(\",\" space " + item + ")" + repeat(std::max<int64_t>(lo - 1, 0), hi < 0 ? -1 : hi - 1);
  const std::string items = item + " " + more;
  return rule(hint, open + " " + (lo == 0 ? "(" + items + ")?" : items) + " " + close);
}

std::string JsonGrammarBuilder::object(const json& schema, const json& document, const std::string& hint,
                                       const std::string& path, int depth) {
  const std::string open = "\"{\" " + primitive("space"), close = "\"}\" " + primitive("space");
  std::vector<std::pair<std::string, const json*>> props;  // in the schema's order
  static const json kAny = json::object();
  if (auto p = schema.find("properties"); p != schema.end()) {
    if (!p->is_object()) fail(path, "'properties' must be an object");
    for (auto it = p->begin(); it != p->end(); ++it) props.emplace_back(it.key(), &it.value());
  }
  std::set<std::string> required;
  if (auto r = schema.find("required"); r != schema.end()) {
    if (!r->is_array()) fail(path, "'required' must be an array of strings");
    for (const json& name : *r) {
      if (!name.is_string()) fail(path, "'required' must be an array of strings");
      required.insert(name.get<std::string>());
      bool listed = false;
      for (const auto& [k, v] : props) listed = listed || k == name.get<std::string>();
      if (!listed) props.emplace_back(name.get<std::string>(), &kAny);  // required, any value
    }
  }
  const json* extra = nullptr;
  if (auto a = schema.find("additionalProperties"); a != schema.end()) extra = &*a;
  if (props.empty()) {
    if (extra && extra->is_boolean() && !extra->get<bool>()) return rule(hint, open + " " + close);
    if (!extra || extra->is_boolean()) return primitive("object");
    const std::string v = visit(*extra, document, hint + "-value", path + "/additionalProperties", depth + 1);
    return rule(hint, open + " (" + primitive("string") + " \":\" space " + v + " (\",\" space " + primitive("string") +
                          " \":\" space " + v + ")*)? " + close);
  }
  // kv_i: "name": value. first_i: the properties from i on when none came before; rest_i: the
  // same after at least one (each preceded by a comma). Optional properties may be skipped.
  const size_t n = props.size();
  std::vector<std::string> kv(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string v = visit(*props[i].second, document, hint + "-" + props[i].first,
                                path + "/properties/" + pointer_segment(props[i].first), depth + 1);
    kv[i] = rule(hint + "-" + props[i].first + "-kv",
                 literal(json(props[i].first).dump()) + " " + primitive("space") + " \":\" space " + v);
  }
  std::string first, rest;  // first_n and rest_n match nothing more: empty
  for (size_t i = n; i-- > 0;) {
    const bool req = required.count(props[i].first) > 0;
    const std::string rest_i = "\",\" space " + kv[i] + (rest.empty() ? "" : " " + rest);
    const std::string first_i = kv[i] + (rest.empty() ? "" : " " + rest);
    const std::string new_first = req ? first_i : "(" + first_i + (first.empty() ? ")?" : " | " + first + ")");
    const std::string new_rest = req ? rest_i : "(" + rest_i + (rest.empty() ? ")?" : " | " + rest + ")");
    first = rule(hint + "-from-" + std::to_string(i), new_first);
    rest = rule(hint + "-after-" + std::to_string(i), new_rest);
  }
  return rule(hint, open + " " + first + " " + close);
}

void JsonGrammarBuilder::set_root(const std::string& body) {
  taken_.insert("root");
  rules_.emplace_back("root", body);
}

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  JsonGrammarBuilder b;
  b.set_root(b.value(schema, schema, "value-root"));
  return b.gbnf();
}

}  // namespace toy
