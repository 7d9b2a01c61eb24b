// cli/cmd_infer.cpp — `toy infer [MODEL]`: print the prompt, then generate its continuation,
// streamed to stdout as it comes (llama-cli's habits: -m, -p, -f, -n, -c, -cnv).
#include <cstdint>
#include <cstdio>
#include <iostream>

#include "cli/chat_session.h"
#include "cli/generation.h"
#include "cli/vit.h"

namespace toy::cli {
namespace {

int run(const Args& a) {
  if (a.has("image")) return infer_vit(a);  // an image classifier (cli/vit.h)
  apply_threads(a);
  Loaded l = load_model_and_tokenizer(a);
  apply_lora_flags(a, *l.model);
  place_model(a, *l.model);
  const ModelConfig& cfg = l.model->config();
  const SamplerConfig sc = sampler_config(a, l.tokenizer.get());
  const int64_t n_ctx = context_size(a, cfg);
  const Budget limit = budget(a);
  if (a.flag("chat")) return one_chat_turn(a, l, sc, n_ctx, limit);

  std::vector<int32_t> prompt;
  std::optional<std::string> text = prompt_text(a);
  if (a.has("ids") && text) throw UsageError("give either --ids or a prompt text (-p, -f), not both");
  if (a.has("ids")) {
    prompt = parse_ids(a.str("ids"));
    for (int32_t id : prompt)
      if (id >= cfg.n_vocab)
        throw UsageError("--ids: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(cfg.n_vocab) + ")");
  } else {
    if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer; use --ids");
    if (!text) text = model_given(a) ? "" : "Once upon a time";  // the embedded story model's default
    prompt = l.tokenizer->encode(*text, /*add_special=*/true, /*parse_special=*/a.flag("special"));
  }
  if (prompt.empty())
    throw UsageError("the prompt is empty (and the tokenizer adds no BOS): give --prompt text or --ids");
  const size_t given = prompt.size();
  prompt = fit_prompt(std::move(prompt), n_ctx, l.tokenizer.get());
  if (prompt.size() < given) text.reset();  // shown as what is left of it

  DecodeEngine engine(*l.model, n_ctx, kv_type(a));
  Sampler sampler(sc);
  if (!a.flag("no-display-prompt")) {  // the prompt as the user wrote it; ids as their text, or as ids
    const std::string shown = text ? *text : l.tokenizer ? l.tokenizer->decode(prompt) : std::string();
    std::fputs(shown.c_str(), stdout);
    if (!l.tokenizer)
      for (int32_t id : prompt) std::printf("%d ", id);
  }
  const std::unique_ptr<Drafting> draft = drafting(a, l, n_ctx);
  const Streamed s = stream_generation(engine, sampler, l.tokenizer.get(), prompt, limit, a.flag("ignore-eos"), stdout,
                                       nullptr, draft ? &draft->spec : nullptr);
  std::fputs("\n", stdout);
  std::fflush(stdout);

  const GenerateResult& r = s.result;
  const double pp = r.prompt_seconds > 0 ? double(r.prompt_tokens) / r.prompt_seconds : 0;
  const double tg = r.generate_seconds > 0 ? double(r.tokens.size()) / r.generate_seconds : 0;
  std::fprintf(stderr, "\nprompt: %lld tokens, %.1f tok/s | generated: %zu tokens, %.1f tok/s%s | %s | seed %llu\n",
               (long long)r.prompt_tokens, pp, r.tokens.size(), tg, drafting_summary(draft.get()).c_str(),
               ending_text(s.ending), (unsigned long long)sc.seed);
  return kOk;
}

std::vector<Flag> flags() {
  std::vector<Flag> f = {
      model_flag(),
      {"prompt", FlagType::String, "", "prompt text ('-': standard input; BOS added as the tokenizer says)", 'p'},
      {"file", FlagType::Path, "", "read the prompt from this file", 'f'},
      {"ids", FlagType::String, "", "prompt as token ids, e.g. 1,15043,3186"},
      {"no-display-prompt", FlagType::Bool, "", "print only the continuation, not the prompt before it"},
      {"special", FlagType::Bool, "", "recognise special tokens written in the prompt (<|im_start|>)"},
      {"chat",
       FlagType::Bool,
       "",
       "one chat turn: the prompt as a user message, through the model's chat template",
       0,
       {"-cnv", "--conversation"}},
      {"system", FlagType::String, "", "with --chat: the system message"},
  };
  for (Flag& g : generation_flags()) f.push_back(std::move(g));
  f.push_back(lora_flag());
  f.push_back(lora_scaled_flag());
  for (Flag& g : vit_infer_flags()) f.push_back(std::move(g));
  return f;
}

Registrar reg({
    .name = "infer",
    .summary = "generate text from a GGUF model, streamed as it is produced",
    .positionals = {{"MODEL", "a GGUF file or a model name (see toy list; default: the embedded story model)", false}},
    .flags = flags(),
    .run = run,
    .details = "Prints the prompt, then the continuation. Generation ends at the model's end-of-text token; with an\n"
               "explicit -n N after exactly N tokens (as llama.cpp), and without -n at the first sentence end\n"
               "(. ! ? or a line break) after 128 tokens, or at 192. A prompt longer than the context keeps its\n"
               "last tokens, with a warning.\n"
               "examples:\n  toy infer model.gguf -p \"Once upon a time\" -n 64\n"
               "  toy infer -m model.gguf -f prompt.txt --temp 0.8 --top-k 40 --top-p 0.95 -s 7\n"
               "  echo \"Why is the sky blue?\" | toy infer qwen2.5:0.5b -p - --chat\n"
               "  toy infer model.gguf --ids 1,15043,3186 --temp 0\n"
               "  toy infer big.gguf -md small.gguf -p \"...\"   speculative decoding: the same tokens, sooner\n"
               "  toy infer vit.gguf --image 17          the classes of test image 17 (a ViT)",
});

}  // namespace
}  // namespace toy::cli
