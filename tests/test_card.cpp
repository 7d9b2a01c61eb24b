// tests/test_card.cpp — algorithm cards: rendered for every fixture architecture, read back, and
// turned into a model file whose tensors and `<arch>.*` metadata equal the original's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/cards/card.h"
#include "toy/io/gguf.h"

namespace fs = std::filesystem;
using toy::gguf::GgufFile;
using toy::gguf::Value;
using toy::gguf::ValueType;
using toy::test::read_text;
using toy::test::run_toy;

namespace {

// One F32 file per fixture family (every architecture, and the variants: tied/untied, rope_freqs, softcap).
// The F32 fixture of every architecture toy registers.
std::vector<fs::path> fixture_models() {
  std::vector<fs::path> r;
  for (const auto& p : toy::test::fixture_files("models", ".gguf")) {
    if (p.filename().string().find("-f32.gguf") == std::string::npos) continue;
    const std::string arch = GgufFile::open(p.string())->architecture();
    for (const auto& a : toy::architectures())
      if (arch == a.name) r.push_back(p);
  }
  return r;
}

fs::path temp(const std::string& name) {
  return fs::path(testing::TempDir()) / ("toy_card_" + std::to_string(::getpid()) + "_" + name);
}

bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::STRING:
      return a.s == b.s;
    case ValueType::BOOL:
      return a.b == b.b;
    case ValueType::F32:
      return float(a.f) == float(b.f);
    case ValueType::F64:
      return a.f == b.f;
    case ValueType::ARRAY:
      if (a.elem != b.elem || a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!same_value(a.at(i), b.at(i))) return false;
      return true;
    default:
      return a.as_int() == b.as_int();
  }
}

// The `<arch>.*` keys (and general.architecture) of a file, in order.
std::vector<std::pair<std::string, const Value*>> arch_keys(const GgufFile& f) {
  std::vector<std::pair<std::string, const Value*>> r;
  for (const auto& [k, v] : f.metadata())
    if (k == "general.architecture" || k.rfind(f.architecture() + ".", 0) == 0) r.emplace_back(k, &v);
  return r;
}

void expect_same_model(const GgufFile& want, const GgufFile& got) {
  ASSERT_EQ(want.tensors().size(), got.tensors().size());
  for (size_t i = 0; i < want.tensors().size(); ++i) {
    EXPECT_EQ(want.tensors()[i].name, got.tensors()[i].name) << "tensor " << i;
    EXPECT_EQ(want.tensors()[i].shape, got.tensors()[i].shape) << want.tensors()[i].name;
  }
  const auto a = arch_keys(want), b = arch_keys(got);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(same_value(*a[i].second, *b[i].second))
        << a[i].first << ": " << a[i].second->to_display() << " vs " << b[i].second->to_display();
  }
}

bool init_has_card_flag() {
  const auto m = nlohmann::json::parse(run_toy("--manifest").out);
  for (const auto& c : m["commands"])
    if (c["name"] == "init")
      for (const auto& f : c["flags"])
        if (f["name"] == "--card") return true;
  return false;
}

}  // namespace

