// cli/cmd_eval.cpp — `toy eval MODEL`: score text with a model.
//
// Two modes:
//   --ids / --text   one sequence in one batch: the logits of every position (--dump-logits),
//                    each token's log-probability with its top-k alternatives, and the sequence's
//                    perplexity (the last line, "tokens: N  mean log-prob: X  perplexity: Y").
//   --file           perplexity of a long text with windows of --ctx tokens: llama.cpp's chunks
//                    (default) or a strided sliding window (--stride); docs/eval.md.
// The log-probability and perplexity arithmetic lives in engines/eval.h; this file only reads
// input and prints.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/vit.h"
#include "toy/engines/eval.h"
#include "toy/io/output_file.h"
#include "toy/io/progress.h"

namespace toy::cli {
namespace {

using json = nlohmann::ordered_json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A token as text for people: its piece with control characters escaped, quoted.
std::string show_token(const Tokenizer* t, int32_t id) {
  if (!t) return std::string("#").append(std::to_string(id));
  std::string s = t->piece(id, /*special=*/true), out = "'";
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\'')
      out += "\\'";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else
      out += char(c);
  }
  return out + "'";
}

std::string piece_or_empty(const Tokenizer* t, int32_t id) {
  return t ? t->piece(id, /*special=*/true) : std::string();
}

void write_logits(const std::string& path, const Tensor& logits) {
  write_output_file(path, [&](std::FILE* f) {
    return std::fwrite(logits.data(), 4, size_t(logits.numel()), f) == size_t(logits.numel());
  });
}

int score_sequence(const Args& a, const Loaded& l) {
  const ModelConfig& cfg = l.model->config();
  std::vector<int32_t> ids;
  if (a.has("ids")) {
    ids = parse_ids(a.str("ids"));
  } else {
    if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer; use --ids");
    ids = l.tokenizer->encode(a.str("text"), true, false);
  }
  if (ids.empty()) throw UsageError("no tokens to evaluate");
  for (int32_t id : ids)
    if (id >= cfg.n_vocab)
      throw UsageError("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(cfg.n_vocab) + ")");
  if (int64_t(ids.size()) > cfg.n_ctx)
    throw UsageError(std::to_string(ids.size()) + " tokens exceed the model's context of " + std::to_string(cfg.n_ctx) +
                     " (for long texts use --file with --ctx)");
  const long long top_k = a.integer("top-k");
  if (top_k < 0 || top_k > cfg.n_vocab) throw UsageError("--top-k must be between 0 and the vocabulary size");

  DecodeEngine engine(*l.model, int64_t(ids.size()), kv_type(a));
  Tensor logits = engine.feed(ids);  // [T, V], one batch
  if (a.has("dump-logits")) {
    write_logits(a.str("dump-logits"), logits);
    std::fprintf(stderr, "wrote %zu × %lld float32 logits to %s\n", ids.size(), (long long)cfg.n_vocab,
                 a.str("dump-logits").c_str());
  }
  const std::vector<TokenScore> scores = score_logits(logits, ids, int(top_k));
  double total = 0;
  for (const TokenScore& s : scores) total += s.logprob;
  const double n = double(scores.size());
  const Tokenizer* tok = l.tokenizer.get();

  if (a.flag("json")) {
    json tokens = json::array();
    tokens.push_back({{"pos", 0}, {"id", ids[0]}, {"text", piece_or_empty(tok, ids[0])}, {"logprob", nullptr}});
    for (size_t i = 0; i < scores.size(); ++i) {
      json top = json::array();
      for (auto [id, lp] : scores[i].top)
        top.push_back({{"id", id}, {"text", piece_or_empty(tok, id)}, {"logprob", lp}});
      json t = {{"pos", i + 1},
                {"id", scores[i].id},
                {"text", piece_or_empty(tok, scores[i].id)},
                {"logprob", scores[i].logprob}};
      if (top_k > 0) t["top"] = top;
      tokens.push_back(t);
    }
    json out = {{"n_tokens", ids.size()}, {"tokens", tokens}};
    out["mean_logprob"] = scores.empty() ? json(nullptr) : json(total / n);
    out["perplexity"] = scores.empty() ? json(nullptr) : json(std::exp(-total / n));
    std::printf("%s\n", dump(out).c_str());
    return kOk;
  }
  // One line per token: position, id, text, log-probability, then the top-k alternatives.
  std::printf("%5d %7d %-16s\n", 0, ids[0], show_token(tok, ids[0]).c_str());
  for (size_t i = 0; i < scores.size(); ++i) {
    std::string line;
    for (auto [id, lp] : scores[i].top) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " %.4f", lp);
      line += "  " + show_token(tok, id) + buf;
    }
    std::printf("%5zu %7d %-16s %10.4f%s%s\n", i + 1, scores[i].id, show_token(tok, scores[i].id).c_str(),
                scores[i].logprob, line.empty() ? "" : "   |", line.c_str());
  }
  if (!scores.empty())
    std::printf("tokens: %zu  mean log-prob: %.6f  perplexity: %.4f\n", ids.size(), total / n, std::exp(-total / n));
  return kOk;
}

