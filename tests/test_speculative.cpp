// tests/test_speculative.cpp — speculative decoding gives exactly the tokens of plain decoding.
//
// On one file of every model fixture family and a random Dragon model (every registered language
// model architecture, the Gated DeltaNet hybrids included), greedy and sampled, with a draft model
// (the family's Q8_0 file: it agrees with the F32 target often, not always, so drafts are both
// kept and cut; the Dragon model drafts for itself) and with n-gram lookup:
// the same tokens as generate() without a draft, and the engine left where plain decoding leaves
// it (the next token's logits have the same bits). Then the acceptance rule on its own: with a
// drafter that always guesses the second most likely token, the tokens drawn follow the target's
// distribution (a χ² test over seeds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "fixtures.h"
#include "helpers.h"
#include "toy/archs/model.h"
#include "toy/engines/generate.h"
#include "toy/kernels/kernels.h"

using namespace toy;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<Model> load(const fs::path& p) { return load_model(gguf::GgufFile::open(p.string())); }

// The family's F32 file (the target) and its Q8_0 file (the draft; the target itself without one).
struct Family {
  fs::path target, draft;
};
std::vector<Family> families() {
  std::vector<Family> out;
  const fs::path dir = test::fixtures_dir() / "models";
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const fs::path f32 = e.path() / (name + "-f32.gguf"), q8 = e.path() / (name + "-q8_0.gguf");
    if (fs::exists(f32)) out.push_back({f32, fs::exists(q8) ? q8 : f32});
  }
  std::sort(out.begin(), out.end(), [](const Family& a, const Family& b) { return a.target < b.target; });
  return out;
}

// A prompt that repeats itself, so that n-gram lookup finds drafts.
std::vector<int32_t> prompt_for(const Model& m) {
  const int64_t V = m.config().n_vocab;
  std::vector<int32_t> p;
  for (int i = 0; i < 15; ++i) p.push_back(int32_t((i % 5 * 7919 + 13) % V));
  return p;
}

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> b(size_t(t.numel()));
  std::memcpy(b.data(), t.data(), b.size() * sizeof(float));
  return b;
}

struct Outcome {
  std::vector<int32_t> tokens, cached;
  std::vector<uint32_t> next_logits;  // the logits of feeding one more token after the generation
};

Outcome run(const Model& m, const SamplerConfig& sc, Speculation* spec, int64_t n_predict) {
  DecodeEngine engine(m, 64);
  Sampler sampler(sc);
  const std::vector<int32_t> prompt = prompt_for(m);
  Outcome o;
  o.tokens = generate(engine, sampler, prompt, n_predict, {}, spec).tokens;
  o.cached = engine.tokens();
  o.next_logits = bits(engine.feed(std::vector<int32_t>{3}));
  return o;
}

void expect_same(const Outcome& plain, const Outcome& spec, const std::string& what) {
  EXPECT_EQ(spec.tokens, plain.tokens) << what;
  EXPECT_EQ(spec.cached, plain.cached) << what;
  EXPECT_TRUE(spec.next_logits == plain.next_logits) << what << ": the engine was left in another state";
}

}  // namespace

