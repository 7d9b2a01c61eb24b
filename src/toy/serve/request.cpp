// serve/request.cpp — field-by-field validation of completion and chat requests (see request.h).
#include "toy/serve/request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_set>

#include "toy/engines/json_schema.h"

namespace toy::serve {
namespace {

using json = nlohmann::ordered_json;

// The field, or null when it is absent or JSON null (OpenAI treats both as "not given").
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string json_type(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "null";
  }
}

// A client value for an error message: scalars as JSON (long strings cut), containers by their
// type only. Never the client's whole value: dumping it is recursive and can be large.
std::string brief(const json& v) {
  if (v.is_structured()) return json_type(v);
  const std::string text = v.dump();
  return text.size() <= 40 ? text : text.substr(0, 37) + "...";
}

ApiError wrong_type(const std::string& param, const char* want, const json& got) {
  return ApiError(400, "'" + param + "': expected " + want + ", got " + json_type(got), param, "invalid_type");
}

std::optional<double> number(const json& body, const char* key, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(key, "a number", *v);
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_request(key, "must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + brief(*v));
  return x;
}

// An integer; 16.0 is accepted (JavaScript has no integer type), 16.5 is not.
std::optional<int64_t> integer(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // [-2^63, 2^63) converts to int64_t exactly; 2^63 itself (double(INT64_MAX)) would overflow.
    if (d != std::floor(d) || !(d >= -0x1p63 && d < 0x1p63)) throw wrong_type(key, "an integer", *v);
    const int64_t x = int64_t(d);
    if (x < lo || x > hi)
      throw bad_request(key,
                        "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + brief(*v));
    return x;
  }
  if (v->is_number_unsigned()) {  // nlohmann stores non-negative integers so: 0 too, which lo may refuse
    if (v->get<uint64_t>() > uint64_t(hi) || int64_t(v->get<uint64_t>()) < lo)
      throw bad_request(key,
                        "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + brief(*v));
    return int64_t(v->get<uint64_t>());
  }
  if (!v->is_number_integer()) throw wrong_type(key, "an integer", *v);
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_request(key,
                      "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + brief(*v));
  return x;
}

// A token count: a non-negative integer, where any value above `cap` means "no limit" and
// becomes `cap` (the caller caps it again at the context).
std::optional<int64_t> count(const json& body, const char* key, int64_t cap) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return int64_t(std::min<uint64_t>(v->get<uint64_t>(), uint64_t(cap)));
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw wrong_type(key, "an integer", *v);
    if (d < 0) throw bad_request(key, "must be at least 0, got " + brief(*v));
    return d >= double(cap) ? cap : int64_t(d);
  }
  if (!v->is_number_integer()) throw wrong_type(key, "an integer", *v);
  if (v->get<int64_t>() < 0) throw bad_request(key, "must be at least 0, got " + brief(*v));
  return std::min(v->get<int64_t>(), cap);
}

std::optional<bool> boolean(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> string(const json& body, const char* key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

// A token-id list: [1, 2, 3]; nullopt when `v` is anything else.
std::optional<std::vector<int32_t>> id_list(const json& v) {
  if (!v.is_array() || v.empty()) return std::nullopt;
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& x : v) {
    if (!x.is_number_integer() && !x.is_number_unsigned()) return std::nullopt;
    if (x.is_number_unsigned() ? x.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                               : x.get<int64_t>() < 0 || x.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return std::nullopt;
    ids.push_back(int32_t(x.get<int64_t>()));
  }
  return ids;
}

// The documented prompt shapes, and nothing else: "text", ["text"], [ids...] or [[ids...]]
// (one prompt per request). Each shape is checked by looking at its elements, never by
// recursing into them or copying them.
void parse_prompt(const json& body, CompletionRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw ApiError(400, "'prompt' is required", "prompt", "missing_field");
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  constexpr const char* kShapes = "a string, an array of strings, an array of token ids or an array of such arrays";
  if (!p->is_array() || p->empty()) throw bad_request("prompt", std::string("expected ") + kShapes, "invalid_type");
  const json& first = (*p)[0];
  const bool strings = first.is_string(), lists = first.is_array();
  if (strings || lists) {
    for (const json& x : *p)
      if (strings ? !x.is_string() : !id_list(x))
        throw bad_request("prompt", std::string("expected ") + kShapes + " (elements of one kind)", "invalid_type");
    if (p->size() > 1)
      throw bad_request("prompt", "only one prompt per request is supported (got " + std::to_string(p->size()) + ")",
                        "unsupported_value");
    if (strings) {
      r.prompt_text = first.get<std::string>();
      return;
    }
  }
  auto ids = id_list(lists ? first : *p);
  if (!ids) throw bad_request("prompt", std::string("expected ") + kShapes, "invalid_type");
  r.prompt_ids = std::move(*ids);
  r.prompt_is_ids = true;
}

// Content as one string: a string, or text parts joined by newlines (the only part type a text
// model can take).
std::string content_text(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pp = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw wrong_type(pp, "a content part object", part);
    const auto type = string(part, "type");
    if (type != "text")
      throw bad_request(pp + ".type",
                        "only \"text\" content parts are supported, got " + (type ? "\"" + *type + "\"" : "none"),
                        "unsupported_value");
    if (!part.contains("text") || !part["text"].is_string())
      throw ApiError(400, "'" + pp + ".text' must be a string", pp + ".text", "invalid_type");
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

// The 400 for JSON text (`what`: "the request body", "'param'") nested deeper than kMaxJsonDepth.
ApiError too_deep_error(const std::string& what, const std::string& param) {
  return ApiError(
      400, what + " nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels, the limit",
      param, "json_too_deep");
}

// An assistant turn's tool calls as templates read them: OpenAI sends `arguments` as a JSON
// string, chat templates write it with `tojson` and expect the object.
json template_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) throw wrong_type(param, "an array", calls);
  json out = calls;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string pp = param + "[" + std::to_string(i) + "]";
    if (!out[i].is_object()) throw wrong_type(pp, "an object", out[i]);
    const json* fn = field(out[i], "function");
    if (!fn || !fn->is_object()) throw ApiError(400, "'" + pp + ".function' must be an object", pp + ".function");
    if (!string(*fn, "name")) throw ApiError(400, "'" + pp + ".function.name' is required", pp + ".function.name");
    if (const auto args = string(*fn, "arguments")) {
      bool too_deep = false;
      json parsed = parse_json_text(*args, &too_deep);
      if (too_deep) throw too_deep_error("'" + pp + ".function.arguments'", pp + ".function.arguments");
      if (parsed.is_object()) out[i]["function"]["arguments"] = std::move(parsed);
    }
  }
  return out;
}

void parse_messages(const json& body, CompletionRequest& r) {
  const json* m = field(body, "messages");
  if (!m) throw ApiError(400, "'messages' is required", "messages", "missing_field");
  if (!m->is_array()) throw wrong_type("messages", "an array", *m);
  if (m->empty()) throw bad_request("messages", "must contain at least one message", "empty_array");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw wrong_type(p, "an object", msg);
    const json* role = field(msg, "role");
    if (!role || !role->is_string())
      throw ApiError(400, "'" + p + ".role' must be a string", p + ".role", role ? "invalid_type" : "missing_field");
    std::string r_ = role->get<std::string>();
    if (r_ != "system" && r_ != "user" && r_ != "assistant" && r_ != "tool" && r_ != "developer")
      throw bad_request(p + ".role", "must be one of system, developer, user, assistant, tool; got \"" + r_ + "\"");
    if (r_ == "developer") r_ = "system";  // OpenAI's newer name for the system role; templates know "system"
    json out = msg;
    out["role"] = r_;
    if (const json* calls = field(msg, "tool_calls"); calls && r_ == "assistant")
      out["tool_calls"] = template_tool_calls(*calls, p + ".tool_calls");
    const json* content = field(msg, "content");
    if (content)
      out["content"] = content_text(*content, p + ".content");
    else if (r_ == "assistant" && field(msg, "tool_calls"))
      out["content"] = "";  // a tool-calling turn has no text
    else
      throw ApiError(400, "'" + p + ".content' is required", p + ".content", "missing_field");
    r.messages.push_back(std::move(out));
  }
}

// tools, tool_choice, parallel_tool_calls (chat).
void parse_tools(const json& body, CompletionRequest& r) {
  if (const json* t = field(body, "tools")) {
    if (!t->is_array()) throw wrong_type("tools", "an array", *t);
    for (size_t i = 0; i < t->size(); ++i) {
      const json& tool = (*t)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object()) throw wrong_type(p, "an object", tool);
      if (string(tool, "type").value_or("function") != "function")
        throw bad_request(p + ".type", "only \"function\" tools are supported", "unsupported_value");
      const json* fn = field(tool, "function");
      if (!fn || !fn->is_object()) throw ApiError(400, "'" + p + ".function' must be an object", p + ".function");
      const auto name = string(*fn, "name");
      if (!name || name->empty() || name->size() > 64 ||
          name->find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
              std::string::npos)
        throw bad_request(p + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
      for (size_t j = 0; j < i; ++j)
        if ((*t)[j]["function"]["name"] == *name) throw bad_request(p + ".function.name", "is declared twice");
      string(*fn, "description");
      if (const json* params = field(*fn, "parameters"); params && !params->is_object())
        throw wrong_type(p + ".function.parameters", "an object (a JSON Schema)", *params);
    }
    if (!t->empty()) r.tools = *t;
  }
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls").value_or(true);
  const json* c = field(body, "tool_choice");
  if (!c) return;
  if (c->is_string()) {
    const std::string mode = c->get<std::string>();
    if (mode == "none")
      r.tool_choice.mode = ToolChoice::None;
    else if (mode == "auto")
      r.tool_choice.mode = ToolChoice::Auto;
    else if (mode == "required")
      r.tool_choice.mode = ToolChoice::Required;
    else
      throw bad_request("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", ...}");
  } else if (c->is_object()) {
    const json* fn = field(*c, "function");
    const auto name = fn && fn->is_object() ? string(*fn, "name") : std::nullopt;
    if (!name)
      throw ApiError(400, "'tool_choice.function.name' is required", "tool_choice.function.name", "missing_field");
    r.tool_choice = {ToolChoice::Named, *name};
  } else {
    throw wrong_type("tool_choice", "a string or an object", *c);
  }
  if (r.tool_choice.mode == ToolChoice::None) return;
  if (r.tools.is_null()) throw bad_request("tool_choice", "needs 'tools'");
  if (r.tool_choice.mode == ToolChoice::Named) {
    bool found = false;
    for (const json& tool : r.tools) found = found || tool["function"]["name"] == r.tool_choice.name;
    if (!found) throw bad_request("tool_choice", "names '" + r.tool_choice.name + "', which is not among 'tools'");
  }
}

void parse_stop(const json& body, CompletionRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    if (!s->get<std::string>().empty()) r.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array()) throw wrong_type("stop", "a string or an array of strings", *s);
  if (s->size() > 16) throw bad_request("stop", "at most 16 stop strings are supported");
  for (const json& x : *s) {
    if (!x.is_string()) throw wrong_type("stop[]", "a string", x);
    if (!x.get<std::string>().empty()) r.stop.push_back(x.get<std::string>());
  }
}

