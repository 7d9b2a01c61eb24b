// cli/generation.h — what `toy infer` and `toy chat` share: sampling flags, the prompt's sources,
// streaming text to the terminal, and the rule that ends an answer.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/common.h"
#include "toy/engines/generate.h"

namespace toy::cli {

// The sampling flags (--temp, --top-k, … --mirostat, --dry-*, --logit-bias, --samplers, --seed),
// checked. `t` (null when the model has no vocabulary) checks --logit-bias and makes DRY's breakers.
SamplerConfig sampler_config(const Args& a, const Tokenizer* t);

// The context size from --ctx (0: the model's, at most 4096); beyond the model's is a UsageError.
int64_t context_size(const Args& a, const ModelConfig& cfg);

// The text of -p/--prompt ('-': standard input) or -f/--file; nullopt when neither is given.
std::optional<std::string> prompt_text(const Args& a);

// `prompt` cut to fit a context of n_ctx tokens when it does not: the first token (BOS) and the
// last n_ctx/2 - 1 tokens stay, leaving half the context for the continuation, with a warning on
// stderr. A prompt that fits is returned as it is.
std::vector<int32_t> fit_prompt(std::vector<int32_t> prompt, int64_t n_ctx, const Tokenizer* tokenizer);

// Generated tokens as terminal text: complete UTF-8 characters only, and for SentencePiece
// vocabularies a "▁" that the model spelled with byte tokens shown as the space it stands for.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& t) : decoder_(t), spm_(t.model() == "llama") {}
  std::string push(int32_t id) { return shown(decoder_.push(id)); }
  std::string flush() { return shown(decoder_.flush()); }

 private:
  std::string shown(std::string text) const;
  StreamDecoder decoder_;
  bool spm_;
};

// Whether `text` ends a sentence: its last character other than closing quotes and brackets is
// '.', '!' or '?', or it ends with a line break.
bool ends_sentence(const std::string& text);

// How a generation ended, as the summary line says it.
enum class Ending { EndOfText, Length, SentenceAfterBudget, ContextFull, Interrupted };
const char* ending_text(Ending e);

// The limit on generated tokens. With an explicit -n N it is exact, as in llama.cpp. Without one,
// generation ends at the first sentence end after `budget` tokens, and at budget + budget / 2 at
// the latest, so the default run does not stop mid-word.
struct Budget {
  int64_t n;  // tokens before the sentence rule applies (or the exact limit)
  bool soft;  // false: -n was given
  int64_t hard() const { return soft ? n + n / 2 : n; }
};
Budget budget(const Args& a);

// Streams one generation to `out`: feeds `prompt` at the engine's position, samples until an
// end-of-generation token (unless ignore_eos), the budget, a full context or `*stop`. The text
// goes out as it is made; it is also returned.
struct Streamed {
  GenerateResult result;
  Ending ending;
  std::string text;
};
Streamed stream_generation(DecodeEngine& engine, Sampler& sampler, const Tokenizer* tokenizer,
                           const std::vector<int32_t>& prompt, Budget limit, bool ignore_eos, std::FILE* out,
                           const std::atomic<bool>* stop = nullptr, Speculation* spec = nullptr);

// Speculative decoding from the flags (speculation_flags): -md/--model-draft FILE|NAME (a smaller
// model of the same vocabulary, placed where the target runs) or --spec-type ngram (prompt
// lookup), with --draft-max, --draft-min, --draft-p-min and --spec-ngram-size-n/-m. A draft of
// another vocabulary is an InputError; bad limits a UsageError.
struct DraftFlags {
  std::unique_ptr<Model> model;       // the draft model; null for n-gram lookup or no speculation
  int64_t ngram_n = 0, ngram_m = 48;  // n-gram lookup when ngram_n > 0
  Speculation limits;                 // n_max, n_min, p_min (no drafter)
  bool any() const { return model || ngram_n > 0; }
};
DraftFlags draft_flags(const Args& a, const Loaded& target);
// The one drafter of `toy infer` and `toy chat` over those flags; null without speculation.
struct Drafting {
  DraftFlags flags;
  std::unique_ptr<Drafter> drafter;
  Speculation spec;
};
std::unique_ptr<Drafting> drafting(const Args& a, const Loaded& target, int64_t n_ctx);
// " | draft: 40 of 64 accepted (62%)" for the summary line; "" without speculation.
std::string drafting_summary(const Drafting* d);

// The sampling and context flags infer and chat share (speculation_flags among them).
std::vector<Flag> generation_flags();
std::vector<Flag> speculation_flags();  // -md, --spec-type, --draft-max, ... (serve's too)

}  // namespace toy::cli