TEST(Speculative, SameTokensAsPlainDecodingOnEveryArchitecture) {
  const auto fams = families();
  if (fams.empty()) GTEST_SKIP() << "no model fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  std::vector<std::pair<std::unique_ptr<Model>, std::unique_ptr<Model>>> pairs;  // target, draft
  for (const Family& f : fams) pairs.emplace_back(load(f.target), load(f.draft));
  pairs.emplace_back(random_model(test::tiny_shape("dragon", 64), 3), random_model(test::tiny_shape("dragon", 64), 3));
  std::set<std::string> archs;
  int64_t drafted = 0, accepted = 0;
  for (const auto& [target, draft] : pairs) {
    SCOPED_TRACE(target->config().arch + " " + std::to_string(archs.size()));
    archs.insert(target->config().arch);
    const SamplerConfig greedy{.temperature = 0}, sampled{.temperature = 1.0f, .top_k = 0, .top_p = 1, .seed = 11};
    for (const SamplerConfig& sc : {greedy, sampled}) {
      const std::string how = sc.temperature > 0 ? "sampled" : "greedy";
      const Outcome plain = run(*target, sc, nullptr, 24);
      ASSERT_EQ(plain.tokens.size(), 24u);
      ModelDrafter model_drafter(*draft, *target, 64);
      NgramDrafter ngram(2, 6);
      for (auto [drafter, name] : {std::pair<Drafter*, const char*>{&model_drafter, "draft model"}, {&ngram, "n-gram"}})
        for (int64_t n_max : {3, 16}) {
          Speculation spec{.drafter = drafter, .n_max = n_max, .p_min = 0};
          expect_same(plain, run(*target, sc, &spec, 24), how + ", " + name + ", --draft-max " + std::to_string(n_max));
          EXPECT_LE(spec.accepted, spec.drafted);
          drafted += spec.drafted;
          accepted += spec.accepted;
        }
    }
  }
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "olmoe", "gpt2", "qwen35", "qwen3next", "dragon"})
    EXPECT_TRUE(archs.count(arch)) << arch;
  EXPECT_GT(accepted, 0);        // drafts were kept ...
  EXPECT_LT(accepted, drafted);  // ... and cut
}

TEST(Speculative, ADraftOfAnotherVocabularyIsRefused) {
  auto a = random_model(test::tiny_shape("llama", 64), 1), b = random_model(test::tiny_shape("llama", 65), 1);
  EXPECT_THROW(ModelDrafter(*b, *a, 64), std::invalid_argument);
  EXPECT_NO_THROW(ModelDrafter(*a, *a, 64));
}

// A mark, tokens fed, a rewind to a position between: the same bits afterwards as an engine that
// never fed the rest, on a hybrid (its recurrent state restored and fed again) and on a plain one.
TEST(Speculative, RewindForgetsWhatWasFedAfterTheMark) {
  for (const char* rel : {"models/qwen35/qwen35-f32.gguf", "models/llama32/llama32-f32.gguf"}) {
    TOY_REQUIRE_FIXTURE(path, rel);
    SCOPED_TRACE(rel);
    auto m = load(path);
    const std::vector<int32_t> prompt = prompt_for(*m), more = {5, 6, 7, 8, 9};
    DecodeEngine a(*m, 64), b(*m, 64);
    a.feed(prompt);
    DecodeEngine::Mark mark = a.mark();
    a.feed(more);
    a.rewind(mark, int64_t(prompt.size()) + 2);
    b.feed(prompt);
    b.feed(std::span<const int32_t>(more.data(), 2));
    EXPECT_EQ(a.tokens(), b.tokens());
    EXPECT_TRUE(bits(a.feed(std::vector<int32_t>{4})) == bits(b.feed(std::vector<int32_t>{4})));
    DecodeEngine::Mark late = a.mark();
    EXPECT_THROW(a.rewind(late, 1), std::invalid_argument);  // before the mark
  }
}

// A hybrid's feed of up to exact_feed_limit() tokens gives each row the bits of feeding the tokens
// one at a time (the recurrence, not the chunked form): what lets a draft be verified in one pass.
TEST(Speculative, AHybridsFeedUpToTheLimitEqualsOneTokenAtATime) {
  TOY_REQUIRE_FIXTURE(path, "models/qwen3next/qwen3next-f32.gguf");
  auto m = load(path);
  DecodeEngine whole(*m, 64), single(*m, 64);
  const int64_t k = whole.exact_feed_limit();
  ASSERT_EQ(k, kernels::kDeltaRuleMinMatrixChunk - 1);
  const std::vector<int32_t> prompt = prompt_for(*m);
  whole.feed(prompt);
  single.feed(prompt);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < k; ++i) ids.push_back(int32_t(20 + i));
  const Tensor rows = whole.feed(ids);  // [k, V]
  const int64_t V = rows.size(-1);
  for (int64_t i = 0; i < k; ++i) {
    const Tensor one = single.feed(std::span<const int32_t>(&ids[size_t(i)], 1));
    EXPECT_EQ(std::memcmp(one.data(), rows.data() + i * V, size_t(V) * sizeof(float)), 0) << "row " << i;
  }
}

