// tests/test_eval.cpp — `toy eval`: per-token log-probs and perplexity, checked against the raw
// logits that `toy eval --dump-logits` writes. The references are computed here, in double, from
// the dumped logits (log-softmax, the window arithmetic of docs/eval.md), not by calling the
// library code under test.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <tuple>

#include "fixtures.h"

using json = nlohmann::json;
using toy::test::run_toy;

namespace {

// Temporary files are per process: ctest -j runs tests as parallel processes.
std::string tmp(const std::string& name) {
  return testing::TempDir() + "/toy_eval_" + std::to_string(::getpid()) + "_" + name;
}

constexpr const char* kModel = "real/llama-2-tiny-random.gguf";  // 32000-token SPM vocab, BOS 1, add_bos
constexpr int kVocab = 32000;

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

// The logits of `ids` ([T][V] float32) from `toy eval --ids ... --dump-logits`.
std::vector<float> dumped_logits(const std::string& model, const std::vector<int>& ids) {
  const std::string path = tmp("logits.f32");
  const auto r = run_toy("eval " + model + " --ids " + join_ids(ids) + " --dump-logits " + path);
  EXPECT_EQ(r.code, 0) << r.err;
  const auto bytes = toy::test::read_bytes(path);
  EXPECT_EQ(bytes.size(), ids.size() * kVocab * 4);
  std::vector<float> z(bytes.size() / 4);
  std::memcpy(z.data(), bytes.data(), bytes.size());
  return z;
}

// log_softmax(row)[id], in long double.
double ref_logprob(const float* row, int id) {
  long double mx = row[0], s = 0;
  for (int v = 1; v < kVocab; ++v) mx = std::max<long double>(mx, row[v]);
  for (int v = 0; v < kVocab; ++v) s += std::exp((long double)row[v] - mx);
  return double((long double)row[id] - mx - std::log(s));
}

std::vector<int> ids_of(const json& eval_json) {
  std::vector<int> ids;
  for (const json& t : eval_json["tokens"]) ids.push_back(t["id"]);
  return ids;
}

std::string sample_text(int lines) {
  const char* words[] = {"the",  "quick", "brown", "fox", "jumps", "over", "a",
                         "lazy", "dog",   "while", "cat", "sat",   "on",   "mat"};
  std::string t;
  for (int i = 0; i < lines; ++i) {
    t += (i ? ".\n" : "") + std::string("Line ") + std::to_string(i) + ":";
    for (int w = 0; w < 12; ++w) t += std::string(" ") + words[(i * 7 + w * 3) % 14];
  }
  return t + ".";  // no final newline: `--text "$(cat FILE)"` would drop it
}

}  // namespace

TEST(Eval, LogprobsEqualLogSoftmaxOfDumpedLogits) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const auto r = run_toy("eval " + model.string() + " --text 'The cat sat on the mat.' --top-k 5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const std::vector<int> ids = ids_of(j);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids[0], 1);  // BOS
  EXPECT_TRUE(j["tokens"][0]["logprob"].is_null());
  const std::vector<float> z = dumped_logits(model.string(), ids);
  double total = 0;
  for (size_t t = 1; t < ids.size(); ++t) {
    const float* row = z.data() + (t - 1) * kVocab;  // row t-1 predicts token t
    const double want = ref_logprob(row, ids[t]);
    total += want;
    EXPECT_NEAR(j["tokens"][t]["logprob"].get<double>(), want, 1e-6) << "position " << t;
    // The top-5: the five largest logits, most likely first (ties: lower id).
    std::vector<int> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    ASSERT_EQ(j["tokens"][t]["top"].size(), 5u);
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(j["tokens"][t]["top"][k]["id"], order[size_t(k)]);
      EXPECT_NEAR(j["tokens"][t]["top"][k]["logprob"].get<double>(), ref_logprob(row, order[size_t(k)]), 1e-6);
    }
  }
  const double n = double(ids.size() - 1);
  EXPECT_NEAR(j["mean_logprob"].get<double>(), total / n, 1e-6);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(-total / n), 1e-6 * std::exp(-total / n));
}

