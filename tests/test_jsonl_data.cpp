// tests/test_jsonl_data.cpp — fine-tuning on JSONL examples (recipes/jsonl_data.h): the loss that
// counts only the completion's tokens, the formats, malformed lines, and a chat fine-tune that
// moves a tiny model's answers toward the data.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "helpers.h"
#include "toy/archs/lora.h"
#include "toy/chat/chat_template.h"
#include "toy/engines/train.h"
#include "toy/io/gguf.h"
#include "toy/primitives/primitives.h"
#include "toy/recipes/jsonl_data.h"
#include "toy/tokenizer/tokenizer.h"
#include "train_helpers.h"

using namespace toy;
using toy::test::run_toy;
namespace fs = std::filesystem;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The ids the loss counts (the unmasked ones) and those it does not.
std::pair<std::vector<int32_t>, std::vector<int32_t>> counted_and_masked(const std::vector<int32_t>& ids) {
  std::pair<std::vector<int32_t>, std::vector<int32_t>> r;
  for (int32_t id : ids) (id >= 0 ? r.first : r.second).push_back(unmasked_id(id));
  return r;
}

}  // namespace

// Cross-entropy with ignored targets: the mean over the counted rows only (against a direct
// double computation), the ignored rows' logits change nothing and get no gradient.
TEST(JsonlData, IgnoredTargetsAreNotCounted) {
  const int64_t N = 4, V = 5;
  std::vector<float> z(size_t(N * V));
  for (size_t i = 0; i < z.size(); ++i) z[i] = float(std::sin(double(i) * 1.7));
  const std::vector<int32_t> y = {1, kIgnoreTarget, 3, kIgnoreTarget};
  auto loss_of = [&](const std::vector<float>& logits, Tensor* grad) {
    Tensor x = Tensor::from({N, V}, logits).requires_grad_();
    Tensor loss = cross_entropy(x, Tensor::from_ids({N}, y));
    loss.backward();
    if (grad) *grad = x.grad();
    return double(loss.item());
  };
  double want = 0;
  std::vector<double> p(static_cast<size_t>(N * V));  // softmax of the counted rows
  for (int64_t n : {0, 2}) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(double(z[size_t(n * V + v)]));
    for (int64_t v = 0; v < V; ++v) p[size_t(n * V + v)] = std::exp(double(z[size_t(n * V + v)])) / s;
    want += (std::log(s) - z[size_t(n * V + y[size_t(n)])]) / 2;
  }
  Tensor g;
  EXPECT_NEAR(loss_of(z, &g), want, 1e-6);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = 0; v < V; ++v) {
      const double gw = y[size_t(n)] < 0 ? 0.0 : (p[size_t(n * V + v)] - (v == y[size_t(n)])) / 2;
      EXPECT_NEAR(g.data()[n * V + v], gw, 1e-6) << n << "," << v;
    }
  std::vector<float> z2 = z;
  for (int64_t v = 0; v < V; ++v) z2[size_t(1 * V + v)] += 3.0f * float(v), z2[size_t(3 * V + v)] -= 2.0f;
  EXPECT_EQ(loss_of(z2, nullptr), loss_of(z, nullptr));
  // No counted row: 0, and a zero gradient (a batch of prompts only).
  Tensor x = Tensor::from({1, V}, std::vector<float>(z.begin(), z.begin() + V)).requires_grad_();
  Tensor l = cross_entropy(x, Tensor::from_ids({1}, std::vector<int32_t>{kIgnoreTarget}));
  l.backward();
  EXPECT_EQ(l.item(), 0.0f);
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(x.grad().data()[v], 0.0f);

  // make_batch: a masked id is its id as an input and kIgnoreTarget as a target.
  const std::vector<int32_t> ids = {masked_id(7), masked_id(8), 9, 10};
  const Batch b = make_batch(ids, 1, 3);
  EXPECT_EQ(std::vector<int32_t>(b.tokens.ids(), b.tokens.ids() + 3), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(std::vector<int32_t>(b.targets.ids(), b.targets.ids() + 3), (std::vector<int32_t>{kIgnoreTarget, 9, 10}));
}

// The three formats through a real tokenizer and the ChatML template: only the completion / the
// assistant's answer is counted, and two chats that differ only in the prompt count the same
// tokens; --no-mask-prompt counts them all.
TEST(JsonlData, FormatsMaskThePromptOnly) {
  const auto tok = Tokenizer::byte_level();
  test::TrainDir d;
  const std::string path = d.path("data.jsonl");
  write_text(
      path,
      R"({"text": "ab"})"
      "\n\n"
      R"({"prompt": "Q: sky?", "completion": " blue"})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Colour of the sky?"}, {"role": "assistant", "content": "blue"}]})"
      "\n"
      R"({"messages": [{"role": "system", "content": "Be short."}, {"role": "user", "content": "Sky?"}, {"role": "assistant", "content": "blue"}]})"
      "\n");
  const std::string chatml = chat::chatml_template();
  const recipes::JsonlExamples ex = recipes::read_jsonl_examples(path, *tok, chatml, true);
  ASSERT_EQ(ex.sequences.size(), 4u);
  EXPECT_EQ(ex.text, 1);
  EXPECT_EQ(ex.completions, 1);
  EXPECT_EQ(ex.chats, 2);
  const auto [text_counted, text_masked] = counted_and_masked(ex.sequences[0]);
  EXPECT_TRUE(text_masked.empty());
  const auto [c_counted, c_masked] = counted_and_masked(ex.sequences[1]);
  std::vector<int32_t> want = tok->encode(" blue");
  if (tok->eos() >= 0) want.push_back(tok->eos());
  EXPECT_EQ(c_counted, want);
  EXPECT_EQ(tok->decode(c_masked), tok->decode(tok->encode("Q: sky?", true)));
  const auto [a_counted, a_masked] = counted_and_masked(ex.sequences[2]);
  const auto [b_counted, b_masked] = counted_and_masked(ex.sequences[3]);
  EXPECT_EQ(tok->decode(a_counted), "blue<|im_end|>\n");  // the answer as the template closes it
  EXPECT_EQ(a_counted, b_counted);                        // only the prompts differ …
  EXPECT_NE(a_masked, b_masked);                          // … and they are not counted
  EXPECT_NE(tok->decode(a_masked).find("<|im_start|>assistant\n"), std::string::npos);

  const recipes::JsonlExamples all = recipes::read_jsonl_examples(path, *tok, chatml, false);
  for (const auto& s : all.sequences)
    for (int32_t id : s) EXPECT_GE(id, 0);
}