TEST(Speculative, NgramLookupDraftsWhatFollowedTheLastMatch) {
  NgramDrafter d(3, 4);
  const std::vector<int32_t> ctx = {1, 2, 3, 9, 8, 7, 6, 5, 1, 2, 3, 4, 0, 1, 2, 3};
  EXPECT_EQ(d.draft(ctx, 16, 0), (std::vector<int32_t>{4, 0, 1, 2}));  // the most recent match; m = 4
  EXPECT_EQ(d.draft(ctx, 2, 0), (std::vector<int32_t>{4, 0}));         // n caps it
  EXPECT_TRUE(d.draft(std::vector<int32_t>{1, 2, 3, 1, 2}, 16, 0).empty());
  EXPECT_EQ(NgramDrafter(1, 8).draft(std::vector<int32_t>{5, 6, 7, 5}, 16, 0), (std::vector<int32_t>{6, 7, 5}));
  EXPECT_THROW(NgramDrafter(0, 4), std::invalid_argument);
}

namespace {

// Guesses one token, always.
class Fixed : public Drafter {
 public:
  explicit Fixed(int32_t id) : id_(id) {}
  std::vector<int32_t> draft(std::span<const int32_t>, int64_t n, float) override {
    return n > 0 ? std::vector<int32_t>{id_} : std::vector<int32_t>{};
  }

 private:
  int32_t id_;
};

}  // namespace

// The acceptance rule on a vocabulary cut to the 4 most likely tokens: the second token of each
// generation (drawn from the verification pass, its draft kept or not) over 3000 seeds against
// the probabilities the target's logits give, computed here by softmax.
TEST(Speculative, SampledTokensFollowTheTargetsDistribution) {
  TOY_REQUIRE_FIXTURE(path, "models/llama32/llama32-f32.gguf");
  auto m = load(path);
  const std::vector<int32_t> prompt = prompt_for(*m);
  // The target's distribution after the prompt and its greedy first token, at temperature 1.5.
  DecodeEngine probe(*m, 64);
  const int32_t first = argmax(std::span<const float>(probe.feed(prompt, true).data(), size_t(m->config().n_vocab)));
  const Tensor z = probe.feed(std::vector<int32_t>{first});
  std::vector<int32_t> ids(size_t(z.numel()));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + 4, ids.end(),
                    [&](int32_t a, int32_t b) { return z.data()[a] > z.data()[b]; });
  const float T = 1.5f;
  std::vector<double> p(4);
  double total = 0;
  for (int i = 0; i < 4; ++i) total += p[size_t(i)] = std::exp((z.data()[ids[size_t(i)]] - z.data()[ids[0]]) / T);
  for (double& x : p) x /= total;
  ASSERT_GT(p[3], 0.01) << "a distribution too peaked to test";

  const int kRuns = 3000;
  std::vector<int> count(4);
  Fixed guess(ids[1]);
  Speculation spec{.drafter = &guess, .n_max = 1};
  for (int s = 0; s < kRuns; ++s) {
    // The first token is drawn from the prompt's row: only the runs where it is `first` count.
    DecodeEngine engine(*m, 64);
    Sampler sampler({.temperature = T, .top_k = 4, .top_p = 1, .min_p = 0, .seed = uint64_t(s)});
    const auto tokens = generate(engine, sampler, prompt, 2, {}, &spec).tokens;
    if (tokens[0] != first) continue;
    const auto at = std::find(ids.begin(), ids.begin() + 4, tokens[1]);
    ASSERT_NE(at, ids.begin() + 4) << "a token outside the top 4";
    ++count[size_t(at - ids.begin())];
  }
  const int n = count[0] + count[1] + count[2] + count[3];
  ASSERT_GT(n, 300);
  double chi2 = 0;
  for (int i = 0; i < 4; ++i) chi2 += std::pow(count[size_t(i)] - n * p[size_t(i)], 2) / (n * p[size_t(i)]);
  EXPECT_LT(chi2, 16.27) << "χ² with 3 degrees of freedom, p = 0.001; counts " << count[0] << " " << count[1] << " "
                         << count[2] << " " << count[3] << " of " << n;
}