TEST(Eval, TextOutputKeepsTheSummaryLine) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const auto r = run_toy("eval " + model.string() + " --ids 1,450,6635,3290 --top-k 2");
  ASSERT_EQ(r.code, 0) << r.err;
  // One line per token, then the summary as the last line.
  EXPECT_NE(r.out.find("' cat'"), std::string::npos) << r.out;
  const size_t last = r.out.rfind("tokens: 4  mean log-prob: ");
  ASSERT_NE(last, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("perplexity: ", last), std::string::npos);
}

// llama.cpp's method: chunks of n_ctx, BOS over each chunk's first token, second half scored.
TEST(Eval, PerplexityChunksMatchReferenceFromDumpedLogits) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const std::string text = sample_text(30), path = tmp("text.txt");
  std::ofstream(path) << text;
  const std::vector<int> tokens =
      ids_of(json::parse(run_toy("eval " + model.string() + " --text " + "\"$(cat " + path + ")\" --json").out));
  const int n_ctx = 128;
  ASSERT_GE(tokens.size(), size_t(3 * n_ctx));

  const auto r = run_toy("eval " + model.string() + " --file " + path + " --ctx " + std::to_string(n_ctx) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["method"], "llama.cpp-chunks");
  EXPECT_EQ(j["n_tokens"], tokens.size());

  const size_t n_chunk = tokens.size() / n_ctx;
  double nll = 0;
  size_t count = 0;
  for (size_t c = 0; c < n_chunk; ++c) {
    std::vector<int> chunk(tokens.begin() + long(c * n_ctx), tokens.begin() + long((c + 1) * n_ctx));
    chunk[0] = 1;  // BOS replaces the chunk's first token
    const std::vector<float> z = dumped_logits(model.string(), chunk);
    for (int p = n_ctx / 2; p < n_ctx - 1; ++p, ++count)
      nll -= ref_logprob(z.data() + size_t(p) * kVocab, chunk[size_t(p + 1)]);
  }
  EXPECT_EQ(j["n_windows"], n_chunk);
  EXPECT_EQ(j["n_scored"], count);
  EXPECT_EQ(count, n_chunk * (n_ctx - 1 - n_ctx / 2));
  const double ppl = std::exp(nll / double(count));
  EXPECT_NEAR(j["ppl"].get<double>(), ppl, 1e-6 * ppl);
  EXPECT_NEAR(j["window_ppl"].back().get<double>(), ppl, 1e-6 * ppl);

  // --chunks limits the windows.
  const json one =
      json::parse(run_toy("eval " + model.string() + " --file " + path + " --ctx 128 --chunks 1 --json").out);
  EXPECT_EQ(one["n_windows"], 1);
  EXPECT_NEAR(one["ppl"].get<double>(), j["window_ppl"][0].get<double>(), 1e-9);
}

// The strided sliding window: each token from position 1 on scored once, by the first window
// that holds it with a token before it.
TEST(Eval, PerplexityStridedMatchesReferenceFromDumpedLogits) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const std::string text = sample_text(14), path = tmp("text_strided.txt");
  std::ofstream(path) << text;
  const std::vector<int> tokens =
      ids_of(json::parse(run_toy("eval " + model.string() + " --text " + "\"$(cat " + path + ")\" --json").out));
  const int n_ctx = 96, stride = 40;
  const auto r = run_toy("eval " + model.string() + " --file " + path + " --ctx 96 --stride 40 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["method"], "strided");

  const size_t N = tokens.size();
  double nll = 0;
  size_t count = 0, windows = 0, prev_end = 0;
  for (size_t begin = 0;; begin += stride) {
    const size_t end = std::min(begin + n_ctx, N);
    const std::vector<int> w(tokens.begin() + long(begin), tokens.begin() + long(end));
    const std::vector<float> z = dumped_logits(model.string(), w);
    for (size_t p = std::max(prev_end, begin + 1); p < end; ++p, ++count)
      nll -= ref_logprob(z.data() + (p - 1 - begin) * kVocab, tokens[p]);
    prev_end = end;
    ++windows;
    if (end == N) break;
  }
  EXPECT_EQ(count, N - 1);  // every token but the first, once
  EXPECT_EQ(j["n_scored"], count);
  EXPECT_EQ(j["n_windows"], windows);
  const double ppl = std::exp(nll / double(count));
  EXPECT_NEAR(j["ppl"].get<double>(), ppl, 1e-6 * ppl);

  // stride == ctx: disjoint windows, and the text output form.
  const auto t = run_toy("eval " + model.string() + " --file " + path + " --ctx 96 --stride 96");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("method: strided"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("perplexity: "), std::string::npos) << t.out;
}