// logit_bias: OpenAI's {"id": bias}, or llama.cpp's [[id, bias], ["text", bias]]; a bias of
// false bans the token (llama.cpp), a number is between -100 and 100 (OpenAI).
void parse_logit_bias(const json& body, CompletionRequest& r) {
  const json* b = field(body, "logit_bias");
  if (!b) return;
  auto bias = [](const json& v) {
    if (v.is_boolean()) {
      if (v.get<bool>()) throw bad_request("logit_bias", "a bias is a number or false (never this token), not true");
      return -std::numeric_limits<float>::infinity();
    }
    if (!v.is_number()) throw wrong_type("logit_bias", "numbers (or false) as values", v);
    const double x = v.get<double>();
    if (!(x >= -100 && x <= 100)) throw bad_request("logit_bias", "values must be between -100 and 100");
    return float(x);
  };
  std::map<int32_t, float> by_id;  // the last bias given for an id wins
  if (b->is_object()) {
    for (auto it = b->begin(); it != b->end(); ++it) {
      // Canonical decimal ids only ("5", not " 5", "+5", "05" or "5.0"), as OpenAI's tokenizers
      // print them; the range against the vocabulary is checked once the model is known.
      const std::string& key = it.key();
      const bool canonical = !key.empty() && key.size() <= 10 && (key == "0" || key[0] != '0') &&
                             key.find_first_not_of("0123456789") == std::string::npos;
      const long long id = canonical ? std::stoll(key) : -1;
      if (!canonical || id > std::numeric_limits<int32_t>::max())
        throw bad_request("logit_bias", "keys must be token ids written in decimal, got " + brief(json(key)));
      by_id[int32_t(id)] = bias(it.value());
    }
  } else if (b->is_array()) {
    for (const json& pair : *b) {
      if (!pair.is_array() || pair.size() != 2) throw wrong_type("logit_bias[]", "a pair [token, bias]", pair);
      const json& token = pair[0];
      if (token.is_string()) {
        r.logit_bias_text.emplace_back(token.get<std::string>(), bias(pair[1]));
      } else if (token.is_number_integer() && token.get<int64_t>() >= 0 &&
                 token.get<int64_t>() <= std::numeric_limits<int32_t>::max()) {
        by_id[int32_t(token.get<int64_t>())] = bias(pair[1]);
      } else {
        throw wrong_type("logit_bias[][0]", "a token id or a text", token);
      }
    }
  } else {
    throw wrong_type("logit_bias", "an object of token id -> bias, or an array of [token, bias] pairs", *b);
  }
  for (auto [id, x] : by_id) r.sampling.logit_bias.emplace_back(id, x);
}