// Malformed lines: exit 3 naming the file and the line, and no run directory; --data with
// --corpus is a usage error.
TEST(JsonlData, MalformedLinesExit3NamingTheLine) {
  test::TrainDir d;
  const std::string corpus = test::write_corpus(d);
  const std::string ok = R"({"prompt": "a", "completion": "b"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"input": "a"})", "has none of"},
      {R"({"prompt": "a", "completion": 3})", "\"completion\" must be a string"},
      {R"({"messages": []})", "non-empty array"},
      {R"({"messages": [{"role": "user"}]})", "messages[0] has no \"content\""},
      {R"({"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]})",
       "must be \"assistant\""},
  };
  int i = 0;
  for (const auto& [line, what] : cases) {
    const std::string path = d.path("bad" + std::to_string(i) + ".jsonl");
    write_text(path, ok + "\n" + line + "\n" + ok + "\n");
    const std::string id = "bad" + std::to_string(i++);
    const auto r = run_toy("train from-scratch --data " + path + test::kTiny + " --steps 1 --runs-dir " +
                           d.path("runs") + " --run-id " + id);
    EXPECT_EQ(r.code, 3) << line << "\n" << r.err;
    EXPECT_NE(r.err.find(path + ":2: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.dir / "runs" / id));
  }
  const std::string empty = d.path("empty.jsonl");
  write_text(empty, "\n\n");
  EXPECT_EQ(run_toy("train from-scratch --data " + empty + test::kTiny + " --runs-dir " + d.path("runs")).code, 3);
  const auto both = run_toy("train from-scratch --data " + empty + " --corpus " + corpus + test::kTiny);
  EXPECT_EQ(both.code, 2) << both.err;
}

// A chat fine-tune (LoRA on a tiny, barely trained base) moves the model toward the data: the mean
// log-probability of the trained assistant answers' tokens given their prompts rises by more than
// 0.3 nats (each answer token ×1.35 likelier; 40 steps measured 0.5).
TEST(JsonlData, ChatLoraFineTuneMovesAnswersTowardTheData) {
  test::TrainDir d;
  const std::string corpus = test::write_corpus(d);
  ASSERT_EQ(run_toy("train from-scratch --corpus " + corpus + test::kTiny + " --steps 1 --eval-every 0 --runs-dir " +
                    d.path("runs") + " --run-id base")
                .code,
            0);
  const std::string base = (d.dir / "runs" / "base" / "weights" / "final.gguf").string();
  std::string jsonl;
  const std::vector<std::pair<std::string, std::string>> qa = {
      {"Colour of the sky?", "blue"}, {"Colour of grass?", "green"}, {"Colour of snow?", "white"}};
  for (const auto& [q, a] : qa)
    jsonl += R"({"messages": [{"role": "user", "content": ")" + q + R"("}, {"role": "assistant", "content": ")" + a +
             "\"}]}\n";
  write_text(d.path("chat.jsonl"), jsonl);

  const auto r = run_toy("train lora --base " + base + " --data " + d.path("chat.jsonl") +
                         " --targets attn_q,attn_v,ffn_up,ffn_down --rank 4 --alpha 8 --context 96 --batch 3 "
                         "--steps 40 --lr 2e-2 --schedule constant --eval-fraction 0 --eval-every 0 --no-progress "
                         "--runs-dir " +
                         d.path("runs") + " --run-id lora");
  ASSERT_EQ(r.code, 0) << r.err;

  // Mean −log p(answer token | prompt, earlier answer tokens) over the answers, base vs adapted.
  auto file = gguf::GgufFile::open(base);
  const auto tok = Tokenizer::from_gguf(*file);
  const auto ex = recipes::read_jsonl_examples(d.path("chat.jsonl"), *tok, chat::chatml_template(), true);
  auto answer_loss = [&](bool adapted) {
    std::unique_ptr<Model> m = load_model(file);
    if (adapted)
      apply_loras(
          *m,
          {{std::make_shared<LoraAdapter>(read_lora((d.dir / "runs" / "lora" / "adapters" / "final.gguf").string())),
            1.0f}});
    TrainEngine e(*m, {}, {});
    double total = 0;
    for (const auto& s : ex.sequences) total += e.evaluate(make_batch(s, 1, int64_t(s.size()) - 1));
    return total / double(ex.sequences.size());
  };
  const double before = answer_loss(false), after = answer_loss(true);
  EXPECT_GT(before, 0.5 * std::log(double(tok->n_vocab())));  // a barely trained base: near uniform
  EXPECT_LT(after, before - 0.3) << "before " << before << ", after " << after;
}