TEST(Card, RoundTripEveryFixtureArchitecture) {
  const auto files = fixture_models();
  if (files.empty()) GTEST_SKIP() << "fixtures not found (set TOY_FIXTURES)";
  std::set<std::string> archs;
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    auto f = GgufFile::open(p.string());
    archs.insert(f->architecture());
    const toy::card::Card c = toy::card::from_gguf(*f);
    const std::string md = toy::card::render(c);

    // The text reads back to the same card.
    const toy::card::Card back = toy::card::parse(md, p.filename().string());
    EXPECT_EQ(back.arch, c.arch);
    EXPECT_EQ(back.n_vocab, c.n_vocab);
    EXPECT_EQ(back.tied_output, c.tied_output);
    EXPECT_EQ(back.rope_freqs, c.rope_freqs);
    ASSERT_EQ(back.meta.size(), c.meta.size());
    for (size_t i = 0; i < c.meta.size(); ++i) {
      EXPECT_EQ(back.meta[i].first, c.meta[i].first);
      EXPECT_TRUE(same_value(back.meta[i].second, c.meta[i].second)) << c.meta[i].first;
    }

    // A model built from the card has the file's tensors and hyper-parameters.
    EXPECT_EQ(toy::card::parameter_count(back), [&] {
      uint64_t n = 0;
      for (const auto& t : f->tensors()) n += uint64_t(toy::numel(t.shape));
      return n;
    }());
    const fs::path out = temp(p.stem().string() + ".gguf");
    toy::card::write_model(back, out.string(), 7);
    auto g = GgufFile::open(out.string());
    expect_same_model(*f, *g);
    EXPECT_EQ(g->get_strings("tokenizer.ggml.tokens").size(), size_t(c.n_vocab));
    // Architectures toy runs load the built file.
    for (const auto& a : toy::architectures())
      if (a.name == f->architecture()) {
        EXPECT_NO_THROW(toy::load_model(g)) << f->architecture();
      }
    fs::remove(out);
  }
  EXPECT_EQ(archs,
            (std::set<std::string>{"gemma2", "gpt2", "llama", "olmoe", "qwen2", "qwen3", "qwen35", "qwen3next"}));
}

TEST(Card, ShowsEachArchitecturesAlgorithm) {
  auto card_of = [](const std::string& rel) -> std::string {
    const fs::path p = toy::test::fixture(rel);
    if (p.empty()) return "";
    return toy::card::render(toy::card::from_gguf(*GgufFile::open(p.string())));
  };
  const std::string llama = card_of("models/llama32/llama32-f32.gguf");
  if (llama.empty()) GTEST_SKIP() << "fixtures not found";
  for (const char* section :
       {"## Hyper-parameters", "```toy-card", "## Notation", "## Parameters", "## Algorithm 1: DTransformer",
        "## Algorithm 2: Attention", "## Algorithm 3: RoPE", "## Algorithm 4: RMSNorm", "## Algorithm 5: SwiGLU",
        "**Input:**", "**Output:**", "arXiv:2207.09238"})
    EXPECT_NE(llama.find(section), std::string::npos) << section;
  EXPECT_NE(llama.find("/ rope_freqs[i]"), std::string::npos);
  EXPECT_NE(llama.find("(a, b) ← (2i, 2i + 1)"), std::string::npos);  // NORM rope
  EXPECT_NE(llama.find("⌊h / 2⌋"), std::string::npos);                // 4 query heads on 2 kv heads
  EXPECT_NE(llama.find("[T, 4, 32]"), std::string::npos);             // substituted shapes
  EXPECT_NE(llama.find("θ_base = 500000"), std::string::npos);

  const std::string qwen2 = card_of("models/qwen25/qwen25-f32.gguf");
  EXPECT_NE(qwen2.find("attn_q.bias"), std::string::npos);
  EXPECT_NE(qwen2.find("(i, i + n_rot/2) = (i, i + 16)"), std::string::npos);  // NEOX rope
  const std::string qwen3 = card_of("models/qwen3/qwen3-f32.gguf");
  EXPECT_NE(qwen3.find("RMSNorm(Q[t, h] | blk.ℓ.attn_q_norm)"), std::string::npos);
  EXPECT_NE(qwen3.find("[T, 4, 64]"), std::string::npos);
  const std::string gemma2 = card_of("models/gemma2softcap/gemma2softcap-f32.gguf");
  EXPECT_NE(gemma2.find("c_attn = 0.1"), std::string::npos);
  EXPECT_NE(gemma2.find("c_final = 0.5"), std::string::npos);
  EXPECT_NE(gemma2.find("w = 8"), std::string::npos);
  EXPECT_NE(gemma2.find("post_ffw_norm"), std::string::npos);
  EXPECT_NE(gemma2.find("GeGLU"), std::string::npos);
  EXPECT_NE(gemma2.find("X · √d_model"), std::string::npos);
  const std::string olmoe = card_of("models/olmoe/olmoe-f32.gguf");
  EXPECT_NE(olmoe.find("router logits [n_expert] = [8]"), std::string::npos);
  EXPECT_NE(olmoe.find("k = 2 experts"), std::string::npos);
  EXPECT_NE(olmoe.find("over all 128 values"), std::string::npos);
  EXPECT_NE(olmoe.find("Z ← X · outputᵀ"), std::string::npos);  // untied
  const std::string gpt2 = card_of("models/gpt2/gpt2-f32.gguf");
  EXPECT_NE(gpt2.find("position_embd[t]"), std::string::npos);
  EXPECT_NE(gpt2.find("## Algorithm 4: LayerNorm"), std::string::npos);
  EXPECT_NE(gpt2.find("attn_qkv"), std::string::npos);
  EXPECT_EQ(gpt2.find("RoPE("), std::string::npos);
}