TEST(Eval, UsageErrors) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const std::string m = model.string(), path = tmp("short.txt");
  std::ofstream(path) << "Just a few words.";
  EXPECT_EQ(run_toy("eval " + m).code, 2);                                // nothing to score
  EXPECT_EQ(run_toy("eval " + m + " --text hi --file " + path).code, 2);  // two inputs
  EXPECT_EQ(run_toy("eval " + m + " --text hi --ctx 64").code, 2);        // --ctx is for --file
  EXPECT_EQ(run_toy("eval " + m + " --file " + path + " --ctx 64 --stride 65").code, 2);
  EXPECT_EQ(run_toy("eval " + m + " --file " + path + " --dump-logits x.f32").code, 2);
  EXPECT_EQ(run_toy("eval " + m + " --file " + path + " --ctx 64").code, 3);  // fewer tokens than one chunk
  EXPECT_EQ(run_toy("eval " + m + " --file /nonexistent.txt").code, 3);
  EXPECT_EQ(run_toy("eval " + m + " --ids 1,2 --top-k -1").code, 2);
  // Windows too short to score a token (#37: they exited 3, as if the file were bad).
  for (const char* flags : {"--ctx 1", "--ctx 2", "--ctx 1 --stride 1"}) {
    const auto e = run_toy("eval " + m + " --file " + path + " " + flags);
    EXPECT_EQ(e.code, 2) << flags << ": " << e.err;
    EXPECT_NE(e.err.find("scores nothing: give at least"), std::string::npos) << flags << ": " << e.err;
  }
  EXPECT_EQ(run_toy("eval " + m + " --file " + path + " --ctx 2 --stride 1").code, 0);  // one token of context each
  // A short text still works with the strided method (one window).
  const auto r = run_toy("eval " + m + " --file " + path + " --ctx 64 --stride 32 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["n_windows"], 1);
}

// --kl-divergence against llama-perplexity (tests/data/kl/README.md says how its files were
// made): toy reads llama.cpp's base file, and each figure agrees with what llama-perplexity
// printed for the same two models within the uncertainty it states.
namespace {

std::string kl_data(const std::string& name) { return std::string(TOY_SOURCE_DIR) + "/tests/data/kl/" + name; }

// llama-perplexity's statistics: "label: value ± uncertainty" or "label: value", percent signs dropped.
std::map<std::string, std::pair<double, double>> llama_figures(const std::string& path) {
  std::map<std::string, std::pair<double, double>> out;
  std::istringstream in(toy::test::read_text(path));
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || line.rfind("=====", 0) == 0) continue;
    std::string label = line.substr(0, colon);
    label.erase(label.find_last_not_of(' ') + 1);
    const std::string rest = line.substr(colon + 2);
    const size_t pm = rest.find("±");
    const double value = std::stod(rest);
    const double unc = pm == std::string::npos ? 0 : std::stod(rest.substr(pm + std::strlen("±")));
    out[label] = {value, unc};
  }
  return out;
}

}  // namespace