// llama-server's sampler fields beyond OpenAI's, each range-checked (400 outside it).
void parse_samplers(const json& body, CompletionRequest& r) {
  SamplerConfig& c = r.sampling;
  if (auto k = integer(body, "top_k", 0, 1 << 30)) c.top_k = int(*k);
  if (auto m = number(body, "min_p", 0, 1)) c.min_p = float(*m);
  if (auto p = number(body, "typical_p", 0, 1)) c.typical_p = float(*p);
  if (auto n = number(body, "top_n_sigma", -1e6, 1e6)) c.top_n_sigma = float(*n);
  if (auto p = number(body, "xtc_probability", 0, 1)) c.xtc_probability = float(*p);
  if (auto t = number(body, "xtc_threshold", 0, 1)) c.xtc_threshold = float(*t);
  if (auto n = integer(body, "min_keep", 0, 1 << 30)) c.min_keep = int(*n);
  if (auto p = number(body, "repeat_penalty", 0, 100)) {
    if (*p == 0) throw bad_request("repeat_penalty", "must be greater than 0");
    c.repeat_penalty = float(*p);
  }
  if (auto n = integer(body, "repeat_last_n", -1, 1 << 30)) c.repeat_last_n = int(*n);
  if (auto p = number(body, "presence_penalty", -2, 2)) c.presence_penalty = float(*p);
  if (auto f = number(body, "frequency_penalty", -2, 2)) c.frequency_penalty = float(*f);
  if (auto m = number(body, "dry_multiplier", 0, 100)) c.dry_multiplier = float(*m);
  if (auto b = number(body, "dry_base", 1, 100)) c.dry_base = float(*b);
  if (auto n = integer(body, "dry_allowed_length", 0, 1 << 30)) c.dry_allowed_length = int(*n);
  if (auto n = integer(body, "dry_penalty_last_n", -1, 1 << 30)) c.dry_penalty_last_n = int(*n);
  if (const json* b = field(body, "dry_sequence_breakers")) {
    if (!b->is_array()) throw wrong_type("dry_sequence_breakers", "an array of strings", *b);
    if (b->size() > 64) throw bad_request("dry_sequence_breakers", "at most 64 strings are supported");
    std::vector<std::string> breakers;
    for (const json& x : *b) {
      if (!x.is_string() || x.get<std::string>().empty())
        throw wrong_type("dry_sequence_breakers[]", "a non-empty string", x);
      breakers.push_back(x.get<std::string>());
    }
    r.dry_sequence_breakers = std::move(breakers);
  }
  if (auto m = integer(body, "mirostat", 0, 2)) c.mirostat = int(*m);
  if (auto t = number(body, "mirostat_tau", 0, 100)) c.mirostat_tau = float(*t);
  if (auto e = number(body, "mirostat_eta", 0, 1)) c.mirostat_eta = float(*e);
  // samplers: stage names in order (["top_k", "temperature"]), or llama.cpp's letters ("kt").
  if (const json* s = field(body, "samplers")) {
    try {
      if (s->is_string()) {
        c.chain = parse_sampler_letters(s->get<std::string>());
      } else if (s->is_array()) {
        c.chain.clear();
        for (const json& name : *s) {
          if (!name.is_string() || name.get<std::string>().find(';') != std::string::npos)
            throw wrong_type("samplers[]", "a sampler's name", name);
          for (SamplerStage stage : parse_sampler_names(name.get<std::string>())) c.chain.push_back(stage);
        }
      } else {
        throw wrong_type("samplers", "an array of sampler names or a string of sampler letters", *s);
      }
    } catch (const std::invalid_argument& e) {
      throw bad_request("samplers", e.what());
    }
  }
  parse_logit_bias(body, r);
}

