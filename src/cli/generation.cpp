// cli/generation.cpp — what `toy infer` and `toy chat` share (see generation.h).
#include "cli/generation.h"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace toy::cli {

SamplerConfig sampler_config(const Args& a) {
  const long long top_k = a.integer("top-k"), repeat_last_n = a.integer("repeat-last-n");
  if (top_k < 0 || top_k > INT32_MAX || repeat_last_n < 0 || repeat_last_n > INT32_MAX)
    throw UsageError("--top-k and --repeat-last-n must be between 0 and " + std::to_string(INT32_MAX));
  SamplerConfig sc{.temperature = float(a.number("temp")),
                   .top_k = int(top_k),
                   .top_p = float(a.number("top-p")),
                   .min_p = float(a.number("min-p")),
                   .repeat_penalty = float(a.number("repeat-penalty")),
                   .repeat_last_n = int(repeat_last_n)};
  if (sc.temperature < 0 || sc.top_p <= 0 || sc.top_p > 1 || sc.min_p < 0 || sc.min_p > 1 || sc.repeat_penalty <= 0)
    throw UsageError("sampling: need --temp ≥ 0, 0 < --top-p ≤ 1, 0 ≤ --min-p ≤ 1, --repeat-penalty > 0");
  const long long seed = a.integer("seed");
  sc.seed = seed >= 0 ? uint64_t(seed) : uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return sc;
}

int64_t context_size(const Args& a, const ModelConfig& cfg) {
  long long n_ctx = a.integer("ctx");
  if (n_ctx < 0) throw UsageError("--ctx must be ≥ 0");
  if (n_ctx == 0) n_ctx = std::min<long long>(cfg.n_ctx, 4096);
  if (n_ctx <= cfg.n_ctx) return n_ctx;
  // Beyond the trained length: rotary positions go on (worse text, as llama.cpp warns), up to 8×
  // (the KV cache is sized by it); learned position tables end there.
  const Architecture* arch = find_architecture(cfg.arch);
  const std::string what = "--ctx " + std::to_string(n_ctx) + " exceeds ";
  if (arch && arch->variant.positions == Positions::Learned)
    throw UsageError(what + "the model's context of " + std::to_string(cfg.n_ctx) + " (learned positions end there)");
  if (n_ctx > 8 * cfg.n_ctx) throw UsageError(what + "8 times the model's context of " + std::to_string(cfg.n_ctx));
  std::cerr << "warning: --ctx " << n_ctx << " is beyond the " << cfg.n_ctx
            << " tokens the model was trained on: expect worse text past them\n";
  return n_ctx;
}

std::optional<std::string> prompt_text(const Args& a) {
  if (a.has("prompt") && a.has("file")) throw UsageError("give either -p/--prompt or -f/--file, not both");
  auto slurp = [](std::istream& in) { return std::string(std::istreambuf_iterator<char>(in), {}); };
  if (a.has("file")) {
    const std::string path = a.str("file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot read the prompt file");
    return slurp(in);
  }
  if (!a.has("prompt")) return std::nullopt;
  if (a.str("prompt") == "-") return slurp(std::cin);  // llama.cpp's -p -: the prompt from standard input
  return a.str("prompt");
}

std::vector<int32_t> fit_prompt(std::vector<int32_t> prompt, int64_t n_ctx, const Tokenizer* tokenizer) {
  if (int64_t(prompt.size()) <= n_ctx) return prompt;
  const bool bos = tokenizer && tokenizer->bos() >= 0 && prompt[0] == tokenizer->bos() && n_ctx >= 2;
  const int64_t keep = std::max<int64_t>(1, n_ctx / 2 - (bos ? 1 : 0));
  std::vector<int32_t> fitted;
  if (bos) fitted.push_back(prompt[0]);
  fitted.insert(fitted.end(), prompt.end() - keep, prompt.end());
  // The count said is the count the summary line says (BOS included), so the two agree.
  std::cerr << "warning: the prompt has " << prompt.size() << " tokens, more than the context of " << n_ctx
            << (bos ? ": only " + std::to_string(fitted.size()) + " are used, its BOS token and its last " +
                          std::to_string(keep)
                    : ": only its last " + std::to_string(keep) + " are used")
            << " (a larger --ctx keeps more)\n";
  return fitted;
}

std::string TextStream::shown(std::string text) const {
  if (!spm_) return text;
  static const std::string kSpace = "\xE2\x96\x81";  // "▁"
  for (size_t at = 0; (at = text.find(kSpace, at)) != std::string::npos;) text.replace(at, kSpace.size(), " ");
  return text;
}

