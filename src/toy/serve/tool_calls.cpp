// serve/tool_calls.cpp — tool-call formats: parsing answers, forcing calls (see tool_calls.h).
#include "toy/serve/tool_calls.h"

#include <optional>
#include <random>

#include "toy/engines/grammar.h"
#include "toy/engines/json_schema.h"

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
  if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return std::nullopt;
  return ToolCall{call_id(rng), name, args.dump()};
}

ToolAnswer hermes(const std::string& text, const json& tools, std::mt19937_64& rng) {
  static const std::string open = "<tool_call>", close = "</tool_call>";
  size_t at = text.find(open);
  if (at == std::string::npos) return {text, {}};
  ToolAnswer a{trim(text.substr(0, at)), {}};
  while (at != std::string::npos) {
    const size_t end = text.find(close, at + open.size());
    if (end == std::string::npos) return {text, {}};  // cut short: not a call
    auto call =
        call_from_json(json::parse(text.substr(at + open.size(), end - at - open.size()), nullptr, false), tools, rng);
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
  auto call = call_from_json(json::parse(t, nullptr, false), tools, rng);
  if (!call) return {text, {}};
  return {"", {std::move(*call)}};
}

ToolAnswer mistral(const std::string& text, const json& tools, std::mt19937_64& rng) {
  // [TOOL_CALLS] is a control token: the answer's text usually lacks it, the array remains.
  std::string t = trim(text);
  if (t.rfind("[TOOL_CALLS]", 0) == 0) t = trim(t.substr(12));
  if (t.empty() || t[0] != '[') return {text, {}};
  const json calls = json::parse(t, nullptr, false);
  if (!calls.is_array() || calls.empty()) return {text, {}};
  ToolAnswer a;
  for (const json& c : calls) {
    auto call = call_from_json(c, tools, rng);
    if (!call) return {text, {}};
    a.calls.push_back(std::move(*call));
  }
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
  switch (f) {
    case ToolFormat::Hermes:
      return hermes(text, tools, rng);
    case ToolFormat::Llama3:
      return llama3(text, tools, rng);
    case ToolFormat::Mistral:
      return mistral(text, tools, rng);
  }
  return {text, {}};
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

std::string ToolCallStream::push(const std::string& text) {
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