// response_format (OpenAI: text, json_object, json_schema) or grammar (llama.cpp's GBNF): the
// grammar every answer must follow, compiled now so that a malformed one is a 400.
void parse_structured_output(const json& body, CompletionRequest& r) {
  const auto gbnf = string(body, "grammar");
  std::string type = "text";
  const json* rf = field(body, "response_format");
  if (rf) {
    if (!rf->is_object()) throw wrong_type("response_format", "an object", *rf);
    const auto t = string(*rf, "type");
    if (!t) throw ApiError(400, "'response_format.type' is required", "response_format.type", "missing_field");
    type = *t;
  }
  if (gbnf && type != "text")
    throw bad_request("grammar", "cannot be combined with a response_format of type \"" + type + "\"");
  std::string param = "grammar";
  try {
    if (gbnf) {
      r.grammar = Grammar::parse(*gbnf);
    } else if (type == "json_object") {
      JsonGrammarBuilder b;
      b.set_root(b.any_object());
      r.grammar = Grammar::parse(b.gbnf());
    } else if (type == "json_schema") {
      param = "response_format.json_schema";
      const json* js = field(*rf, "json_schema");
      if (!js) throw ApiError(400, "'response_format.json_schema' is required", param, "missing_field");
      if (!js->is_object()) throw wrong_type(param, "an object", *js);
      if (const json* name = field(*js, "name"); name && !name->is_string())
        throw wrong_type(param + ".name", "a string", *name);
      boolean(*js, "strict");  // type-checked; the schema is always enforced
      param += ".schema";
      const json* schema = field(*js, "schema");
      if (schema && !schema->is_object() && !schema->is_boolean()) throw wrong_type(param, "an object", *schema);
      r.grammar = Grammar::parse(json_schema_to_gbnf(schema ? *schema : json::object()));
    } else if (type != "text") {
      throw bad_request("response_format.type",
                        "must be \"text\", \"json_object\" or \"json_schema\", got " + brief(json(type)),
                        "unsupported_value");
    }
  } catch (const GrammarError& e) {
    throw ApiError(400, std::string("invalid '") + param + "': " + e.what(), param,
                   param == "grammar" ? "invalid_grammar" : "invalid_json_schema");
  }
}

