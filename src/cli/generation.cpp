// cli/generation.cpp — what `toy infer` and `toy chat` share (see generation.h).
#include "cli/generation.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace toy::cli {

namespace {

// llama.cpp's -l/--logit-bias TOKEN_ID(+/-)BIAS: "15043+1", "15043-0.5", "2-inf" (never token 2).
std::pair<int32_t, float> logit_bias(const std::string& v, int32_t n_vocab) {
  const size_t sign = v.find_first_of("+-", 1);
  const std::string id_text = v.substr(0, sign);
  const bool id_ok =
      !id_text.empty() && id_text.size() <= 10 && id_text.find_first_not_of("0123456789") == std::string::npos;
  const long long id = id_ok ? std::stoll(id_text) : -1;
  float bias = 0;
  size_t used = 0;
  try {
    if (sign != std::string::npos) bias = std::stof(v.substr(sign), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (!id_ok || sign == std::string::npos || used != v.size() - sign || std::isnan(bias) || bias == INFINITY)
    throw UsageError("--logit-bias \"" + v + "\": expected TOKEN_ID+BIAS or TOKEN_ID-BIAS, as 15043+1 or 2-inf");
  if (id >= n_vocab)
    throw UsageError("--logit-bias: token " + id_text + " is outside the vocabulary [0, " + std::to_string(n_vocab) +
                     ")");
  return {int32_t(id), bias};
}

int int_flag(const Args& a, const char* name, long long lo, long long hi) {
  const long long v = a.integer(name);
  if (v < lo || v > hi)
    throw UsageError(std::string("--") + name + " must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi));
  return int(v);
}

float float_flag(const Args& a, const char* name, double lo, double hi) {
  const double v = a.number(name);
  if (!(v >= lo && v <= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, " must be between %g and %g", lo, hi);
    throw UsageError(std::string("--") + name + range);
  }
  return float(v);
}

}  // namespace

SamplerConfig sampler_config(const Args& a, const Tokenizer* t) {
  SamplerConfig sc;
  sc.temperature = float_flag(a, "temp", 0, 1e6);
  sc.top_k = int_flag(a, "top-k", 0, INT32_MAX);
  sc.top_p = float_flag(a, "top-p", 0, 1);
  if (sc.top_p == 0) throw UsageError("--top-p must be greater than 0");
  sc.min_p = float_flag(a, "min-p", 0, 1);
  sc.typical_p = float_flag(a, "typical", 0, 1);
  sc.top_n_sigma = float_flag(a, "top-n-sigma", -1e6, 1e6);
  sc.xtc_probability = float_flag(a, "xtc-probability", 0, 1);
  sc.xtc_threshold = float_flag(a, "xtc-threshold", 0, 1);
  sc.min_keep = int_flag(a, "min-keep", 0, INT32_MAX);
  sc.repeat_penalty = float_flag(a, "repeat-penalty", 0, 1e6);
  if (sc.repeat_penalty == 0) throw UsageError("--repeat-penalty must be greater than 0");
  sc.repeat_last_n = int_flag(a, "repeat-last-n", -1, INT32_MAX);
  sc.presence_penalty = float_flag(a, "presence-penalty", -1e6, 1e6);
  sc.frequency_penalty = float_flag(a, "frequency-penalty", -1e6, 1e6);
  sc.dry_multiplier = float_flag(a, "dry-multiplier", 0, 1e6);
  sc.dry_base = float_flag(a, "dry-base", 1, 1e6);
  sc.dry_allowed_length = int_flag(a, "dry-allowed-length", 0, INT32_MAX);
  sc.dry_penalty_last_n = int_flag(a, "dry-penalty-last-n", -1, INT32_MAX);
  sc.mirostat = int_flag(a, "mirostat", 0, 2);
  sc.mirostat_eta = float_flag(a, "mirostat-lr", 0, 1);
  sc.mirostat_tau = float_flag(a, "mirostat-ent", 0, 1e6);
  if (a.has("samplers") && a.has("sampling-seq"))
    throw UsageError("give either --samplers or --sampling-seq, not both");
  try {
    if (a.has("samplers")) sc.chain = parse_sampler_names(a.str("samplers"));
    if (a.has("sampling-seq")) sc.chain = parse_sampler_letters(a.str("sampling-seq"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(a.has("samplers") ? "--samplers: " : "--sampling-seq: ") + e.what());
  }
  const std::vector<std::string> biases = a.all("logit-bias");
  std::vector<std::string> breakers = a.all("dry-sequence-breaker");
  if ((!biases.empty() || (sc.dry_multiplier > 0 && !breakers.empty())) && !t)
    throw UsageError("--logit-bias and --dry-sequence-breaker need a model with a vocabulary");
  for (const std::string& b : biases) sc.logit_bias.push_back(logit_bias(b, t->n_vocab()));
  if (sc.dry_multiplier > 0 && t) {  // llama.cpp's: the flag replaces the defaults, "none" leaves none
    if (breakers.empty()) breakers = default_dry_breakers();
    std::erase(breakers, "none");
    sc.dry_sequence_breakers = dry_breakers(*t, breakers);
  }
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
      {"temp", FlagType::Float, "0.8", "temperature; 0 is greedy", 0, {"--temperature"}},
      {"top-k", FlagType::Int, "40", "sample from the k most likely tokens (0: all)"},
      {"top-p", FlagType::Float, "0.95", "nucleus: smallest set with this much probability (1: off)"},
      {"min-p", FlagType::Float, "0.05", "drop tokens below min-p × the top probability (0: off)"},
      {"typical",
       FlagType::Float,
       "1.0",
       "locally typical sampling: this much mass nearest the entropy (1: off)",
       0,
       {"--typical-p"}},
      {"top-n-sigma",
       FlagType::Float,
       "-1",
       "keep logits within n standard deviations of the top (≤ 0: off)",
       0,
       {"--top-nsigma"}},
      {"xtc-probability", FlagType::Float, "0", "XTC: how often to drop the likeliest tokens (0: off)"},
      {"xtc-threshold", FlagType::Float, "0.1", "XTC: drops those above this probability but the last (> 0.5: off)"},
      {"min-keep", FlagType::Int, "0", "top-p, min-p, typical and XTC keep at least this many tokens"},
      {"repeat-penalty", FlagType::Float, "1.0", "penalise recently seen tokens (1: off)"},
      {"repeat-last-n", FlagType::Int, "64", "how many recent tokens the penalties see (-1: all, 0: none)"},
      {"presence-penalty", FlagType::Float, "0", "minus this on each recently seen token (0: off)"},
      {"frequency-penalty", FlagType::Float, "0", "minus count × this on each recently seen token (0: off)"},
      {"dry-multiplier", FlagType::Float, "0", "DRY: penalise tokens that extend a repeat (0: off)"},
      {"dry-base", FlagType::Float, "1.75", "DRY: the penalty is multiplier × base^(length − allowed length)"},
      {"dry-allowed-length", FlagType::Int, "2", "DRY: repeats up to this long go unpenalised"},
      {"dry-penalty-last-n", FlagType::Int, "64", "DRY: how many recent tokens to scan (-1: all, 0: off)"},
      {"dry-sequence-breaker",
       FlagType::String,
       "",
       "DRY: a text that ends a repeat, in place of \\n : \" * (repeatable; none: no breakers)",
       0,
       {},
       1,
       true},
      {"mirostat", FlagType::Int, "0", "Mirostat sampling, in place of the chain: 1 or 2 (0: off)"},
      {"mirostat-lr", FlagType::Float, "0.1", "Mirostat learning rate, eta"},
      {"mirostat-ent", FlagType::Float, "5.0", "Mirostat target entropy (surprise, bits), tau"},
      {"logit-bias",
       FlagType::String,
       "",
       "TOKEN_ID+BIAS or TOKEN_ID-BIAS added to a logit; 2-inf bans token 2 (repeatable)",
       'l',
       {},
       1,
       true},
      {"samplers", FlagType::String, "",
       "the chain's order, as llama.cpp: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"},
      {"sampling-seq",
       FlagType::String,
       "",
       "the chain as letters: edskypmxt is the default order",
       0,
       {"--sampler-seq"}},
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