TEST(Card, CliRoundTrip) {
  const auto files = fixture_models();
  if (files.empty()) GTEST_SKIP() << "fixtures not found (set TOY_FIXTURES)";
  const bool init_card = init_has_card_flag();
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    const fs::path card = temp(p.stem().string() + ".md"), built = temp(p.stem().string() + "-from-card.gguf");
    auto r = run_toy("describe " + p.string() + " --card");
    ASSERT_EQ(r.code, 0) << r.err;
    std::ofstream(card) << r.out;

    // describe CARD.md --json gives the configuration describe MODEL --json shows.
    auto cj = run_toy("describe " + card.string() + " --json");
    ASSERT_EQ(cj.code, 0) << cj.err;
    auto mj = run_toy("describe " + p.string() + " --json");
    ASSERT_EQ(mj.code, 0) << mj.err;
    const auto c = nlohmann::json::parse(cj.out), m = nlohmann::json::parse(mj.out);
    EXPECT_EQ(c["architecture"], m["architecture"]);
    EXPECT_EQ(c["parameters"], m["parameters"]);
    EXPECT_EQ(c["hyperparameters"].dump(), m["hyperparameters"].dump());
    ASSERT_EQ(c["tensors"].size(), m["tensors"].size());
    for (size_t i = 0; i < c["tensors"].size(); ++i) {
      EXPECT_EQ(c["tensors"][i]["name"], m["tensors"][i]["name"]);
      EXPECT_EQ(c["tensors"][i]["shape"], m["tensors"][i]["shape"]);
    }

    // toy init --card builds the same tensors and metadata (once the init command has the flag).
    if (init_card) {
      auto i = run_toy("init --card " + card.string() + " -o " + built.string());
      ASSERT_EQ(i.code, 0) << i.err;
      expect_same_model(*GgufFile::open(p.string()), *GgufFile::open(built.string()));
      fs::remove(built);
    }
    fs::remove(card);
  }
  if (!init_card) std::cout << "[ note ] toy init has no --card flag yet: init part of the round trip not run\n";
}