// The top-level fields parse_request() reads, per endpoint. A field added there goes here too.
bool read_field(const std::string& key, Endpoint endpoint) {
  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "typical_p",
                                               "top_n_sigma",
                                               "xtc_probability",
                                               "xtc_threshold",
                                               "min_keep",
                                               "repeat_penalty",
                                               "repeat_last_n",
                                               "dry_multiplier",
                                               "dry_base",
                                               "dry_allowed_length",
                                               "dry_penalty_last_n",
                                               "dry_sequence_breakers",
                                               "mirostat",
                                               "mirostat_tau",
                                               "mirostat_eta",
                                               "samplers",
                                               "grammar",
                                               "seed",
                                               "n",
                                               "best_of",
                                               "stop",
                                               "stream",
                                               "stream_options",
                                               "ignore_eos",
                                               "cache_prompt",
                                               "lora",
                                               "response_format",
                                               "speculative.n_max",
                                               "speculative.n_min",
                                               "speculative.p_min"};
  static const std::set<std::string> chat = {"messages", "max_completion_tokens", "logprobs",           "top_logprobs",
                                             "tools",    "tool_choice",           "parallel_tool_calls"};
  static const std::set<std::string> completions = {"prompt", "logprobs", "echo", "suffix"};
  return common.count(key) || (endpoint == Endpoint::Chat ? chat : completions).count(key);
}

