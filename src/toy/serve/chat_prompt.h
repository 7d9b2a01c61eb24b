// serve/chat_prompt.h — chat messages -> the prompt text the server tokenizes.
//
// The template is the model's own (GGUF `tokenizer.chat_template`), rendered by toy::chat the way
// llama.cpp's --jinja mode does; a file without a template gets ChatML, as in llama.cpp. The BOS
// and EOS strings the template sees are the tokenizer's, and a leading BOS string is removed when
// the tokenizer adds BOS itself (so it is not doubled). `toy template` prints exactly this text.
// Not here: tokenization (the caller encodes with parse_special so <|im_start|> becomes its id).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "toy/chat/chat_template.h"

namespace toy {
class Tokenizer;
namespace gguf {
class GgufFile;
}
}  // namespace toy

namespace toy::serve {

struct ChatPromptSource {
  std::string template_source;  // Jinja text
  std::string origin;           // for messages: "tokenizer.chat_template of m.gguf", "ChatML (…)", a path
  std::string bos_token, eos_token;
  bool strip_leading_bos = true;  // the tokenizer adds BOS itself
};

// The template of a GGUF file (ChatML when it has none), with its tokenizer's BOS/EOS strings.
ChatPromptSource chat_prompt_source(const gguf::GgufFile& f, const Tokenizer* tokenizer);

// A parsed template, ready to render requests from several threads at once. A template that does
// not parse is kept as an error that every render() reports, so the rest of the server still works.
class ChatPrompter {
 public:
  explicit ChatPrompter(ChatPromptSource source);
  // The parse error, if the template could not be parsed ("" when it parsed).
  const std::string& parse_error() const { return parse_error_; }
  const ChatPromptSource& source() const { return source_; }

  // Throws chat::TemplateError (parse or render failure, a template's raise_exception) and
  // std::invalid_argument (a bad `today`). `tools`: null when the request has none.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                     std::optional<std::string> today = std::nullopt, bool add_generation_prompt = true) const;

 private:
  ChatPromptSource source_;
  std::unique_ptr<chat::ChatTemplate> template_;
  std::string parse_error_;
  int parse_line_ = 0, parse_column_ = 0;
};

}  // namespace toy::serve
