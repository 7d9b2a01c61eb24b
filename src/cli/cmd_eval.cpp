// cli/cmd_eval.cpp — `toy eval MODEL`: score text with a model.
//
// Four modes:
//   --ids / --text   one sequence in one batch: the logits of every position (--dump-logits),
//                    each token's log-probability with its top-k alternatives, and the sequence's
//                    perplexity (the last line, "tokens: N  mean log-prob: X  perplexity: Y").
//   --file           perplexity of a long text with windows of --ctx tokens: llama.cpp's chunks
//                    (default) or a strided sliding window (--stride); docs/eval.md. With
//                    --kl-divergence-base FILE, the chunks' log-probabilities saved too.
//   --kl-divergence  the model against such a file (engines/kl_divergence.h).
//   --multiple-choice  tasks scored by each choice's log-likelihood (engines/eval.h score_choices).
// The log-probability and perplexity arithmetic lives in engines/eval.h; this file only reads
// input and prints.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/vit.h"
#include "toy/engines/eval.h"
#include "toy/engines/kl_divergence.h"
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
  auto run = [&] {
    try {
      r = perplexity(*l.model, tokens, o);
      bar.finish();
    } catch (const std::invalid_argument& e) {
      throw InputError(path + ": " + e.what() + " (the text has " + std::to_string(tokens.size()) + " tokens)");
    }
  };
  if (!a.has("kl-divergence-base")) {
    run();
  } else {  // the base file of a later --kl-divergence: the chunks' tokens, then a row per scored position
    if (o.stride != 0) throw UsageError("--kl-divergence-base works with llama.cpp's chunks, not --stride");
    KlBaseHeader h{.n_ctx = o.n_ctx, .n_vocab = cfg.n_vocab, .n_chunk = int64_t(tokens.size()) / o.n_ctx, .tokens = {}};
    if (o.max_windows > 0) h.n_chunk = std::min(h.n_chunk, o.max_windows);
    h.tokens.assign(tokens.begin(), tokens.begin() + h.n_chunk * h.n_ctx);
    write_output_file(a.str("kl-divergence-base"), [&](std::FILE* f) {
      bool ok = true;
      o.scored = [&](std::span<const float> row, int32_t) {
        const std::vector<uint16_t> q = encode_log_probs(row);
        ok = ok && std::fwrite(q.data(), sizeof(uint16_t), q.size(), f) == q.size();
      };
      write_kl_base_header(f, h);
      run();
      return ok && std::ferror(f) == 0;
    });
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

// --kl-divergence BASE: the model against the base file's log-probabilities, on the file's tokens,
// printed as llama-perplexity prints it.
int kl_divergence(const Args& a, const Loaded& l) {
  const std::string path = a.str("kl-divergence");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) throw InputError(path + ": cannot read");
  KlBaseHeader h;
  try {
    h = read_kl_base_header(f.get(), path);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  const ModelConfig& cfg = l.model->config();
  if (h.n_vocab != cfg.n_vocab)
    throw InputError(path + ": its vocabulary has " + std::to_string(h.n_vocab) + " tokens, the model's " +
                     std::to_string(cfg.n_vocab) + " (compare models of one vocabulary)");
  if (h.n_ctx > cfg.n_ctx)
    throw InputError(path + ": made with chunks of " + std::to_string(h.n_ctx) +
                     " tokens, beyond the model's context of " + std::to_string(cfg.n_ctx));
  if (a.has("ctx") && a.integer("ctx") != h.n_ctx)
    throw UsageError("--ctx " + std::to_string(a.integer("ctx")) + ": the base file was made with --ctx " +
                     std::to_string(h.n_ctx) + " (leave --ctx out)");
  PerplexityOptions o;
  o.n_ctx = h.n_ctx;
  o.kv_type = kv_type(a);
  o.max_windows = a.integer("chunks");
  if (o.max_windows < 0) throw UsageError("--chunks must be ≥ 0");
  o.bos = l.tokenizer && l.tokenizer->add_bos() ? l.tokenizer->bos() : -1;
  KlDivergence kl;
  std::vector<uint16_t> base(kl_row_size(h.n_vocab));
  o.scored = [&](std::span<const float> row, int32_t next) {
    if (std::fread(base.data(), sizeof(uint16_t), base.size(), f.get()) != base.size())
      throw InputError(path + ": the file ends inside the log-probabilities");
    kl.add(row, base, next);
  };
  Progress bar("kl-divergence", 0, Progress::Unit::Count, "chunks");
  o.progress = [&bar](int64_t done, int64_t total) {
    bar.set_total(total);
    bar.update(done);
  };
  perplexity(*l.model, h.tokens, o);
  bar.finish();
  const KlDivergence::Summary s = kl.summary();
  auto pair = [](const KlDivergence::Estimate& e) { return json::array({e.value, e.uncertainty}); };
  if (a.flag("json")) {
    json kld = json::object(), dp = json::object();
    for (auto [fr, v] : s.kld_percentiles) kld[std::to_string(fr).substr(0, 5)] = v;
    for (auto [fr, v] : s.p_diff_percentiles) dp[std::to_string(fr).substr(0, 5)] = v;
    const json out = {{"base", path},
                      {"n_ctx", h.n_ctx},
                      {"chunks", s.count / kl_rows_per_chunk(h.n_ctx)},
                      {"scored", s.count},
                      {"ppl", pair(s.ppl)},
                      {"ppl_base", pair(s.ppl_base)},
                      {"log_ppl_correlation", s.log_ppl_correlation},
                      {"log_ppl_ratio", pair(s.log_ppl_ratio)},
                      {"ppl_ratio", pair(s.ppl_ratio)},
                      {"ppl_diff", pair(s.ppl_diff)},
                      {"kld", pair(s.kld)},
                      {"kld_percentiles", kld},
                      {"p_diff", pair(s.p_diff)},
                      {"p_diff_percentiles", dp},
                      {"p_diff_rms", pair(s.p_diff_rms)},
                      {"same_top", pair(s.same_top)}};
    std::printf("%s\n", dump(out).c_str());
    return kOk;
  }
  auto name = [](double fr, const char* what) {  // "Maximum KLD", "99.9%   KLD", "Median  KLD", " 5.0%   Δp"
    char b[32];
    if (fr == 1) return std::string("Maximum ") + what;
    if (fr == 0) return std::string("Minimum ") + what;
    if (fr == 0.5) return std::string("Median  ") + what;
    std::snprintf(b, sizeof b, "%4.1f%%   %s", 100 * fr, what);
    return std::string(b);
  };
  std::printf("chunks: %lld  ctx: %lld  scored: %lld\n\n", (long long)(s.count / kl_rows_per_chunk(h.n_ctx)),
              (long long)h.n_ctx, (long long)s.count);
  std::printf("====== Perplexity statistics ======\n");
  std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl.value, s.ppl.uncertainty);
  std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", s.ppl_base.value, s.ppl_base.uncertainty);
  std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * s.log_ppl_correlation);
  std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.log_ppl_ratio.value, s.log_ppl_ratio.uncertainty);
  std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio.value, s.ppl_ratio.uncertainty);
  std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", s.ppl_diff.value, s.ppl_diff.uncertainty);
  std::printf("====== KL divergence statistics ======\n");
  std::printf("Mean    KLD: %10.6f ± %10.6f\n", s.kld.value, s.kld.uncertainty);
  for (auto [fr, v] : s.kld_percentiles) std::printf("%s: %10.6f\n", name(fr, "KLD").c_str(), v);
  std::printf("\n====== Token probability statistics ======\n");
  std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * s.p_diff.value, 100 * s.p_diff.uncertainty);
  for (auto [fr, v] : s.p_diff_percentiles) std::printf("%s: %6.3f%%\n", name(fr, "Δp").c_str(), 100 * v);
  std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * s.p_diff_rms.value, 100 * s.p_diff_rms.uncertainty);
  std::printf("Same top p: %6.3f ± %5.3f %%\n", 100 * s.same_top.value, 100 * s.same_top.uncertainty);
  return kOk;
}

