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
                           const std::atomic<bool>* stop) {
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
  s.result = generate(engine, sampler, prompt, limit.hard(), hooks);
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

std::vector<Flag> generation_flags() {
  return {
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
}

}  // namespace toy::cli