TEST(Eval, KlDivergenceAgreesWithLlamaPerplexity) {
  for (const std::string model : {"llama32/llama32-q4_0", "llama32sharp/llama32sharp-f32"}) {
    SCOPED_TRACE(model);
    TOY_REQUIRE_FIXTURE(path, "models/" + model + ".gguf");
    const auto r = run_toy("eval " + path.string() + " --kl-divergence " + kl_data("llama32-f32.c32.kld") + " --json");
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    const std::string name = model.substr(model.find('/') + 1);
    const auto ref = llama_figures(kl_data(name + ".llama-perplexity.txt"));
    ASSERT_GE(ref.size(), 30u);
    EXPECT_EQ(j["scored"], 8 * 15);
    auto agrees = [&](const char* field, const std::string& label, double unit, double printed) {
      ASSERT_TRUE(ref.count(label)) << label;
      const auto [value, unc] = ref.at(label);
      EXPECT_NEAR(j[field][0].get<double>() * unit, value, unc + 2 * printed) << label;  // both rounded in print
    };
    agrees("ppl", "Mean PPL(Q)", 1, 0.5e-6);  // half the last printed digit
    agrees("ppl_base", "Mean PPL(base)", 1, 0.5e-6);
    agrees("log_ppl_ratio", "Mean ln(PPL(Q)/PPL(base))", 1, 0.5e-6);
    agrees("ppl_ratio", "Mean PPL(Q)/PPL(base)", 1, 0.5e-6);
    agrees("ppl_diff", "Mean PPL(Q)-PPL(base)", 1, 0.5e-6);
    agrees("kld", "Mean    KLD", 1, 0.5e-6);
    agrees("p_diff", "Mean    Δp", 100, 0.5e-3);  // percent, 3 decimals
    agrees("p_diff_rms", "RMS Δp", 100, 0.5e-3);
    agrees("same_top", "Same top p", 100, 0.5e-3);
    // The percentiles, printed with 6 decimals: within a few units of the last (float vs double sums).
    for (auto [key, label] : std::vector<std::pair<std::string, std::string>>{
             {"1.000", "Maximum KLD"}, {"0.990", "99.0%   KLD"}, {"0.500", "Median  KLD"}, {"0.000", "Minimum KLD"}})
      EXPECT_NEAR(j["kld_percentiles"][key].get<double>(), ref.at(label).first, 2e-5) << label;
  }
}

// The base file toy writes is llama-perplexity's: the same header and tokens, and rows whose
// log-probabilities (scale · q + m) agree within the logits' tolerance against llama.cpp's for
// F32 (0.002, tests/test_models.cpp) and a 16-bit step each; a model against its own file is at zero.
TEST(Eval, KlDivergenceBaseFileAsLlamaPerplexityWritesIt) {
  TOY_REQUIRE_FIXTURE(f32, "models/llama32/llama32-f32.gguf");
  const std::string base = tmp("base.kld");
  const auto w = run_toy("eval " + f32.string() + " --file " + kl_data("text.txt") +
                         " --ctx 32 --chunks 8 --kl-divergence-base " + base);
  ASSERT_EQ(w.code, 0) << w.err;
  const std::vector<uint8_t> ours = toy::test::read_bytes(base),
                             theirs = toy::test::read_bytes(kl_data("llama32-f32.c32.kld"));
  ASSERT_EQ(ours.size(), theirs.size());
  const size_t head = 20 + 4 * 32 * 8, row = 2 * (512 + 4);
  EXPECT_TRUE(std::equal(ours.begin(), ours.begin() + long(head), theirs.begin()));  // magic, sizes, tokens
  auto log_p = [&](const std::vector<uint8_t>& f, size_t at, size_t token) {         // -1 below the row's floor
    float scale, m;
    uint16_t q;
    std::memcpy(&scale, &f[at], 4), std::memcpy(&m, &f[at + 4], 4), std::memcpy(&q, &f[at + 8 + 2 * token], 2);
    return q == 0 ? 1.0 : double(scale) * q + m;
  };
  const double step = 16.0 / 65535;
  int compared = 0;
  for (size_t at = head; at < ours.size(); at += row)
    for (size_t t = 0; t < 512; ++t) {
      const double a = log_p(ours, at, t), b = log_p(theirs, at, t);
      if (a > 0 || b > 0) continue;  // at the floor in one of them
      ASSERT_NEAR(a, b, 0.002 + 2 * step) << "row at byte " << at << ", token " << t;
      ++compared;
    }
  EXPECT_GT(compared, 120 * 512 * 9 / 10);
  const json self = json::parse(run_toy("eval " + f32.string() + " --kl-divergence " + base + " --json").out);
  EXPECT_LT(self["kld"][0].get<double>(), 1e-7);
  EXPECT_EQ(self["same_top"][0].get<double>(), 1.0);
  EXPECT_NEAR(self["ppl_diff"][0].get<double>(), 0, 1e-3);
}