// `toy infer` and `toy infer --chat` with a draft model or n-gram lookup print the text they
// print without, and say how much of the draft was kept; bad drafts and limits are refused.
TEST(SpeculativeCli, TheSameTextWithADraftAndClearRefusals) {
  TOY_REQUIRE_FIXTURE(target, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(draft, "models/smollm2/smollm2-q8_0.gguf");
  TOY_REQUIRE_FIXTURE(other, "real/llama-2-tiny-random.gguf");  // 32000 tokens
  const std::string base = "infer " + target.string() + " -n 32 --no-display-prompt --ignore-eos ";
  for (const char* how : {"--temp 0 -p 'Once upon a time'", "--temp 0.9 -s 5 -p 'Once upon a time'",
                          "--temp 0.9 -s 5 --chat -p 'Hello there'", "--temp 0 --ids 5,6,7,5,6,7,5,6"}) {
    SCOPED_TRACE(how);
    const auto plain = test::run_toy(base + how);
    ASSERT_EQ(plain.code, 0) << plain.err;
    for (const std::string& spec : {"-md " + draft.string() + " --draft-p-min 0 --draft-max 5",
                                    std::string("--spec-type ngram --spec-ngram-size-n 1")}) {
      const auto r = test::run_toy(base + how + " " + spec);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, plain.out) << spec;
      EXPECT_NE(r.err.find(" accepted ("), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("of 0 accepted"), std::string::npos) << spec << ": nothing was drafted\n" << r.err;
    }
  }
  const auto bigger = test::run_toy(base + "-p Hi -md " + other.string());
  EXPECT_EQ(bigger.code, 3) << bigger.err;
  EXPECT_NE(bigger.err.find("32000 tokens in its vocabulary, the target 512"), std::string::npos) << bigger.err;
  // The same size, one token spelled otherwise.
  auto file = gguf::GgufFile::open(draft.string());
  gguf::GgufWriter w = gguf::copy_of(*file);
  std::vector<std::string> tokens;
  for (std::string_view t : file->get_strings("tokenizer.ggml.tokens")) tokens.emplace_back(t);
  tokens[300] = "<renamed>";
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings(tokens));
  const std::string renamed = testing::TempDir() + "/renamed-draft.gguf";
  w.write(renamed);
  const auto other_text = test::run_toy(base + "-p Hi -md " + renamed);
  EXPECT_EQ(other_text.code, 3) << other_text.err;
  EXPECT_NE(other_text.err.find("token 300 is <renamed>"), std::string::npos) << other_text.err;
  for (const std::string& bad : std::vector<std::string>{
           "--spec-type lookahead", "--spec-type ngram --draft-max 0", "--spec-type ngram --draft-min 20",
           "--spec-type ngram --draft-p-min 1.5", "--spec-type ngram -md " + draft.string(), "--spec-type draft",
           "--spec-type ngram --spec-ngram-size-n 0"}) {
    const auto r = test::run_toy(base + "-p Hi " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.err;
  }
  EXPECT_EQ(test::run_toy(base + "-p Hi -md /nonexistent/draft.gguf").code, 3);
}
