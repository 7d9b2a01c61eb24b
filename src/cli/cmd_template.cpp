// cli/cmd_template.cpp — `toy template FILE --messages M.json`: print a rendered chat prompt.
//
// Prints exactly the text `toy serve` tokenizes for a chat request (generation prompt added, a
// leading BOS string removed when the tokenizer adds BOS), with no trailing newline, so scripts
// can compare it byte for byte. FILE is a Jinja template or a GGUF model (whose template,
// BOS/EOS strings and add-BOS flag are then used; flags given explicitly win).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "toy/serve/chat_prompt.h"

namespace toy::cli {
namespace {

using json = nlohmann::ordered_json;

std::string read_all(const std::string& path) {
  if (path == "-") return std::string((std::istreambuf_iterator<char>(std::cin)), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read");
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

json read_json(const std::string& path, const char* what) {
  json j = json::parse(read_all(path), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw InputError(path + ": " + what + " is not valid JSON");
  return j;
}

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

int run(const Args& a) {
  const std::string file = *a.positional(0);
  if (!a.has("messages"))
    throw UsageError("--messages M.json is required (a JSON array of {role, content}, or {\"messages\": [...]})");

  serve::ChatPromptSource src;
  if (is_gguf(file)) {
    auto f = gguf::GgufFile::open(file);
    std::shared_ptr<const Tokenizer> tok;
    if (f->has("tokenizer.ggml.tokens")) {
      try {
        tok = Tokenizer::from_gguf(*f);
      } catch (const TokenizerError& e) {
        throw InputError(file + ": " + e.what());
      }
    }
    src = serve::chat_prompt_source(*f, tok.get());
  } else {
    src.template_source = read_all(file);
    src.origin = file;
  }
  if (a.has("bos-token")) src.bos_token = a.str("bos-token");
  if (a.has("eos-token")) src.eos_token = a.str("eos-token");
  if (a.flag("keep-bos")) src.strip_leading_bos = false;

  json messages = read_json(a.str("messages"), "--messages");
  json tools = nullptr;
  if (messages.is_object()) {
    if (messages.contains("tools")) tools = messages["tools"];
    messages = messages.contains("messages") ? json(messages["messages"]) : json(nullptr);
  }
  if (!messages.is_array())
    throw InputError(a.str("messages") + ": expected a JSON array of messages (or an object with \"messages\")");
  if (a.has("tools")) tools = read_json(a.str("tools"), "--tools");

  std::optional<std::string> today;
  if (a.has("today")) today = a.str("today");
  const serve::ChatPrompter prompter(src);
  std::string prompt;
  try {
    prompt = prompter.render(messages, tools, today, !a.flag("no-generation-prompt"));
  } catch (const chat::TemplateError& e) {
    throw InputError(src.origin + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--") + e.what());
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);  // no newline: the output is the exact prompt
  std::fflush(stdout);
  return kOk;
}

Registrar reg({
    .name = "template",
    .summary = "render chat messages through a chat template, exactly as `toy serve` would",
    .positionals = {{"FILE", "a Jinja chat template, or a GGUF model carrying tokenizer.chat_template"}},
    .flags = {{"messages", FlagType::Path, "",
               "JSON: [{\"role\": ..., \"content\": ...}, ...] or {\"messages\": [...]} ('-': stdin)"},
              {"bos-token", FlagType::String, "",
               "the bos_token string the template sees (default: the GGUF's, else empty)"},
              {"eos-token", FlagType::String, "",
               "the eos_token string the template sees (default: the GGUF's, else empty)"},
              {"today", FlagType::String, "",
               "the date strftime_now() and date_string give, YYYY-MM-DD (default: today)"},
              {"tools", FlagType::Path, "", "JSON array of OpenAI-style tools given to the template as `tools`"},
              {"keep-bos", FlagType::Bool, "",
               "keep a leading bos_token (default: removed, as the tokenizer adds BOS)"},
              {"no-generation-prompt", FlagType::Bool, "", "do not end with the assistant's header"}},
    .run = run,
    .details = "example:\n  toy template Qwen3.jinja --messages chat.json --bos-token '<s>' --eos-token '</s>' --today "
               "2026-11-30\n"
               "The prompt goes to stdout with no trailing newline.",
});

}  // namespace
}  // namespace toy::cli