// The top-level fields of `body` that `read` says are not read, for the log (see ignored_fields).
template <class Read>
std::vector<std::string> ignored_fields(const json& body, Read read) {
  std::vector<std::string> names;
  for (auto it = body.begin(); it != body.end() && names.size() < kMaxIgnoredFields; ++it) {
    if (read(it.key())) continue;
    std::string name = it.key().size() <= 40 ? it.key() : it.key().substr(0, 37) + "...";
    for (char& c : name)
      if (uint8_t(c) < 0x20 || c == 0x7f) c = '?';
    names.push_back(std::move(name));
  }
  return names;
}

// `input` of an embeddings request: the documented shapes, elements of one kind.
std::vector<EmbeddingInput> parse_embedding_inputs(const json& body) {
  const json* in = field(body, "input");
  if (!in) throw ApiError(400, "'input' is required", "input", "missing_field");
  constexpr const char* kShapes = "a string, an array of strings, an array of token ids or an array of such arrays";
  const auto text = [](const json& v, const std::string& param) {
    if (v.get_ref<const std::string&>().empty()) throw bad_request(param, "must not be an empty string", "empty_input");
    return EmbeddingInput{.text = v.get<std::string>(), .ids = {}, .is_ids = false};
  };
  if (in->is_string()) return {text(*in, "input")};
  if (!in->is_array())
    throw bad_request("input", std::string("expected ") + kShapes + ", got " + json_type(*in), "invalid_type");
  if (in->empty()) throw bad_request("input", "must not be an empty array", "empty_input");
  if (in->size() > kMaxEmbeddingInputs)
    throw bad_request("input", "at most " + std::to_string(kMaxEmbeddingInputs) + " inputs per request, got " +
                                   std::to_string(in->size()));
  const json& first = (*in)[0];
  if (first.is_number()) {  // one input of token ids
    auto ids = id_list(*in);
    if (!ids) throw bad_request("input", "a token-id array must hold only integers in [0, 2^31)", "invalid_type");
    return {EmbeddingInput{.text = {}, .ids = std::move(*ids), .is_ids = true}};
  }
  if (!first.is_string() && !first.is_array())
    throw bad_request("input", std::string("expected ") + kShapes + ", got an array of " + json_type(first) + "s",
                      "invalid_type");
  std::vector<EmbeddingInput> inputs;
  for (size_t i = 0; i < in->size(); ++i) {
    const json& x = (*in)[i];
    const std::string param = "input[" + std::to_string(i) + "]";
    if (first.is_string()) {
      if (!x.is_string()) throw wrong_type(param, "a string, as input[0] is", x);
      inputs.push_back(text(x, param));
      continue;
    }
    if (x.is_array() && x.empty()) throw bad_request(param, "must not be an empty array", "empty_input");
    auto ids = id_list(x);
    if (!ids)
      throw bad_request(param, "expected an array of token ids (integers in [0, 2^31)), as input[0] is",
                        "invalid_type");
    inputs.push_back({.text = {}, .ids = std::move(*ids), .is_ids = true});
  }
  return inputs;
}

}  // namespace