TEST(Eval, KlDivergenceMistakes) {
  TOY_REQUIRE_FIXTURE(f32, "models/llama32/llama32-f32.gguf");
  TOY_REQUIRE_FIXTURE(other_vocab, kModel);
  const std::string good = kl_data("llama32-f32.c32.kld"), text = kl_data("text.txt"), m = f32.string();
  const std::vector<uint8_t> bytes = toy::test::read_bytes(good);
  const std::string cut = tmp("cut.kld"), junk = tmp("junk.kld");
  std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 5000);
  std::ofstream(junk, std::ios::binary) << "not a logits file at all";
  for (const auto& [args, code, says] : std::vector<std::tuple<std::string, int, std::string>>{
           {"--kl-divergence " + cut, 3, "needs"},
           {"--kl-divergence " + junk, 3, "not a log-probability file"},
           {"--kl-divergence " + tmp("absent.kld"), 3, "cannot read"},
           {"--kl-divergence " + good + " --file " + text, 2, "only one of"},
           {"--kl-divergence " + good + " --ctx 64", 2, "--ctx 32"},
           {"--kl-divergence " + good + " --stride 8", 2, "chunks"},
           {"--text hi --kl-divergence-base " + tmp("x.kld"), 2, "--file run"},
           {"--file " + text + " --ctx 32 --stride 8 --kl-divergence-base " + tmp("x.kld"), 2, "chunks"}}) {
    const auto r = run_toy("eval " + m + " " + args);
    EXPECT_EQ(r.code, code) << args << ": " << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
  }
  const auto r = run_toy("eval " + other_vocab.string() + " --kl-divergence " + good);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("vocabulary has 512 tokens"), std::string::npos) << r.err;
}