TEST(Card, BadCardsAreInputErrors) {
  const fs::path p = toy::test::fixture("models/smollm2/smollm2-f32.gguf");
  if (p.empty()) GTEST_SKIP() << "fixtures not found";
  const std::string good = toy::card::render(toy::card::from_gguf(*GgufFile::open(p.string())));
  auto try_card = [&](const std::string& name, const std::string& text) {
    const fs::path f = temp(name + ".md");
    std::ofstream(f) << text;
    auto r = run_toy("describe " + f.string() + " --json");
    fs::remove(f);
    return r;
  };
  auto replace = [&](std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  // The card with the line of `key` replaced (or removed when `line` is empty).
  auto set_line = [&](const std::string& key, const std::string& line) {
    std::string s = good;
    const size_t at = s.find("\n" + key + ":");
    EXPECT_NE(at, std::string::npos) << key;
    if (at == std::string::npos) return s;
    const size_t end = s.find('\n', at + 1);
    return s.replace(at + 1, end - at - 1 + (line.empty() ? 1 : 0), line);
  };
  auto drop_line = [&](const std::string& key) { return set_line(key, ""); };

  EXPECT_EQ(try_card("good", good).code, 0);
  struct Case {
    const char* name;
    std::string text;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"unclosed", good.substr(0, good.find("card.n_vocab")), "not closed"},
      {"missing_key", drop_line("llama.embedding_length"), "llama.embedding_length"},
      {"missing_vocab", drop_line("card.n_vocab"), "card.n_vocab"},
      {"bad_type", replace(good, "llama.block_count: u32", "llama.block_count: u33"), "unknown type"},
      {"bad_value", set_line("llama.block_count", "llama.block_count: u32 = two"), "cannot read"},
      {"negative_u32", set_line("llama.block_count", "llama.block_count: u32 = -2"), "not a u32"},
      {"no_equals", set_line("llama.block_count", "llama.block_count u32 2"), "expected 'key: type = value'"},
      {"unknown_arch", set_line("general.architecture", "general.architecture: string = \"mamba\""), "mamba"},
      {"bad_heads", set_line("llama.attention.head_count_kv", "llama.attention.head_count_kv: u32 = 3"), "must divide"},
      {"duplicate", set_line("llama.block_count", "llama.block_count: u32 = 2\nllama.block_count: u32 = 3"),
       "duplicate"},
      {"unknown_card_key", replace(good, "card.tied_output", "card.tide_output"), "unknown or mistyped card key"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = try_card(c.name, c.text);
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  // A Markdown file without a card block is not taken for a card: it is not a GGUF file either.
  auto plain = try_card("plain", "# just notes\n");
  EXPECT_EQ(plain.code, 3);

  // An architecture without a card.
  const fs::path odd = temp("odd.gguf");
  toy::gguf::GgufWriter w;
  w.set("general.architecture", Value::of_string("mamba"));
  w.write(odd.string());
  auto r = run_toy("describe " + odd.string() + " --card");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("no algorithm card for architecture 'mamba'"), std::string::npos) << r.err;
  fs::remove(odd);
}

TEST(Card, FloatsReadBackExactly) {
  // Every f32 a card writes parses back to the same bits, with as few digits as possible.
  toy::card::Card c;
  c.arch = "llama";
  c.n_vocab = 300;
  for (auto [k, v] :
       std::vector<std::pair<std::string, Value>>{{"general.architecture", Value::of_string("llama")},
                                                  {"llama.embedding_length", Value::of_u32(64)},
                                                  {"llama.block_count", Value::of_u32(1)},
                                                  {"llama.feed_forward_length", Value::of_u32(96)},
                                                  {"llama.attention.head_count", Value::of_u32(4)},
                                                  {"llama.context_length", Value::of_u32(32)},
                                                  {"llama.attention.layer_norm_rms_epsilon", Value::of_f32(1e-5f)},
                                                  {"llama.rope.freq_base", Value::of_f32(0.1f + 10000.0f)}})
    c.meta.emplace_back(k, v);
  const std::string md = toy::card::render(c);
  EXPECT_NE(md.find("= 1e-05\n"), std::string::npos) << md;
  const auto back = toy::card::parse(md, "test");
  EXPECT_EQ(float(back.find("llama.rope.freq_base")->f), 0.1f + 10000.0f);
  EXPECT_EQ(float(back.find("llama.attention.layer_norm_rms_epsilon")->f), 1e-5f);
  const auto specs = toy::card::tensors(back);
  ASSERT_EQ(specs.size(), 1 + 9 + 1u);  // token_embd, one layer, output_norm (tied)
  EXPECT_EQ(specs[0].name, "token_embd.weight");
  EXPECT_EQ(specs[0].shape, (toy::Shape{300, 64}));
}