// --multiple-choice FILE: JSONL {"context", "choices", "label"} or llama-perplexity's HellaSwag
// text (6 lines a task: context, label, 4 endings). Malformed content is an InputError naming the line.
std::vector<ChoiceTask> read_choice_tasks(const std::string& path, std::string& format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  auto blank = [](const std::string& l) { return l.find_first_not_of(" \t") == std::string::npos; };
  const auto first = std::find_if_not(lines.begin(), lines.end(), blank);
  if (first == lines.end()) throw InputError(path + ": no tasks");
  std::vector<ChoiceTask> tasks;
  auto at = [&](size_t i) { return path + ":" + std::to_string(i + 1) + ": "; };
  if ((*first)[first->find_first_not_of(" \t")] == '{') {
    format = "jsonl";
    for (size_t i = 0; i < lines.size(); ++i) {
      if (blank(lines[i])) continue;
      json j;
      try {
        j = json::parse(lines[i]);
      } catch (const json::parse_error&) {
        throw InputError(at(i) + "not a JSON object");
      }
      const bool ok =
          j.is_object() && j.contains("context") && j["context"].is_string() && j.contains("choices") &&
          j["choices"].is_array() && j["choices"].size() >= 2 &&
          std::all_of(j["choices"].begin(), j["choices"].end(), [](const json& c) { return c.is_string(); }) &&
          j.contains("label") && j["label"].is_number_integer();
      if (!ok)
        throw InputError(
            at(i) + "expected {\"context\": text, \"choices\": [at least 2 texts], \"label\": the right one's index}");
      ChoiceTask t{.context = j["context"].get<std::string>(),
                   .choices = j["choices"].get<std::vector<std::string>>(),
                   .label = j["label"].get<int64_t>()};
      if (t.label < 0 || t.label >= int64_t(t.choices.size()))
        throw InputError(at(i) + "label " + std::to_string(t.label) + " is not the index of a choice");
      tasks.push_back(std::move(t));
    }
    return tasks;
  }
  format = "hellaswag";
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.size() % 6 != 0)
    throw InputError(path + ": " + std::to_string(lines.size()) +
                     " lines, not a multiple of 6 (HellaSwag: context, label, 4 endings a task; or JSONL)");
  for (size_t i = 0; i < lines.size(); i += 6) {
    const std::string& label = lines[i + 1];
    if (label.size() != 1 || label[0] < '0' || label[0] > '3')
      throw InputError(at(i + 1) + "the label must be 0, 1, 2 or 3, got \"" + label.substr(0, 20) + "\"");
    tasks.push_back({.context = lines[i],
                     .choices = {lines[i + 2], lines[i + 3], lines[i + 4], lines[i + 5]},
                     .label = label[0] - '0'});
  }
  return tasks;
}

