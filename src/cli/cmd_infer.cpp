// cli/cmd_infer.cpp — `toy infer [MODEL]`: generate text, streamed to stdout as it comes.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "cli/vit.h"
#include "toy/engines/generate.h"

namespace toy::cli {
namespace {

int run(const Args& a) {
  if (a.has("image")) return infer_vit(a);  // an image classifier (cli/vit.h)
  apply_threads(a);
  Loaded l = load_model_and_tokenizer(a);
  const ModelConfig& cfg = l.model->config();

  std::vector<int32_t> prompt;
  if (a.has("ids") && a.has("prompt")) throw UsageError("give either --prompt or --ids, not both");
  if (a.has("ids")) {
    prompt = parse_ids(a.str("ids"));
    for (int32_t id : prompt)
      if (id >= cfg.n_vocab)
        throw UsageError("--ids: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(cfg.n_vocab) + ")");
  } else {
    if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer; use --ids");
    std::string text = a.str("prompt");
    if (!a.has("prompt") && !a.positional(0)) text = "Once upon a time";  // the embedded story model's default
    prompt = l.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/a.flag("special"));
  }
  if (prompt.empty())
    throw UsageError("the prompt is empty (and the tokenizer adds no BOS): give --prompt text or --ids");

  const long long n_predict = a.integer("n-predict");
  if (n_predict < 0) throw UsageError("-n must be ≥ 0");
  long long n_ctx = a.integer("ctx");
  if (n_ctx < 0) throw UsageError("--ctx must be ≥ 0");
  if (n_ctx == 0) n_ctx = std::min<long long>(cfg.n_ctx, 4096);
  if (n_ctx > cfg.n_ctx)  // the KV cache is sized by it: beyond the model's context it only costs memory
    throw UsageError("--ctx " + std::to_string(n_ctx) + " exceeds the model's context of " + std::to_string(cfg.n_ctx));
  if (int64_t(prompt.size()) > n_ctx)
    throw UsageError("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                     std::to_string(n_ctx) + " (see --ctx; the model was trained with " + std::to_string(cfg.n_ctx) +
                     ")");

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

  DecodeEngine engine(*l.model, n_ctx, kv_type(a));
  Sampler sampler(sc);
  std::optional<StreamDecoder> stream;
  if (l.tokenizer) stream.emplace(*l.tokenizer);
  if (l.tokenizer && a.flag("echo")) {
    std::fputs(l.tokenizer->decode(prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  GenerateHooks hooks;
  if (l.tokenizer && !a.flag("ignore-eos")) hooks.is_eog = [&](int32_t id) { return l.tokenizer->is_eog(id); };
  hooks.on_token = [&](int32_t id) {
    const std::string piece = stream ? stream->push(id) : std::to_string(id) + " ";
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  GenerateResult r = generate(engine, sampler, prompt, n_predict, hooks);
  if (stream) std::fputs(stream->flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);

  const double pp = r.prompt_seconds > 0 ? double(r.prompt_tokens) / r.prompt_seconds : 0;
  const double tg = r.generate_seconds > 0 ? double(r.tokens.size()) / r.generate_seconds : 0;
  std::fprintf(stderr, "\nprompt: %lld tokens, %.1f tok/s | generated: %zu tokens, %.1f tok/s | %s | seed %llu\n",
               (long long)r.prompt_tokens, pp, r.tokens.size(), tg,
               r.finish_reason == "stop" ? "stopped at end of text" : "length limit", (unsigned long long)sc.seed);
  return kOk;
}

Registrar reg({
    .name = "infer",
    .summary = "generate text from a GGUF model, streamed as it is produced",
    .positionals = {{"MODEL", "a GGUF model (default: the embedded story model)", false}},
    .flags = {{"prompt", FlagType::String, "", "prompt text (BOS added as the tokenizer says)", 'p'},
              {"ids", FlagType::String, "", "prompt as token ids, e.g. 1,15043,3186"},
              {"n-predict", FlagType::Int, "128", "tokens to generate", 'n'},
              {"temp", FlagType::Float, "0.8", "temperature; 0 is greedy"},
              {"top-k", FlagType::Int, "40", "sample from the k most likely tokens (0: all)"},
              {"top-p", FlagType::Float, "0.95", "nucleus: smallest set with this much probability (1: off)"},
              {"min-p", FlagType::Float, "0.05", "drop tokens below min-p × the top probability (0: off)"},
              {"repeat-penalty", FlagType::Float, "1.0", "penalise recently seen tokens (1: off)"},
              {"repeat-last-n", FlagType::Int, "64", "how many recent tokens the penalty sees"},
              {"seed", FlagType::Int, "-1", "random seed (-1: from the clock)"},
              {"ctx", FlagType::Int, "0", "context size (0: the model's, at most 4096)"},
              {"special", FlagType::Bool, "", "recognise special tokens written in the prompt (<|im_start|>)"},
              {"echo", FlagType::Bool, "", "print the prompt before the continuation"},
              {"ignore-eos", FlagType::Bool, "", "keep generating past end-of-text tokens"},
              kv_type_flag(),
              threads_flag(),
              vit_infer_flags()[0],
              vit_infer_flags()[1]},
    .run = run,
    .details = "examples:\n  toy infer model.gguf --prompt \"Once upon a time\" -n 64\n"
               "  toy infer model.gguf --prompt \"...\" --temp 0.8 --top-k 40 --top-p 0.95 --seed 7\n"
               "  toy infer model.gguf --ids 1,15043,3186 --temp 0\n"
               "  toy infer vit.gguf --image 17          the classes of test image 17 (a ViT)",
});

}  // namespace
}  // namespace toy::cli