bool ends_sentence(const std::string& text) {
  size_t end = text.size();
  // Closing quotes and brackets after the punctuation: '"', '\'', ')', ']', and ” ’ (3 bytes each).
  for (;;) {
    if (end > 0 && (text[end - 1] == '"' || text[end - 1] == '\'' || text[end - 1] == ')' || text[end - 1] == ']')) {
      --end;
    } else if (end >= 3 &&
               (text.compare(end - 3, 3, "\xE2\x80\x9D") == 0 || text.compare(end - 3, 3, "\xE2\x80\x99") == 0)) {
      end -= 3;
    } else {
      break;
    }
  }
  if (end == 0) return false;
  const char last = text[end - 1];
  return last == '.' || last == '!' || last == '?' || (end == text.size() && last == '\n');
}

const char* ending_text(Ending e) {
  switch (e) {
    case Ending::EndOfText:
      return "stopped at end of text";
    case Ending::Length:
      return "length limit (-n)";
    case Ending::SentenceAfterBudget:
      return "stopped at the first sentence end after the default budget";
    case Ending::ContextFull:
      return "context full (see --ctx)";
    case Ending::Interrupted:
      return "interrupted";
  }
  return "?";
}

Budget budget(const Args& a) {
  const long long n = a.integer("n-predict");
  if (n < 0) throw UsageError("-n must be ≥ 0");
  return {n, !a.has("n-predict")};
}

Streamed stream_generation(DecodeEngine& engine, Sampler& sampler, const Tokenizer* tokenizer,
                           const std::vector<int32_t>& prompt, Budget limit, bool ignore_eos, std::FILE* out,
                           const std::atomic<bool>* stop, Speculation* spec) {
  Streamed s{.result = {}, .ending = Ending::Length, .text = {}};
  std::optional<TextStream> stream;
  if (tokenizer) stream.emplace(*tokenizer);
  int64_t emitted = 0;
  std::optional<Ending> ended;
  GenerateHooks hooks;
  hooks.is_eog = [&](int32_t id) {
    if (tokenizer && !ignore_eos && tokenizer->is_eog(id)) {
      ended = Ending::EndOfText;
      return true;
    }
    if (limit.soft && emitted >= limit.n && ends_sentence(s.text)) {
      ended = Ending::SentenceAfterBudget;
      return true;
    }
    return false;
  };
  hooks.on_token = [&](int32_t id) {
    ++emitted;
    const std::string piece = stream ? stream->push(id) : std::to_string(id) + " ";
    s.text += piece;
    std::fwrite(piece.data(), 1, piece.size(), out);
    std::fflush(out);
    if (stop && stop->load()) {
      ended = Ending::Interrupted;
      return false;
    }
    return true;
  };
  s.result = generate(engine, sampler, prompt, limit.hard(), hooks, spec);
  if (stream) {
    const std::string rest = stream->flush();
    s.text += rest;
    std::fputs(rest.c_str(), out);
  }
  if (ended)
    s.ending = *ended;
  else if (int64_t(s.result.tokens.size()) < limit.hard() && engine.n_past() >= engine.n_ctx())
    s.ending = Ending::ContextFull;
  return s;
}

DraftFlags draft_flags(const Args& a, const Loaded& target) {
  const std::string type = a.str("spec-type");
  if (type != "none" && type != "draft" && type != "ngram" && type != "ngram-simple")
    throw UsageError("--spec-type " + type + ": none, draft or ngram (ngram-simple)");
  const bool ngram = type == "ngram" || type == "ngram-simple";
  if (ngram && a.has("model-draft")) throw UsageError("give either --model-draft or --spec-type ngram, not both");
  if (type == "draft" && !a.has("model-draft")) throw UsageError("--spec-type draft needs -md/--model-draft FILE");
  DraftFlags d;
  const long long n_max = a.integer("draft-max"), n_min = a.integer("draft-min");
  const double p_min = a.number("draft-p-min");
  if (n_max < 1 || n_max > 1024) throw UsageError("--draft-max must be between 1 and 1024");
  if (n_min < 0 || n_min > n_max) throw UsageError("--draft-min must be between 0 and --draft-max");
  if (!(p_min >= 0 && p_min <= 1)) throw UsageError("--draft-p-min must be between 0 and 1");
  d.limits = {.n_max = n_max, .n_min = n_min, .p_min = float(p_min)};
  if (ngram) {
    d.ngram_n = a.integer("spec-ngram-size-n");
    d.ngram_m = a.integer("spec-ngram-size-m");
    if (d.ngram_n < 1 || d.ngram_m < 1) throw UsageError("--spec-ngram-size-n and -m must be ≥ 1");
  } else if (a.has("model-draft")) {
    const std::string path = resolve_model(a.str("model-draft"));
    auto file = gguf::GgufFile::open(path);
    d.model = load_model(file);
    try {
      check_draft_vocabulary(*d.model, *target.model);
    } catch (const std::invalid_argument& e) {
      throw InputError(path + ": " + e.what());
    }
    if (target.tokenizer && file->has("tokenizer.ggml.tokens")) {  // the same ids must mean the same text
      const std::shared_ptr<const Tokenizer> t = Tokenizer::from_gguf(*file);
      for (int32_t id = 0; id < std::min(t->n_vocab(), target.tokenizer->n_vocab()); ++id)
        if (t->token_text(id) != target.tokenizer->token_text(id))
          throw InputError(path + ": the draft's token " + std::to_string(id) + " is " +
                           for_terminal(t->token_text(id)) + ", the target's " +
                           for_terminal(target.tokenizer->token_text(id)) + ": the vocabularies differ");
    }
    if (!target.model->device().is_cpu()) d.model->to(target.model->device());
  }
  return d;
}