int multiple_choice(const Args& a, const Loaded& l) {
  if (!l.tokenizer) throw InputError(l.file->path() + ": the file has no tokenizer; --multiple-choice needs one");
  const std::string path = a.str("multiple-choice");
  std::string format;
  std::vector<ChoiceTask> tasks = read_choice_tasks(path, format);
  const long long limit = a.integer("tasks");
  if (limit < 0) throw UsageError("--tasks must be ≥ 0");
  if (limit > 0 && size_t(limit) < tasks.size()) tasks.resize(size_t(limit));
  Progress bar("multiple-choice", int64_t(tasks.size()), Progress::Unit::Count, "tasks");
  int64_t by_sum = 0, by_letter = 0, by_token = 0;
  json per_task = json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    ChoiceScores s;
    try {
      s = score_choices(*l.model, *l.tokenizer, tasks[i], kv_type(a));
    } catch (const std::invalid_argument& e) {
      throw InputError(path + ": task " + std::to_string(i + 1) + ": " + e.what());
    }
    by_sum += s.by_sum() == tasks[i].label;
    by_letter += s.by_letter() == tasks[i].label;
    by_token += s.by_token() == tasks[i].label;
    per_task.push_back({{"label", tasks[i].label},
                        {"logprob", s.logprob},
                        {"tokens", s.tokens},
                        {"by_sum", s.by_sum()},
                        {"by_letter", s.by_letter()},
                        {"by_token", s.by_token()}});
    bar.update(int64_t(i + 1));
  }
  bar.finish();
  const double n = double(tasks.size());
  auto accuracy = [n](int64_t right) {  // the fraction right and its standard error, as lm-eval's
    const double p = double(right) / n;
    return json::array({p, n > 1 ? std::sqrt(p * (1 - p) / (n - 1)) : 0.0});
  };
  const json acc = accuracy(by_sum), norm = accuracy(by_letter), tok = accuracy(by_token);
  if (a.flag("json")) {
    const json out = {{"file", path},     {"format", format},     {"tasks", tasks.size()}, {"acc", acc},
                      {"acc_norm", norm}, {"acc_per_token", tok}, {"per_task", per_task}};
    std::printf("%s\n", dump(out).c_str());
    return kOk;
  }
  std::printf("tasks: %zu  format: %s\n", tasks.size(), format.c_str());
  auto line = [](const char* what, const json& v, const char* how) {
    std::printf("%s %7.3f ± %6.3f %%  %s\n", what, 100 * v[0].get<double>(), 100 * v[1].get<double>(), how);
  };
  line("accuracy           :", acc, "(the sum of the choice's log-probabilities: lm-eval's acc)");
  line("accuracy per letter:", norm, "(that sum over its length in characters: lm-eval's acc_norm)");
  line("accuracy per token :", tok, "(the mean per token: llama-perplexity --hellaswag)");
  return kOk;
}