int score_file(const Args& a, const Loaded& l) {
  if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer; --file needs one");
  if (a.has("dump-logits")) throw UsageError("--dump-logits works with --ids or --text, not --file");
  const std::string path = a.str("file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  // As llama-perplexity: BOS as the tokenizer says, special tokens in the text stay text.
  const std::vector<int32_t> tokens = l.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);

  const ModelConfig& cfg = l.model->config();
  PerplexityOptions o;
  o.n_ctx = a.integer("ctx");
  o.kv_type = kv_type(a);
  o.stride = a.integer("stride");
  o.max_windows = a.integer("chunks");
  if (o.n_ctx <= 0) o.n_ctx = std::min<int64_t>(512, cfg.n_ctx);
  if (o.n_ctx > cfg.n_ctx)
    throw UsageError("--ctx " + std::to_string(o.n_ctx) + " exceeds the model's context of " +
                     std::to_string(cfg.n_ctx));
  if (o.stride < 0 || o.stride > o.n_ctx) throw UsageError("--stride must be between 0 (llama.cpp chunks) and --ctx");
  // A chunk scores its second half but the last token; a sliding window its tokens after the first.
  if (o.n_ctx < (o.stride == 0 ? 3 : 2))
    throw UsageError("--ctx " + std::to_string(o.n_ctx) + " scores nothing: give at least " +
                     (o.stride == 0 ? "3 (llama.cpp chunks)" : "2 (with --stride)"));
  if (o.max_windows < 0) throw UsageError("--chunks must be ≥ 0");
  o.bos = l.tokenizer->add_bos() ? l.tokenizer->bos() : -1;
  Progress bar("perplexity", 0, Progress::Unit::Count, "windows");
  o.progress = [&bar](int64_t done, int64_t total) {
    bar.set_total(total);
    bar.update(done);
  };
  PerplexityResult r;
  try {
    r = perplexity(*l.model, tokens, o);
    bar.finish();
  } catch (const std::invalid_argument& e) {
    throw InputError(path + ": " + e.what() + " (the text has " + std::to_string(tokens.size()) + " tokens)");
  }
  const char* method = o.stride == 0 ? "llama.cpp-chunks" : "strided";
  if (a.flag("json")) {
    json out = {{"file", path},           {"method", method},           {"n_ctx", o.n_ctx},
                {"stride", o.stride},     {"n_tokens", r.n_tokens},     {"n_windows", r.n_windows},
                {"n_scored", r.n_scored}, {"add_bos", o.bos >= 0},      {"nll", r.nll},
                {"ppl", r.ppl},           {"ppl_stderr", r.ppl_stderr}, {"window_ppl", r.window_ppl}};
    std::printf("%s\n", dump(out).c_str());
  } else {
    std::printf("method: %s  ctx: %lld  stride: %lld  tokens: %lld  windows: %lld  scored: %lld\n", method,
                (long long)o.n_ctx, (long long)o.stride, (long long)r.n_tokens, (long long)r.n_windows,
                (long long)r.n_scored);
    std::printf("perplexity: %.4f +/- %.5f  (mean nll %.6f)\n", r.ppl, r.ppl_stderr, r.nll);
  }
  return kOk;
}

int run(const Args& a) {
  if (a.has("images")) return eval_vit(a);  // an image classifier (cli/vit.h)
  apply_threads(a);
  const int modes = int(a.has("ids")) + int(a.has("text")) + int(a.has("file"));
  if (modes == 0) throw UsageError("give --ids, --text or --file");
  if (modes > 1) throw UsageError("give only one of --ids, --text and --file");
  if (!a.has("file") && (a.has("ctx") || a.has("stride") || a.has("chunks")))
    throw UsageError("--ctx, --stride and --chunks are for perplexity over --file");
  Loaded l = load_model_and_tokenizer(a);
  apply_lora_flags(a, *l.model);
  place_model(a, *l.model);
  return a.has("file") ? score_file(a, l) : score_sequence(a, l);
}

Registrar reg({
    .name = "eval",
    .summary = "score text: per-token log-probs with top-k alternatives, perplexity over a file",
    .positionals = {{"MODEL", "a GGUF model (default: the embedded story model)", false}},
    .flags = {model_flag(),
              {"ids", FlagType::String, "", "token ids, e.g. 1,15043,3186"},
              {"text", FlagType::String, "", "text to score (tokenized with the model's tokenizer, BOS as it says)"},
              {"dump-logits", FlagType::Path, "", "write all logits as little-endian float32 [n_tokens][n_vocab]"},
              {"top-k", FlagType::Int, "0", "also list the k most likely tokens at each position"},
              {"file", FlagType::Path, "", "perplexity of a text file, in windows of --ctx tokens"},
              {"ctx", FlagType::Int, "0", "--file: tokens per window (0: 512, or the model's context if smaller)", 'c'},
              {"stride", FlagType::Int, "0",
               "--file: 0 = llama.cpp chunks (score the second half); S = sliding window moved S tokens"},
              {"chunks", FlagType::Int, "0", "--file: evaluate at most this many windows (0: all)"},
              {"json", FlagType::Bool, "", "print one JSON object"},
              kv_type_flag(),
              device_flag(),
              gpu_layers_flag(),
              lora_flag(),
              lora_scaled_flag(),
              threads_flag(),
              vit_eval_flags()[0],
              vit_eval_flags()[1]},
    .run = run,
    .details = "examples:\n  toy eval model.gguf --ids 1,15043,3186 --dump-logits out.f32\n"
               "  toy eval model.gguf --text \"The cat sat\" --top-k 5\n"
               "  toy eval model.gguf --file book.txt --ctx 256 --stride 128 --json\n"
               "  toy eval vit.gguf --images /usr/share/datasets/fashion-mnist      a ViT's test accuracy\n"
               "methods: docs/eval.md",
});

}  // namespace
}  // namespace toy::cli
