// cli/chat_session.cpp — a conversation with a model on the command line (see chat_session.h).
#include "cli/chat_session.h"

#include <algorithm>
#include <iostream>

#include "toy/chat/jinja.h"

namespace toy::cli {

ChatSession::ChatSession(const Loaded& l, const SamplerConfig& sc, int64_t n_ctx, DType kv_type, std::string system,
                         Speculation* spec)
    : model_(l),
      prompter_(serve::chat_prompt_source(*l.file, l.tokenizer.get())),
      engine_(*l.model, n_ctx, kv_type),
      sampler_(sc),
      system_(std::move(system)),
      spec_(spec) {
  if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer, so it cannot chat");
  if (!prompter_.parse_error().empty())
    throw InputError(l.file->path() + ": its chat template does not parse: " + prompter_.parse_error());
  if (!l.file->has("tokenizer.chat_template"))
    std::cerr << "warning: " << for_terminal(l.file->path())
              << " has no chat template (tokenizer.chat_template); using ChatML, which the model may not know\n";
  clear();
}

void ChatSession::clear() {
  messages_ = nlohmann::ordered_json::array();
  if (!system_.empty()) messages_.push_back({{"role", "system"}, {"content", system_}});
}

std::vector<int32_t> ChatSession::render(bool add_generation_prompt) const {
  std::string text;
  try {
    text = prompter_.render(messages_, nullptr, std::nullopt, add_generation_prompt);
  } catch (const chat::TemplateError& e) {
    throw InputError(model_.file->path() + ": the chat template failed: " + e.what());
  }
  return model_.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true);
}

Streamed ChatSession::answer(const std::string& user, Budget limit, bool ignore_eos, std::FILE* out,
                             const std::atomic<bool>* stop) {
  const nlohmann::ordered_json before = messages_;
  messages_.push_back({{"role", "user"}, {"content", user}});
  // Room for the answer: a quarter of the context at least (or -n, when smaller).
  const int64_t n_ctx = engine_.n_ctx(), room = std::min<int64_t>(limit.n > 0 ? limit.n : n_ctx / 4, n_ctx / 4);
  std::vector<int32_t> prompt = render(true);
  size_t dropped = 0;
  const size_t first_turn = system_.empty() ? 0 : 1;
  while (int64_t(prompt.size()) + room > n_ctx && messages_.size() > first_turn + 1) {
    // The oldest turn, user and assistant together: templates insist that the roles alternate.
    messages_.erase(messages_.begin() + std::ptrdiff_t(first_turn), messages_.begin() + std::ptrdiff_t(first_turn + 2));
    dropped += 2;
    prompt = render(true);
  }
  if (int64_t(prompt.size()) + room > n_ctx) {
    messages_ = before;
    throw InputError("the message is too long: with the chat template it takes " + std::to_string(prompt.size()) +
                     " of the " + std::to_string(n_ctx) + " tokens of context (see --ctx)");
  }
  if (dropped > 0) std::cerr << "(the oldest " << dropped << " messages were dropped to fit the context)\n";

  // The cache holds the conversation so far when the new prompt extends it: only the rest is fed.
  const bool extends =
      !cached_.empty() && cached_.size() < prompt.size() && std::equal(cached_.begin(), cached_.end(), prompt.begin());
  if (!extends) {
    engine_.reset();
    cached_.clear();
  }
  const std::vector<int32_t> fresh(prompt.begin() + std::ptrdiff_t(cached_.size()), prompt.end());
  const int64_t left = n_ctx - int64_t(prompt.size());
  const Budget bound{limit.n > 0 ? std::min(limit.n, left) : left, false};
  Streamed s = stream_generation(engine_, sampler_, model_.tokenizer.get(), fresh, bound, ignore_eos, out, stop, spec_);
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  cached_.insert(cached_.end(), s.result.tokens.begin(), s.result.tokens.end());
  cached_.resize(size_t(engine_.n_past()));  // the last sampled token is not fed until the next turn
  messages_.push_back({{"role", "assistant"}, {"content", s.text}});
  return s;
}

int one_chat_turn(const Args& a, const Loaded& l, const SamplerConfig& sc, int64_t n_ctx, Budget limit) {
  if (a.has("ids")) throw UsageError("--chat takes a text prompt (-p, -f), not --ids");
  const std::optional<std::string> text = prompt_text(a);
  if (!text) throw UsageError("--chat needs the user's message: -p TEXT, -p - (standard input) or -f FILE");
  const std::unique_ptr<Drafting> draft = drafting(a, l, n_ctx);
  ChatSession chat(l, sc, n_ctx, kv_type(a), a.str("system"), draft ? &draft->spec : nullptr);
  const Streamed s = chat.answer(*text, limit.soft ? Budget{0, false} : limit, a.flag("ignore-eos"), stdout, nullptr);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "\ngenerated: %zu tokens%s | %s | seed %llu\n", s.result.tokens.size(),
               drafting_summary(draft.get()).c_str(), ending_text(s.ending), (unsigned long long)sc.seed);
  return kOk;
}

}  // namespace toy::cli