json parse_json_text(std::string_view text, bool* too_deep) {
  // The parser is iterative, so depth costs it no stack; the callback refuses the first array
  // or object that opens below kMaxJsonDepth, before anything below it is built.
  bool deep = false;
  const auto depth_check = [&deep](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      deep = true;
    return !deep;
  };
  json j = json::parse(text, depth_check, /*allow_exceptions=*/false);
  if (too_deep) *too_deep = deep;
  return deep ? json(json::value_t::discarded) : j;
}

json parse_json_body(std::string_view text) {
  bool too_deep = false;
  json j = parse_json_text(text, &too_deep);
  if (too_deep) throw too_deep_error("the request body", "");
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  return j;
}

std::vector<LoraScale> parse_lora_scales(const json& v, const std::string& param, size_t n_adapters) {
  if (!v.is_array()) throw wrong_type(param, "an array of {\"id\", \"scale\"} objects", v);
  if (v.size() > n_adapters)
    throw bad_request(param, "lists " + std::to_string(v.size()) + " adapters; the server has " +
                                 std::to_string(n_adapters) + " (see GET /lora-adapters)");
  std::vector<LoraScale> out;
  std::unordered_set<int64_t> listed;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) throw wrong_type(p, "an object with \"id\" and \"scale\"", v[i]);
    std::optional<int64_t> id;
    std::optional<double> scale;
    try {
      id = integer(v[i], "id", 0, std::numeric_limits<int32_t>::max());
      scale = number(v[i], "scale", -kMaxLoraScale, kMaxLoraScale);
    } catch (const ApiError& e) {  // it names "id" or "scale": name "lora[i].id" instead
      throw ApiError(e.status, "'" + p + "." + std::string(e.what()).substr(1), p + "." + e.param, e.code);
    }
    if (!id || !scale) throw ApiError(400, "'" + p + "' needs \"id\" and \"scale\"", p, "missing_field");
    if (!listed.insert(*id).second) throw bad_request(p, "adapter " + std::to_string(*id) + " is listed twice");
    out.push_back({.id = *id, .scale = float(*scale)});
  }
  return out;
}

TokenizeRequest parse_tokenize(const json& body) {
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object, got " + json_type(body), "", "invalid_body");
  TokenizeRequest r;
  const auto content = string(body, "content");
  if (!content) throw ApiError(400, "'content' is required", "content", "missing_field");
  r.content = *content;
  r.add_special = boolean(body, "add_special").value_or(false);
  r.with_pieces = boolean(body, "with_pieces").value_or(false);
  return r;
}

std::vector<int32_t> parse_detokenize(const json& body, int64_t n_vocab) {
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object, got " + json_type(body), "", "invalid_body");
  const json* tokens = field(body, "tokens");
  if (!tokens) throw ApiError(400, "'tokens' is required", "tokens", "missing_field");
  if (!tokens->is_array()) throw wrong_type("tokens", "an array of token ids", *tokens);
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& v : *tokens) {
    const bool in_range = v.is_number_unsigned()  ? v.get<uint64_t>() < uint64_t(n_vocab)
                          : v.is_number_integer() ? v.get<int64_t>() >= 0 && v.get<int64_t>() < n_vocab
                                                  : false;
    if (!in_range)
      throw bad_request("tokens", "holds " + brief(v) + ", not a token id in [0, " + std::to_string(n_vocab) + ")");
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return ids;
}