// --multiple-choice on hand-made tasks (tests/data/mc/README.md): each choice's score recomputed
// here from the per-token log-probabilities of `toy eval --text "context choice"`, then the three
// picks and the accuracies with lm-eval's standard error.
namespace {

std::string quoted(const std::string& s) {  // for the shell, in single quotes
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string mc_data(const std::string& name) { return std::string(TOY_SOURCE_DIR) + "/tests/data/mc/" + name; }

}  // namespace

TEST(Eval, MultipleChoiceAsComputedFromTokenLogprobs) {
  const auto r = run_toy("eval --multiple-choice " + mc_data("stories.jsonl") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json got = json::parse(r.out);
  std::istringstream in(toy::test::read_text(mc_data("stories.jsonl")));
  int tasks = 0, right[3] = {0, 0, 0};
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json task = json::parse(line);
    const json& mine = got["per_task"][tasks++];
    std::vector<std::vector<int>> ids;
    std::vector<std::vector<double>> lp;
    for (const json& choice : task["choices"]) {
      const std::string text = task["context"].get<std::string>() + " " + choice.get<std::string>();
      const json e = json::parse(run_toy("eval --text " + quoted(text) + " --json").out);
      ids.emplace_back(), lp.emplace_back();
      for (const json& t : e["tokens"]) {
        ids.back().push_back(t["id"]);
        lp.back().push_back(t["logprob"].is_null() ? 0.0 : t["logprob"].get<double>());
      }
    }
    size_t shared = 0;  // the prefix all choices share, each keeping a token
    while (std::all_of(ids.begin(), ids.end(),
                       [&](const std::vector<int>& s) { return shared + 1 < s.size() && s[shared] == ids[0][shared]; }))
      ++shared;
    shared = std::max<size_t>(shared, 1);
    std::vector<double> sum, per_letter, per_token;
    for (size_t c = 0; c < ids.size(); ++c) {
      double s = 0;
      for (size_t t = shared; t < ids[c].size(); ++t) s += lp[c][t];
      sum.push_back(s);
      const std::string text = " " + task["choices"][c].get<std::string>();  // ASCII here: a letter a byte
      per_letter.push_back(s / double(text.size()));
      per_token.push_back(s / double(ids[c].size() - shared));
      EXPECT_NEAR(mine["logprob"][c].get<double>(), s, 1e-9) << line;
      EXPECT_EQ(mine["tokens"][c].get<size_t>(), ids[c].size() - shared) << line;
    }
    const int label = task["label"];
    const std::vector<double>* rules[3] = {&sum, &per_letter, &per_token};
    const char* names[3] = {"by_sum", "by_letter", "by_token"};
    for (int k = 0; k < 3; ++k) {
      const int pick = int(std::max_element(rules[k]->begin(), rules[k]->end()) - rules[k]->begin());
      EXPECT_EQ(mine[names[k]], pick) << names[k] << ": " << line;
      right[k] += pick == label;
    }
  }
  ASSERT_EQ(got["tasks"], tasks);
  const char* fields[3] = {"acc", "acc_norm", "acc_per_token"};
  for (int k = 0; k < 3; ++k) {
    const double p = double(right[k]) / tasks;
    EXPECT_NEAR(got[fields[k]][0].get<double>(), p, 1e-12) << fields[k];
    EXPECT_NEAR(got[fields[k]][1].get<double>(), std::sqrt(p * (1 - p) / (tasks - 1)), 1e-12) << fields[k];
  }
  EXPECT_GT(right[0], 0);
  EXPECT_LT(right[0], tasks);  // the wrong labels are counted wrong
}

TEST(Eval, MultipleChoiceHellaSwagAsLlamaPerplexity) {
  const auto r = run_toy("eval --hellaswag " + mc_data("stories-hellaswag.txt") + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["format"], "hellaswag");
  EXPECT_EQ(j["tasks"], 11);
  EXPECT_NEAR(j["acc_per_token"][0].get<double>(), 0.7272727273, 1e-10);  // llama-perplexity's 72.72727273%
  const auto two = run_toy("eval --multiple-choice " + mc_data("stories-hellaswag.txt") + " --tasks 2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("tasks: 2  format: hellaswag"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("accuracy per token"), std::string::npos) << two.out;
}

TEST(Eval, MultipleChoiceMistakes) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 0}\n{oops\n", ":2: not a JSON object"},
      {"{\"context\": \"a\", \"choices\": [\"b\"], \"label\": 0}\n", "at least 2"},
      {"{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 2}\n", "label 2 is not the index"},
      {"{\"context\": \"a\", \"choices\": [\"b\", 5], \"label\": 0}\n", "at least 2 texts"},
      {"context\n0\na\nb\nc\n", "not a multiple of 6"},
      {"context\nx\na\nb\nc\nd\n", "the label must be 0, 1, 2 or 3"},
      {"\n\n", "no tasks"},
  };
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = tmp("mc" + std::to_string(i) + ".txt");
    std::ofstream(path) << files[i].first;
    const auto r = run_toy("eval --multiple-choice " + path);
    EXPECT_EQ(r.code, 3) << files[i].first << r.err;
    EXPECT_NE(r.err.find(files[i].second), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_toy("eval --multiple-choice " + mc_data("stories.jsonl") + " --tasks -1").code, 2);
  EXPECT_EQ(run_toy("eval --text hi --tasks 3").code, 2);
  EXPECT_EQ(run_toy("eval --multiple-choice " + mc_data("stories.jsonl") + " --text hi").code, 2);
  EXPECT_EQ(run_toy("eval --multiple-choice " + tmp("absent.jsonl")).code, 3);
}
