// serve/tool_calls.cpp — tool-call formats: parsing answers, forcing calls (see tool_calls.h).
#include "toy/serve/tool_calls.h"

#include <cctype>
#include <optional>
#include <random>
#include <string_view>

#include "toy/engines/grammar.h"
#include "toy/engines/json_schema.h"
#include "toy/serve/request.h"

namespace toy::serve {
namespace {

using json = nlohmann::ordered_json;

const json* declared(const json& tools, const std::string& name) {
  for (const json& t : tools)
    if (t["function"]["name"] == name) return &t;
  return nullptr;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

std::string call_id(std::mt19937_64& rng) {
  static const char* alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id;
  for (int i = 0; i < 9; ++i) id += alnum[rng() % 62];
  return id;
}

// {"name": "f", "arguments" | "parameters": {...} or "{...}"} naming a declared function.
std::optional<ToolCall> call_from_json(const json& j, const json& tools, std::mt19937_64& rng) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"];
  if (!declared(tools, name)) return std::nullopt;
  json args = json::object();
  for (const char* key : {"arguments", "parameters"})
    if (j.contains(key)) args = j[key];
  if (args.is_string()) args = parse_json_text(args.get<std::string>());
  if (!args.is_object()) return std::nullopt;
  return ToolCall{call_id(rng), name, args.dump()};
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

size_t skip_blanks(std::string_view text, size_t at) {
  while (at < text.size() && blank(text[at])) ++at;
  return at;
}

// Where a byte of JSON text stands: inside a string or not, how deep in arrays and objects.
struct JsonCursor {
  int depth = 0;
  bool in_string = false, escaped = false;
  void step(char c) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
};

// JSON text without the blanks outside its strings. Of a prefix of a text, a prefix of its result.
std::string compact(std::string_view text) {
  std::string out;
  JsonCursor cursor;
  for (char c : text) {
    if (!cursor.in_string && blank(c)) continue;
    cursor.step(c);
    out += c;
  }
  return out;
}

// One past the bracket that closes the array or object opening at text[at]; npos while it is open.
size_t container_end(std::string_view text, size_t at) {
  JsonCursor cursor;
  for (size_t i = at; i < text.size(); ++i) {
    cursor.step(text[i]);
    if (cursor.depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// The call object opening at text[at], as far as the text goes, when it begins {"name": "f",
// "arguments": with f declared; `end` is one past the object, npos while it is open.
struct CallText {
  PartialCall call;
  size_t end;
};
// The function name and where the value begins when text[at] opens `{"name": "f", "arguments": `
// ("parameters" too; blanks between the tokens, f of 1 to 64 letters, digits, _ or -). A scan,
// not a std::regex: libstdc++'s matcher recurses once per blank, and a model may write a
// hundred thousand of them (a stack overflow).
std::optional<std::pair<std::string, size_t>> call_header(std::string_view t, size_t at) {
  auto next = [&](std::string_view token) {  // token after blanks, taken
    at = skip_blanks(t, at);
    if (t.substr(at, token.size()) != token) return false;
    at += token.size();
    return true;
  };
  auto name_char = [](char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-'; };
  if (at >= t.size() || t[at] != '{') return std::nullopt;
  ++at;
  if (!next("\"name\"") || !next(":") || !next("\"")) return std::nullopt;
  const size_t name = at;
  while (at < t.size() && at - name <= 64 && name_char(t[at])) ++at;
  if (at == name || at - name > 64 || at >= t.size() || t[at] != '"') return std::nullopt;
  std::string f(t.substr(name, at - name));
  ++at;
  if (!next(",") || !(next("\"arguments\"") || next("\"parameters\"")) || !next(":")) return std::nullopt;
  return std::pair{std::move(f), skip_blanks(t, at)};
}

std::optional<CallText> scan_call(std::string_view text, size_t at, const json& tools) {
  auto header = call_header(text, at);
  if (!header) return std::nullopt;
  CallText c{{std::move(header->first), ""}, container_end(text, at)};
  if (!declared(tools, c.call.name)) return std::nullopt;
  const size_t value = header->second;
  if (value < text.size() && text[value] == '{') {
    const size_t end = container_end(text, value);
    c.call.arguments = compact(text.substr(value, end == std::string_view::npos ? end : end - value));
  }
  return c;
}

ToolAnswer hermes(const std::string& text, const json& tools, std::mt19937_64& rng) {
  static const std::string open = "<tool_call>", close = "</tool_call>";
  size_t at = text.find(open);
  if (at == std::string::npos) return {text, {}};
  ToolAnswer a{trim(text.substr(0, at)), {}};
  while (at != std::string::npos) {
    const size_t end = text.find(close, at + open.size());
    if (end == std::string::npos) {  // cut short: not a call, but those before it are
      if (a.calls.empty()) return {text, {}};
      a.cut = true;
      break;
    }
    auto call = call_from_json(parse_json_text(text.substr(at + open.size(), end - at - open.size())), tools, rng);
    if (!call) return {text, {}};
    a.calls.push_back(std::move(*call));
    at = text.find(open, end + close.size());
    const std::string between = trim(text.substr(end + close.size(), at - std::min(at, end + close.size())));
    if (!between.empty()) a.content += (a.content.empty() ? "" : "\n") + between;
  }
  return a;
}

ToolAnswer llama3(const std::string& text, const json& tools, std::mt19937_64& rng) {
  std::string t = trim(text);
  if (t.rfind("<|python_tag|>", 0) == 0) t = trim(t.substr(14));
  if (t.empty() || t[0] != '{') return {text, {}};
  auto call = call_from_json(parse_json_text(t), tools, rng);
  if (!call) return {text, {}};
  return {"", {std::move(*call)}};
}

ToolAnswer mistral(const std::string& text, const json& tools, std::mt19937_64& rng) {
  // [TOOL_CALLS] is a control token: the answer's text usually lacks it, the array remains.
  std::string t = trim(text);
  if (t.rfind("[TOOL_CALLS]", 0) == 0) t = trim(t.substr(12));
  if (t.empty() || t[0] != '[') return {text, {}};
  // Each element on its own, so that the calls finished before one the text ends inside are kept.
  ToolAnswer a;
  size_t at = skip_blanks(t, 1);
  while (at < t.size()) {
    const size_t end = t[at] == '{' ? container_end(t, at) : at;
    if (end == std::string::npos) {
      a.cut = true;
      break;
    }
    auto call = call_from_json(parse_json_text(std::string_view(t).substr(at, end - at)), tools, rng);
    if (!call) return {text, {}};
    a.calls.push_back(std::move(*call));
    at = skip_blanks(t, end);
    if (at >= t.size() || t[at] != ',') break;
    at = skip_blanks(t, at + 1);
  }
  if (at >= t.size()) a.cut = true;                        // the text ends inside the array
  const bool closed = at + 1 == t.size() && t[at] == ']';  // trim() took what followed
  if (a.calls.empty() || (!a.cut && !closed)) return {text, {}};
  return a;
}

}  // namespace

ToolFormat tool_format(const std::string& template_source) {
  if (template_source.find("[TOOL_CALLS]") != std::string::npos) return ToolFormat::Mistral;
  if (template_source.find("<|python_tag|>") != std::string::npos ||
      template_source.find("\"parameters\": ") != std::string::npos)
    return ToolFormat::Llama3;
  return ToolFormat::Hermes;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes:
      return "hermes";
    case ToolFormat::Llama3:
      return "llama3";
    case ToolFormat::Mistral:
      return "mistral";
  }
  return "?";
}

ToolAnswer parse_tool_calls(const std::string& text, ToolFormat f, const json& tools, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ToolAnswer a = f == ToolFormat::Hermes   ? hermes(text, tools, rng)
                 : f == ToolFormat::Llama3 ? llama3(text, tools, rng)
                                           : mistral(text, tools, rng);
  // Arguments written as streaming shows them: their text without blanks, rather than the parsed
  // value written anew (its numbers and escapes could differ from what went out).
  const std::vector<PartialCall> shown = partial_tool_calls(text, f, tools);
  for (size_t i = 0; i < std::min(shown.size(), a.calls.size()); ++i)
    if (shown[i].name == a.calls[i].name &&
        parse_json_text(shown[i].arguments) == parse_json_text(a.calls[i].arguments))
      a.calls[i].arguments = shown[i].arguments;
  return a;
}

std::vector<PartialCall> partial_tool_calls(const std::string& text, ToolFormat f, const json& tools) {
  std::vector<PartialCall> calls;
  const std::string_view t = text;
  auto after = [&](size_t at, std::string_view prefix) {  // past `prefix` and blanks, if it is there
    at = skip_blanks(t, at);
    return t.substr(at, prefix.size()) == prefix ? skip_blanks(t, at + prefix.size()) : at;
  };
  switch (f) {
    case ToolFormat::Hermes:
      for (size_t at = t.find("<tool_call>"); at != std::string_view::npos;) {
        const auto c = scan_call(t, after(at, "<tool_call>"), tools);
        if (!c) break;
        calls.push_back(c->call);
        at = c->end == std::string_view::npos ? c->end : t.find("<tool_call>", c->end);
      }
      break;
    case ToolFormat::Llama3:
      if (const auto c = scan_call(t, after(0, "<|python_tag|>"), tools)) calls.push_back(c->call);
      break;
    case ToolFormat::Mistral: {
      size_t at = after(0, "[TOOL_CALLS]");
      if (at >= t.size() || t[at] != '[') break;
      for (at = skip_blanks(t, at + 1);;) {
        const auto c = scan_call(t, at, tools);
        if (!c) break;
        calls.push_back(c->call);
        if (c->end == std::string_view::npos) break;
        at = skip_blanks(t, c->end);
        if (at >= t.size() || t[at] != ',') break;
        at = skip_blanks(t, at + 1);
      }
      break;
    }
  }
  return calls;
}

std::string tool_call_grammar(ToolFormat f, const json& tools, const ToolChoice& choice, bool parallel) {
  JsonGrammarBuilder b;
  const std::string key = f == ToolFormat::Llama3 ? "parameters" : "arguments";
  std::string functions;  // "\"name\", \"arguments\": " args | ...
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& fn = tools[i]["function"];
    const std::string name = fn["name"];
    if (choice.mode == ToolChoice::Named && name != choice.name) continue;
    const json params = fn.contains("parameters") ? fn["parameters"] : json{{"type", "object"}};
    std::string args;
    try {
      args = b.value(params, params, "args-" + std::to_string(i));
    } catch (const GrammarError& e) {
      throw GrammarError("tools[" + std::to_string(i) + "].function.parameters: " + e.what());
    }
    functions += (functions.empty() ? "" : " | ") +
                 JsonGrammarBuilder::literal(json(name).dump() + ", \"" + key + "\": ") + " " + args;
  }
  parallel = parallel && choice.mode != ToolChoice::Named;  // a named function is called once
  const std::string call = b.rule("call", "\"{\\\"name\\\": \" (" + functions + ") \"}\"");
  switch (f) {
    case ToolFormat::Hermes: {
      const std::string tagged = b.rule("tagged", "\"<tool_call>\\n\" " + call + " \"\\n</tool_call>\"");
      b.set_root(parallel ? tagged + " (\"\\n\" " + tagged + ")*" : tagged);
      break;
    }
    case ToolFormat::Llama3:
      b.set_root(call);
      break;
    case ToolFormat::Mistral:
      b.set_root(parallel ? "\"[\" " + call + " (\", \" " + call + ")* \"]\"" : "\"[\" " + call + " \"]\"");
      break;
  }
  return b.gbnf();
}

ToolCallStream::ToolCallStream(ToolFormat f, const json& tools, uint64_t seed) : f_(f), tools_(tools), rng_(seed) {}

ToolCallStream::Update ToolCallStream::push(const std::string& text) {
  Update u{content(text), {}};
  if (!in_call_) return u;
  const std::vector<PartialCall> shown = partial_tool_calls(held_, f_, tools_);
  for (size_t i = 0; i < shown.size(); ++i) {
    if (i == sent_.size()) {
      sent_.push_back({call_id(rng_), shown[i].name, ""});
      u.calls.push_back({.index = i, .id = sent_[i].id, .name = shown[i].name, .arguments = ""});
    }
    std::string& sent = sent_[i].arguments;
    if (shown[i].arguments.size() > sent.size()) {
      u.calls.push_back({.index = i, .id = "", .name = "", .arguments = shown[i].arguments.substr(sent.size())});
      sent = shown[i].arguments;
    }
  }
  return u;
}

std::vector<ToolCallDelta> ToolCallStream::finish(std::vector<ToolCall>& calls) {
  std::vector<ToolCallDelta> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    ToolCall& c = calls[i];
    if (i < sent_.size()) {
      const std::string& sent = sent_[i].arguments;
      if (sent_[i].name != c.name || c.arguments.compare(0, sent.size(), sent) != 0) break;  // went out otherwise
      c.id = sent_[i].id;
      if (c.arguments.size() > sent.size())
        out.push_back({.index = i, .id = "", .name = "", .arguments = c.arguments.substr(sent.size())});
    } else {
      out.push_back({.index = i, .id = c.id, .name = c.name, .arguments = ""});
      if (!c.arguments.empty()) out.push_back({.index = i, .id = "", .name = "", .arguments = c.arguments});
    }
  }
  return out;
}

std::string ToolCallStream::content(const std::string& text) {
  held_ += text;
  if (in_call_) return "";
  std::string out;
  if (f_ == ToolFormat::Hermes) {
    static const std::string marker = "<tool_call>";
    size_t keep = 0;  // held back: the marker, or a tail that may begin it
    if (const size_t at = held_.find(marker); at != std::string::npos) {
      keep = held_.size() - at;
      in_call_ = true;
    } else {
      for (size_t k = std::min(marker.size() - 1, held_.size()); k > 0 && keep == 0; --k)
        if (held_.compare(held_.size() - k, k, marker, 0, k) == 0) keep = k;
    }
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  if (!plain_) {
    const size_t first = held_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";  // only blanks so far
    in_call_ = held_[first] == '{' || held_[first] == '[' || held_[first] == '<';
    plain_ = !in_call_;
    if (in_call_) return "";
  }
  std::swap(out, held_);
  return out;
}

std::string forced_call_prefix(ToolFormat f) { return f == ToolFormat::Mistral ? "[TOOL_CALLS]" : ""; }

}  // namespace toy::serve