CompletionRequest parse_request(const json& body, Endpoint endpoint, size_t n_adapters) {
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object, got " + json_type(body), "", "invalid_body");
  CompletionRequest r;
  r.endpoint = endpoint;
  r.model = string(body, "model");
  if (endpoint == Endpoint::Chat) {
    parse_messages(body, r);
    parse_tools(body, r);
  } else {
    parse_prompt(body, r);
  }

  constexpr int64_t kHuge = int64_t(1) << 40;  // "no limit"; capped at the context later
  r.max_tokens = count(body, "max_tokens", kHuge);
  if (endpoint == Endpoint::Chat)
    if (auto m = count(body, "max_completion_tokens", kHuge)) r.max_tokens = m;
  if (auto t = number(body, "temperature", 0, 2)) r.sampling.temperature = float(*t);
  if (auto p = number(body, "top_p", 0, 1)) {
    if (*p == 0) throw bad_request("top_p", "must be greater than 0");
    r.sampling.top_p = float(*p);
  }
  parse_samplers(body, r);
  if (auto s = integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    r.seed = uint64_t(*s);
  r.n = int(integer(body, "n", 1, 128).value_or(1));
  if (auto b = integer(body, "best_of", 1, 128); b && *b != 1)
    throw bad_request("best_of", "only best_of = 1 is supported", "unsupported_value");
  parse_stop(body, r);
  r.stream = boolean(body, "stream").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw wrong_type("stream_options", "an object", *so);
    if (!r.stream) throw bad_request("stream_options", "is only allowed when 'stream' is true");
    r.include_usage = boolean(*so, "include_usage").value_or(false);
  }
  r.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  r.cache_prompt = boolean(body, "cache_prompt").value_or(true);
  if (const json* l = field(body, "lora")) r.lora = parse_lora_scales(*l, "lora", n_adapters);
  r.draft_max = integer(body, "speculative.n_max", 1, 1024);
  r.draft_min = integer(body, "speculative.n_min", 0, 1024);
  if (auto p = number(body, "speculative.p_min", 0, 1)) r.draft_p_min = float(*p);

  if (endpoint == Endpoint::Chat) {
    const bool lp = boolean(body, "logprobs").value_or(false);
    const auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !lp) throw bad_request("top_logprobs", "requires 'logprobs' to be true");
    if (lp) r.logprobs = int(top.value_or(0));
  } else {
    if (auto lp = integer(body, "logprobs", 0, 20)) r.logprobs = int(*lp);
    r.echo = boolean(body, "echo").value_or(false);
    if (auto s = string(body, "suffix"); s && !s->empty())
      throw bad_request("suffix", "is not supported", "unsupported_value");
  }
  parse_structured_output(body, r);
  r.ignored_fields = ignored_fields(body, [&](const std::string& key) { return read_field(key, endpoint); });
  return r;
}

EmbeddingsRequest parse_embeddings(const json& body) {
  if (!body.is_object())
    throw ApiError(400, "the request body must be a JSON object, got " + json_type(body), "", "invalid_body");
  EmbeddingsRequest r;
  r.model = string(body, "model");
  r.inputs = parse_embedding_inputs(body);
  const std::string format = string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("encoding_format", "must be \"float\" or \"base64\", got " + brief(json(format)),
                      "unsupported_value");
  r.base64 = format == "base64";
  r.dimensions = integer(body, "dimensions", 1, std::numeric_limits<int32_t>::max());
  string(body, "user");  // type-checked, as OpenAI does; not used
  static const std::set<std::string> read = {"model", "input", "encoding_format", "dimensions", "user"};
  r.ignored_fields = ignored_fields(body, [](const std::string& key) { return read.count(key) > 0; });
  return r;
}

}  // namespace toy::serve