int run(const Args& a) {
  if (a.has("images")) return eval_vit(a);  // an image classifier (cli/vit.h)
  apply_threads(a);
  const int modes = int(a.has("ids")) + int(a.has("text")) + int(a.has("file")) + int(a.has("kl-divergence")) +
                    int(a.has("multiple-choice"));
  if (modes == 0) throw UsageError("give --ids, --text, --file, --kl-divergence or --multiple-choice");
  if (modes > 1)
    throw UsageError(
        "give only one of --ids, --text, --file, --kl-divergence (whose text is its file's) and --multiple-choice");
  if (a.has("tasks") && !a.has("multiple-choice")) throw UsageError("--tasks is for --multiple-choice");
  const bool windows = a.has("file") || a.has("kl-divergence");
  if (!windows && (a.has("ctx") || a.has("stride") || a.has("chunks")))
    throw UsageError("--ctx, --stride and --chunks are for perplexity over --file");
  if (a.has("kl-divergence-base") && !a.has("file"))
    throw UsageError("--kl-divergence-base saves the log-probabilities of a --file run");
  if (a.has("kl-divergence") && a.has("stride"))
    throw UsageError("--kl-divergence runs llama.cpp's chunks, not --stride");
  Loaded l = load_model_and_tokenizer(a);
  apply_lora_flags(a, *l.model);
  place_model(a, *l.model);
  if (a.has("kl-divergence")) return kl_divergence(a, l);
  if (a.has("multiple-choice")) return multiple_choice(a, l);
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
              {"kl-divergence-base",
               FlagType::Path,
               "",
               "--file: also save the log-probabilities, for a later --kl-divergence (llama-perplexity's file)",
               0,
               {"--save-all-logits"}},
              {"kl-divergence", FlagType::Path, "",
               "compare with a --kl-divergence-base file: KL divergence, Δp, same top token, Δ perplexity"},
              {"multiple-choice",
               FlagType::Path,
               "",
               "score tasks (JSONL {context, choices, label}, or HellaSwag's 6-line text): accuracy ± standard error",
               0,
               {"--hellaswag"}},
              {"tasks", FlagType::Int, "0", "--multiple-choice: the first N tasks only (0: all)"},
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
               "  toy eval f16.gguf --file book.txt --kl-divergence-base f16.kld    then\n"
               "  toy eval q4_0.gguf --kl-divergence f16.kld                          quantization's damage\n"
               "  toy eval model.gguf --multiple-choice hellaswag_val_full.txt --tasks 400\n"
               "  toy eval vit.gguf --images /usr/share/datasets/fashion-mnist      a ViT's test accuracy\n"
               "methods: docs/eval.md",
});

}  // namespace
}  // namespace toy::cli
