// serve/chat_prompt.cpp — the model's chat template (or ChatML) applied to request messages.
#include "toy/serve/chat_prompt.h"

#include <filesystem>

#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::serve {

ChatPromptSource chat_prompt_source(const gguf::GgufFile& f, const Tokenizer* tokenizer) {
  ChatPromptSource s;
  const std::string name = std::filesystem::path(f.path()).filename().string();
  if (auto t = f.opt_string("tokenizer.chat_template"); t && !t->empty()) {
    s.template_source = *t;
    s.origin = "tokenizer.chat_template of " + name;
  } else {
    s.template_source = chat::chatml_template();
    s.origin = "ChatML (" + name + " has no tokenizer.chat_template)";
  }
  if (tokenizer) {
    if (tokenizer->bos() >= 0) s.bos_token = std::string(tokenizer->token_text(tokenizer->bos()));
    if (tokenizer->eos() >= 0) s.eos_token = std::string(tokenizer->token_text(tokenizer->eos()));
    s.strip_leading_bos = tokenizer->add_bos();
  }
  return s;
}

ChatPrompter::ChatPrompter(ChatPromptSource source) : source_(std::move(source)) {
  try {
    template_ = std::make_unique<chat::ChatTemplate>(source_.template_source);
  } catch (const chat::TemplateError& e) {
    parse_error_ = e.message();
    parse_line_ = e.line();
    parse_column_ = e.column();
  }
}

std::string ChatPrompter::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 std::optional<std::string> today, bool add_generation_prompt) const {
  if (!template_)
    throw chat::TemplateError("the chat template (" + source_.origin + ") does not parse: " + parse_error_, parse_line_,
                              parse_column_);
  chat::ChatOptions o;
  o.bos_token = source_.bos_token;
  o.eos_token = source_.eos_token;
  o.add_generation_prompt = add_generation_prompt;
  o.today = std::move(today);
  o.strip_leading_bos = source_.strip_leading_bos;
  o.tools = tools;
  return template_->apply(messages, o);
}

}  // namespace toy::serve
