// chat_template.h: chat messages -> prompt text, through the model's own chat template (the Jinja source
// in GGUF `tokenizer.chat_template`). The result matches what llama.cpp's `--jinja` mode renders, which
// follows HF transformers' apply_chat_template:
//   * the template is parsed with trim_blocks and lstrip_blocks on;
//   * it sees `messages`, `bos_token`, `eos_token`, `add_generation_prompt`, `enable_thinking`,
//     `date_string` (today as "30 Nov 2026", which llama.cpp gives Llama 3.x templates), `tools` (only
//     when given), strftime_now() (today), and any `extra_context`;
//   * a template that rejects or ignores system messages (Gemma 2) gets each system message merged into
//     the next user message, as llama.cpp does;
//   * one leading bos_token is dropped when the tokenizer adds BOS itself, so BOS is not doubled.
// Not here: llama.cpp's other polyfills (tools described in the system message for templates without
// tool support, typed content parts), and parsing the model's reply.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "toy/chat/jinja.h"

namespace toy::chat {

struct ChatOptions {
  std::string bos_token = "";                 // e.g. "<s>"
  std::string eos_token = "";                 // e.g. "</s>"
  bool add_generation_prompt = true;          // end with the assistant's header, ready for its reply
  bool enable_thinking = true;                // as llama.cpp passes it (Qwen3, SmolLM3, DeepSeek R1 read it)
  std::optional<std::string> today = {};      // "YYYY-MM-DD" for strftime_now and date_string; unset: local time
  bool strip_leading_bos = true;              // the tokenizer adds BOS itself (GGUF tokenizer.ggml.add_bos_token)
  nlohmann::ordered_json tools = {};          // OpenAI-style tool list as `tools`; null: `tools` is undefined
  nlohmann::ordered_json extra_context = {};  // an object of more variables, e.g. {"thinking": true}; wins on clashes
};

// A parsed chat template; parse once, apply per request. Thread-safe to apply concurrently.
class ChatTemplate {
 public:
  // Parses and probes whether the template renders system messages. Throws TemplateError.
  explicit ChatTemplate(std::string_view source);

  // `messages`: [{"role": "system"|"user"|"assistant"|"tool", "content": "...", ...}, ...]. Throws
  // TemplateError (including a template's own raise_exception) and std::invalid_argument for a bad `today`.
  std::string apply(const nlohmann::ordered_json& messages, const ChatOptions& options) const;

  bool supports_system_role() const { return supports_system_role_; }

 private:
  Template template_;
  bool supports_system_role_;
};

// ChatTemplate(template_source).apply(messages, options).
std::string render_chat(std::string_view template_source, const nlohmann::ordered_json& messages,
                        const ChatOptions& options);

// ChatML (<|im_start|>role\ncontent<|im_end|>\n...), llama.cpp's fallback for a GGUF without a template.
std::string chatml_template();

}  // namespace toy::chat
