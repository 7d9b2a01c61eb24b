// chat_template.cpp: messages -> prompt the way llama.cpp's --jinja mode does it (see chat_template.h).
#include "toy/chat/chat_template.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace toy::chat {
namespace {

using json = nlohmann::ordered_json;

// HF transformers: jinja2.Environment(trim_blocks=True, lstrip_blocks=True); llama.cpp does the same.
constexpr ParseOptions kChatParseOptions{.trim_blocks = true, .lstrip_blocks = true};

std::tm parse_date(const std::string& text) {
  using namespace std::chrono;
  int y = 0, m = 0, d = 0;
  char tail = 0;
  year_month_day ymd{};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c", &y, &m, &d, &tail) == 3)
    ymd = year_month_day{year{y}, month{unsigned(m)}, day{unsigned(d)}};
  if (!ymd.ok()) throw std::invalid_argument("today: expected a date YYYY-MM-DD, got '" + text + "'");
  const sys_days days{ymd};
  std::tm tm{};
  tm.tm_year = y - 1900, tm.tm_mon = m - 1, tm.tm_mday = d;
  tm.tm_wday = int(weekday{days}.c_encoding());
  tm.tm_yday = int((days - sys_days{year{y} / January / 1}).count());
  return tm;
}

std::tm local_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// llama.cpp's system-role polyfill: system text is held back and prefixed (with "\n") to the next user
// message; before any other message, or at the end, it becomes a user message of its own. Messages
// without text content pass through untouched.
json merge_system_messages(const json& messages) {
  json out = json::array();
  std::string pending;
  auto flush = [&] {
    if (!pending.empty()) out.push_back({{"role", "user"}, {"content", pending}});
    pending.clear();
  };
  for (const json& message : messages) {
    if (!message.is_object() || !message.contains("content") || !message["content"].is_string()) {
      out.push_back(message);
      continue;
    }
    const std::string role = message.value("role", "");
    const std::string content = message["content"];
    if (role == "system") {
      pending += (pending.empty() ? "" : "\n") + content;
      continue;
    }
    if (role == "user" && !pending.empty()) {
      json merged = message;
      merged["content"] = pending + (content.empty() ? "" : "\n" + content);
      out.push_back(merged);
      pending.clear();
      continue;
    }
    flush();
    out.push_back(message);
  }
  flush();
  return out;
}

// Whether a system message's text reaches the output (llama.cpp's probe, with its needle).
bool renders_system_role(const Template& t) {
  const std::string needle = "<System Needle>";
  json context = {
      {"messages", json::array({{{"role", "system"}, {"content", needle}}, {{"role", "user"}, {"content", "Hey"}}})},
      {"bos_token", ""},
      {"eos_token", ""},
      {"add_generation_prompt", false}};
  try {
    return t.render(context).find(needle) != std::string::npos;
  } catch (const TemplateError&) {
    return false;  // e.g. Gemma: raise_exception('System role not supported')
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source)
    : template_(Template::parse(source, kChatParseOptions)), supports_system_role_(renders_system_role(template_)) {}

std::string ChatTemplate::apply(const json& messages, const ChatOptions& options) const {
  const std::tm now = options.today ? parse_date(*options.today) : local_now();
  char date[32];
  std::strftime(date, sizeof date, "%d %b %Y", &now);
  json context = {
      {"messages", supports_system_role_ ? messages : merge_system_messages(messages)},
      {"bos_token", options.bos_token},
      {"eos_token", options.eos_token},
      {"add_generation_prompt", options.add_generation_prompt},
      {"enable_thinking", options.enable_thinking},
      {"date_string", date},
  };
  if (!options.tools.is_null()) context["tools"] = options.tools;
  if (options.extra_context.is_object())
    for (const auto& [key, value] : options.extra_context.items()) context[key] = value;
  std::string prompt = template_.render(context, {.now = now});
  if (options.strip_leading_bos && !options.bos_token.empty() && prompt.starts_with(options.bos_token))
    prompt.erase(0, options.bos_token.size());
  return prompt;
}

std::string render_chat(std::string_view template_source, const json& messages, const ChatOptions& options) {
  return ChatTemplate(template_source).apply(messages, options);
}

std::string chatml_template() {
  return "{%- for message in messages -%}\n"
         "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
         "{%- endfor -%}\n"
         "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";
}

}  // namespace toy::chat