std::unique_ptr<Drafting> drafting(const Args& a, const Loaded& target, int64_t n_ctx) {
  DraftFlags flags = draft_flags(a, target);
  if (!flags.any()) return nullptr;
  auto d = std::make_unique<Drafting>();
  d->flags = std::move(flags);
  if (d->flags.model)
    d->drafter = std::make_unique<ModelDrafter>(*d->flags.model, *target.model, n_ctx, kv_type(a));
  else
    d->drafter = std::make_unique<NgramDrafter>(d->flags.ngram_n, d->flags.ngram_m);
  d->spec = d->flags.limits;
  d->spec.drafter = d->drafter.get();
  return d;
}

std::string drafting_summary(const Drafting* d) {
  if (!d) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, " | draft: %lld of %lld accepted (%.0f%%)", (long long)d->spec.accepted,
                (long long)d->spec.drafted, 100 * d->spec.acceptance());
  return buf;
}

std::vector<Flag> generation_flags() {
  std::vector<Flag> flags = {
      {"n-predict", FlagType::Int, "128",
       "tokens to generate; without -n: up to the first sentence end after 128 (at most 192)", 'n'},
      {"temp", FlagType::Float, "0.8", "temperature; 0 is greedy"},
      {"top-k", FlagType::Int, "40", "sample from the k most likely tokens (0: all)"},
      {"top-p", FlagType::Float, "0.95", "nucleus: smallest set with this much probability (1: off)"},
      {"min-p", FlagType::Float, "0.05", "drop tokens below min-p × the top probability (0: off)"},
      {"repeat-penalty", FlagType::Float, "1.0", "penalise recently seen tokens (1: off)"},
      {"repeat-last-n", FlagType::Int, "64", "how many recent tokens the penalty sees"},
      {"seed", FlagType::Int, "-1", "random seed (-1: from the clock)", 's'},
      {"ctx", FlagType::Int, "0", "context size (0: the model's, at most 4096)", 'c', {"--ctx-size"}},
      {"ignore-eos", FlagType::Bool, "", "keep generating past end-of-text tokens"},
      device_flag(),
      gpu_layers_flag(),
      kv_type_flag(),
      threads_flag(),
  };
  for (Flag& f : speculation_flags()) flags.push_back(std::move(f));
  return flags;
}

std::vector<Flag> speculation_flags() {
  return {
      {"model-draft",
       FlagType::String,
       "",
       "speculative decoding with this draft model (FILE or NAME; the target's vocabulary): the same tokens, "
       "sooner",
       0,
       {"-md", "--spec-draft-model"}},
      {"spec-type", FlagType::String, "none", "speculative decoding: none, draft (with -md) or ngram (prompt lookup)"},
      {"draft-max", FlagType::Int, "16", "most tokens drafted at a time", 0, {"--draft", "--draft-n"}},
      {"draft-min", FlagType::Int, "0", "a shorter draft is not verified", 0, {"--draft-n-min"}},
      {"draft-p-min",
       FlagType::Float,
       "0.75",
       "the draft model stops where its best token is less likely than this",
       0,
       {"--spec-draft-p-min"}},
      {"spec-ngram-size-n",
       FlagType::Int,
       "12",
       "--spec-type ngram: the tokens looked up",
       0,
       {"--spec-ngram-simple-size-n"}},
      {"spec-ngram-size-m",
       FlagType::Int,
       "48",
       "--spec-type ngram: the most tokens drafted after a match",
       0,
       {"--spec-ngram-simple-size-m"}},
  };
}

}  // namespace toy::cli
