// tests/test_tokenizer.cpp — tokenizers against llama.cpp's test vectors, decoding, special
// tokens, the byte-level vocabulary, malformed vocabularies and random input.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "fixtures.h"
#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"
#include "toy/tokenizer/unicode.h"

namespace {

using toy::StreamDecoder;
using toy::Tokenizer;
using toy::TokenizerError;
using toy::gguf::GgufFile;
using toy::gguf::GgufWriter;
using toy::gguf::Value;

// The vocabularies with test vectors (fixtures/tokenizer/README.md).
const std::vector<std::string> kVocabs = {"llama-spm",      "phi-3",        "llama-bpe", "gpt-2", "qwen2",  "falcon",
                                          "deepseek-coder", "deepseek-llm", "starcoder", "mpt",   "refact", "bert-bge"};

std::string vocab_rel(const std::string& name) { return "tokenizer/ggml-vocab-" + name + ".gguf"; }

// Loading the large vocabularies takes a moment; each is loaded once per test binary.
std::shared_ptr<const Tokenizer> load(const std::filesystem::path& p) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Tokenizer>> cache;
  std::lock_guard lock(mu);
  auto& t = cache[p.string()];
  if (!t) t = Tokenizer::from_gguf(*GgufFile::open(p.string()));
  return t;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// The .inp/.out format of llama.cpp's test-tokenizer-0 (fixtures/tokenizer/README.md).
std::vector<Case> read_cases(const std::filesystem::path& gguf_path) {
  const std::string raw = toy::test::read_text(gguf_path.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      cases.push_back({raw.substr(pos), {}});
      break;
    }
    cases.push_back({raw.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream out(toy::test::read_text(gguf_path.string() + ".out"));
  std::string line;
  for (Case& c : cases) {
    if (!std::getline(out, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// Vocabularies whose decode() applies llama.cpp's space clean-up (" ," -> ","), so decoding
// cannot give back texts that contain such sequences.
bool cleans_spaces(const std::string& name) {
  return name == "llama-bpe" || name == "gpt-2" || name == "falcon" || name == "starcoder" || name == "mpt" ||
         name == "refact" || name == "bert-bge";
}
bool has_cleaned_sequence(const std::string& s) {
  for (const char* p : {" ?", " !", " .", " ,", " '"})
    if (s.find(p) != std::string::npos) return true;
  return false;
}

class TokenizerVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectors, EncodeMatchesLlamaCpp) {
  TOY_REQUIRE_FIXTURE(path, vocab_rel(GetParam()));
  auto tok = load(path);
  const auto cases = read_cases(path);
  ASSERT_EQ(cases.size(), 46u);
  int failures = 0;
  for (const Case& c : cases) {
    const auto ids = tok->encode(c.text);
    if (ids != c.ids) {
      ++failures;
      ADD_FAILURE() << GetParam() << ": input '" << c.text << "'\n  expected" << show(c.ids) << "\n  got     "
                    << show(ids);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(TokenizerVectors, DecodeGivesTheTextBack) {
  TOY_REQUIRE_FIXTURE(path, vocab_rel(GetParam()));
  auto tok = load(path);
  for (const Case& c : read_cases(path)) {
    const std::string back = tok->decode(c.ids);
    if (tok->model() == "bert") continue;  // WordPiece lowercases and drops whitespace: checked below
    if (cleans_spaces(GetParam()) && has_cleaned_sequence(c.text)) continue;
    EXPECT_EQ(back, c.text) << GetParam() << ": ids" << show(c.ids);
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerFixtures, TokenizerVectors, ::testing::ValuesIn(kVocabs), [](const auto& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

// ---- special tokens, BOS/EOS, pieces ----------------------------------------------------------

TEST(Tokenizer, SpecialTokensAreParsedOnlyWhenAsked) {
  TOY_REQUIRE_FIXTURE(spm_path, vocab_rel("llama-spm"));
  auto spm = load(spm_path);
  EXPECT_EQ(spm->encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));  // "▁Hello" after a special
  const auto as_text = spm->encode("<s>Hello");
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), 1), 0);
  EXPECT_GT(as_text.size(), 2u);

  TOY_REQUIRE_FIXTURE(qwen_path, vocab_rel("qwen2"));
  auto qwen = load(qwen_path);
  const int32_t im_start = qwen->token_id("<|im_start|>"), im_end = qwen->token_id("<|im_end|>");
  ASSERT_EQ(im_start, 151644);
  ASSERT_EQ(im_end, 151645);
  const auto parsed = qwen->encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), im_start);
  EXPECT_EQ(parsed.back(), im_end);
  const auto plain = qwen->encode("<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  EXPECT_EQ(qwen->decode(plain), "<|im_start|>user\nhi<|im_end|>");  // text in, text out
  EXPECT_EQ(qwen->decode(parsed), "user\nhi");                       // control tokens render as nothing
}

TEST(Tokenizer, BosAndEosFollowTheVocabulary) {
  struct Expect {
    std::string vocab;
    std::vector<int32_t> first, last;
  };
  for (const Expect& e : std::vector<Expect>{{"llama-spm", {1}, {}},
                                             {"llama-bpe", {128000}, {}},
                                             {"deepseek-coder", {32013}, {}},
                                             {"gpt-2", {}, {}},
                                             {"bert-bge", {101}, {102}}}) {
    SCOPED_TRACE(e.vocab);
    const auto path = toy::test::fixture(vocab_rel(e.vocab));
    if (path.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
    auto tok = load(path);
    const auto plain = tok->encode("Hello world");
    const auto special = tok->encode("Hello world", /*add_special=*/true);
    std::vector<int32_t> want = e.first;
    want.insert(want.end(), plain.begin(), plain.end());
    want.insert(want.end(), e.last.begin(), e.last.end());
    EXPECT_EQ(special, want);
    EXPECT_EQ(tok->add_bos(), !e.first.empty());
  }
}

TEST(Tokenizer, GptNeoxLoadsWithTheDefaultPreTokenizer) {  // no `pre` key and no test vectors
  TOY_REQUIRE_FIXTURE(path, vocab_rel("gpt-neox"));
  auto tok = load(path);
  EXPECT_EQ(tok->model(), "gpt2");
  EXPECT_EQ(tok->pre(), "");
  const std::string text = "Hello world!\n    def f(x): return x**2 # 1234567";
  const auto ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 2);  // merges happened
}

TEST(Tokenizer, EndOfGeneration) {
  TOY_REQUIRE_FIXTURE(bpe_path, vocab_rel("llama-bpe"));
  auto bpe = load(bpe_path);
  EXPECT_TRUE(bpe->is_eog(128001));                       // eos <|end_of_text|>
  EXPECT_TRUE(bpe->is_eog(bpe->token_id("<|eot_id|>")));  // found by its text, as llama.cpp does
  EXPECT_FALSE(bpe->is_eog(128000));
  TOY_REQUIRE_FIXTURE(qwen_path, vocab_rel("qwen2"));
  auto qwen = load(qwen_path);
  EXPECT_TRUE(qwen->is_eog(151643));
  EXPECT_TRUE(qwen->is_eog(151645));
  EXPECT_FALSE(qwen->is_eog(151644));
  TOY_REQUIRE_FIXTURE(ds_path, vocab_rel("deepseek-coder"));
  auto ds = load(ds_path);
  EXPECT_TRUE(ds->is_eog(ds->token_id("<｜end▁of▁sentence｜>")));
  EXPECT_TRUE(ds->is_eog(32014));
  TOY_REQUIRE_FIXTURE(phi_path, vocab_rel("phi-3"));
  auto phi = load(phi_path);
  EXPECT_TRUE(phi->is_eog(phi->token_id("<|end|>")));
  EXPECT_TRUE(phi->is_eog(32000));
}

TEST(Tokenizer, Pieces) {
  TOY_REQUIRE_FIXTURE(spm_path, vocab_rel("llama-spm"));
  auto spm = load(spm_path);
  EXPECT_EQ(spm->piece(15043), " Hello");
  EXPECT_EQ(spm->piece(13), "\n");  // <0x0A>
  EXPECT_EQ(spm->token_text(13), "<0x0A>");
  EXPECT_EQ(spm->piece(1), "");
  EXPECT_EQ(spm->piece(1, /*special=*/true), "<s>");
  EXPECT_THROW(spm->piece(-1), TokenizerError);
  EXPECT_THROW(spm->piece(spm->n_vocab()), TokenizerError);
  const std::vector<int32_t> bad = {15043, 32000};
  EXPECT_THROW(spm->decode(bad), TokenizerError);
  // decode() drops the space SentencePiece added in front of the text, not one after BOS.
  EXPECT_EQ(spm->decode(spm->encode("Hello")), "Hello");
  EXPECT_EQ(spm->decode(spm->encode("Hello", true)), " Hello");

  TOY_REQUIRE_FIXTURE(gpt2_path, vocab_rel("gpt-2"));
  auto gpt2 = load(gpt2_path);
  EXPECT_EQ(gpt2->piece(gpt2->token_id("\xC4\xA0Hello")), " Hello");          // "ĠHello"
  EXPECT_EQ(gpt2->decode(gpt2->encode("Hello , world !")), "Hello, world!");  // llama.cpp's clean-up
}

// ---- streaming --------------------------------------------------------------------------------

TEST(Tokenizer, StreamDecoderEmitsWholeCharactersOnly) {
  const std::string emoji =
      "\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F";  // 😶‍🌫️: 4 code points
  for (const std::string name : {"llama-spm", "qwen2", "gpt-2"}) {
    SCOPED_TRACE(name);
    const auto path = toy::test::fixture(vocab_rel(name));
    if (path.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
    auto tok = load(path);
    const std::string text = "I feel " + emoji + " today \xF0\x9F\xA6\x99";  // and 🦙
    const auto ids = tok->encode(text);
    StreamDecoder sd(*tok);
    std::string streamed, pieces;
    int held = 0;
    for (int32_t id : ids) {
      const std::string out = sd.push(id);
      EXPECT_TRUE(toy::unicode::is_valid_utf8(out)) << "token " << id;
      held += out.empty();
      streamed += out;
      pieces += tok->piece(id);
    }
    streamed += sd.flush();
    EXPECT_EQ(streamed, pieces);
    EXPECT_GT(held, 0);  // some emoji bytes arrived in separate tokens and were held back
  }
  auto bytes = Tokenizer::byte_level();
  StreamDecoder sd(*bytes);
  EXPECT_EQ(sd.push(3 + 0xF0), "");
  EXPECT_EQ(sd.push(3 + 0x9F), "");
  EXPECT_EQ(sd.push(3 + 'a'),
            "\xEF\xBF\xBD"
            "a");  // "F0 9F" can no longer complete: one U+FFFD
  EXPECT_EQ(sd.push(3 + 0xE2), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");  // an incomplete character at the end
  EXPECT_EQ(sd.push(3 + 0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.flush(), "");
}

// ---- the byte-level vocabulary and saving -----------------------------------------------------

std::string random_text(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> atoms = {"a",
                                                 "Hello",
                                                 " world",
                                                 "'s",
                                                 "'LL",
                                                 "  ",
                                                 "   ",
                                                 "\n",
                                                 "\r\n",
                                                 "\t",
                                                 "3",
                                                 "12345",
                                                 "½",
                                                 "é",
                                                 "Ä",
                                                 "ß",
                                                 "нещо",
                                                 "我想",
                                                 "가",
                                                 "ក",
                                                 "🦙",
                                                 "😶\u200d🌫️",
                                                 "<s>",
                                                 "</s>",
                                                 "<|im_start|>",
                                                 "<|endoftext|>",
                                                 "[PAD]",
                                                 "##",
                                                 "\xC3",
                                                 "\xE2\x82",
                                                 "\xF0\x9F\xA6",
                                                 "\x80",
                                                 "\xFF",
                                                 "\xC0\xAF",
                                                 "\xED\xA0\x80",
                                                 std::string(1, '\0'),
                                                 "▁",
                                                 "."};
  std::string s;
  const size_t n = rng() % max_len;
  while (s.size() < n) {
    if (rng() % 4 == 0)
      s += char(rng() % 256);  // any byte at all
    else
      s += atoms[rng() % atoms.size()];
  }
  return s;
}

TEST(Tokenizer, ByteLevelVocabulary) {
  auto t = Tokenizer::byte_level();
  EXPECT_EQ(t->n_vocab(), 260);
  EXPECT_EQ(t->model(), "bytes");
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_TRUE(t->add_bos());
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_EQ(t->encode("a b"), (std::vector<int32_t>{3 + 'a', 259, 3 + 'b'}));
  EXPECT_EQ(t->encode("a", true), (std::vector<int32_t>{1, 3 + 'a'}));
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_text(rng, 80);
    if (s.find("\xE2\x96\x81") != std::string::npos) continue;  // a literal "▁" decodes as a space
    const auto ids = t->encode(s);
    size_t spaces = std::count(s.begin(), s.end(), ' ');
    EXPECT_EQ(ids.size(), s.size()) << "one token per byte";
    EXPECT_EQ(size_t(std::count(ids.begin(), ids.end(), 259)), spaces);
    EXPECT_EQ(t->decode(ids), s);
  }
}

std::shared_ptr<const Tokenizer> through_file(const Tokenizer& t, const std::string& name) {
  GgufWriter w;
  w.set("general.architecture", Value::of_string("llama"));
  t.write_gguf(w);
  const std::string path = testing::TempDir() + "/tok_" + name + ".gguf";
  w.write(path);
  auto f = GgufFile::open(path);
  auto back = Tokenizer::from_gguf(*f);
  std::filesystem::remove(path);
  return back;
}

TEST(Tokenizer, WriteGgufRoundTrip) {
  auto bytes = Tokenizer::byte_level();
  auto bytes2 = through_file(*bytes, "bytes");
  EXPECT_EQ(bytes2->model(), "llama");
  EXPECT_EQ(bytes2->n_vocab(), bytes->n_vocab());
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    const std::string s = random_text(rng, 60);
    EXPECT_EQ(bytes2->encode(s, true, true), bytes->encode(s, true, true));
  }
  for (const std::string name : {"llama-spm", "gpt-2", "llama-bpe", "bert-bge"}) {
    SCOPED_TRACE(name);
    const auto path = toy::test::fixture(vocab_rel(name));
    if (path.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
    auto tok = load(path);
    auto back = through_file(*tok, name);
    EXPECT_EQ(back->n_vocab(), tok->n_vocab());
    EXPECT_EQ(back->bos(), tok->bos());
    EXPECT_EQ(back->add_bos(), tok->add_bos());
    for (const Case& c : read_cases(path)) EXPECT_EQ(back->encode(c.text), c.ids) << c.text;
    for (int i = 0; i < 100; ++i) {
      const std::string s = random_text(rng, 60);
      EXPECT_EQ(back->encode(s, true, true), tok->encode(s, true, true));
    }
  }
}

// ---- malformed vocabularies -------------------------------------------------------------------

// A valid five-token SentencePiece vocabulary to break in one way per test.
GgufWriter small_spm() {
  GgufWriter w;
  w.set("tokenizer.ggml.model", Value::of_string("llama"));
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>", "<s>", "</s>",
                                                    "\xE2\x96\x81"
                                                    "a",
                                                    "b"}));
  w.set("tokenizer.ggml.scores", Value::of_f32s({0, 0, 0, -1, -2}));
  w.set("tokenizer.ggml.token_type", Value::of_i32s({2, 3, 3, 1, 1}));
  return w;
}

GgufWriter small_bpe() {
  GgufWriter w;
  w.set("tokenizer.ggml.model", Value::of_string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::of_string("gpt-2"));
  w.set("tokenizer.ggml.tokens", Value::of_strings({"a", "b", "ab", "<|endoftext|>"}));
  w.set("tokenizer.ggml.merges", Value::of_strings({"a b"}));
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(3));
  w.set("tokenizer.ggml.eos_token_id", Value::of_u32(3));
  return w;
}

std::string load_error(const GgufWriter& w) {
  static int n = 0;
  const std::string path = testing::TempDir() + "/bad_vocab_" + std::to_string(n++) + ".gguf";
  w.write(path);
  std::string msg;
  try {
    Tokenizer::from_gguf(*GgufFile::open(path));
  } catch (const TokenizerError& e) {
    msg = e.what();
  }
  std::filesystem::remove(path);
  return msg;
}

TEST(Tokenizer, SmallVocabulariesLoad) {
  EXPECT_EQ(load_error(small_spm()), "");
  EXPECT_EQ(load_error(small_bpe()), "");
}

TEST(Tokenizer, MalformedVocabulariesGiveCleanErrors) {
  const auto expect_error = [](const GgufWriter& w, const std::string& part) {
    const std::string msg = load_error(w);
    EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected it to contain '" << part << "'";
  };
  GgufWriter w;
  expect_error(w, "no tokenizer.ggml.model");
  w.set("tokenizer.ggml.model", Value::of_string("llama"));
  expect_error(w, "no tokenizer.ggml.tokens");
  w.set("tokenizer.ggml.tokens", Value::of_i32s({1, 2}));
  expect_error(w, "tokenizer.ggml.tokens must be an array of strings");

  w = small_spm();
  w.set("tokenizer.ggml.scores", Value::of_f32s({0, 0}));
  expect_error(w, "tokenizer.ggml.scores has 2 entries for 5 tokens");
  w = small_spm();
  w.set("tokenizer.ggml.token_type", Value::of_i32s({1, 1, 1, 1, 1, 1}));
  expect_error(w, "tokenizer.ggml.token_type has 6 entries for 5 tokens");
  w = small_spm();
  w.set("tokenizer.ggml.scores", Value::of_strings({"a", "b", "c", "d", "e"}));
  expect_error(w, "tokenizer.ggml.scores must be an array of numbers");
  w = small_spm();
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(99));
  expect_error(w, "tokenizer.ggml.bos_token_id = 99 is outside the vocabulary of 5 tokens");
  w = small_spm();
  w.set("tokenizer.ggml.eos_token_id", Value::of_u32(5));
  expect_error(w, "tokenizer.ggml.eos_token_id = 5 is outside");
  w = small_spm();
  w.set("tokenizer.ggml.add_bos_token", Value::of_string("yes"));
  expect_error(w, "tokenizer.ggml.add_bos_token");
  w = small_spm();
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>", "<s>", "</s>", "a", "\xFF\xFE"}));
  expect_error(w, "token 4 is not valid UTF-8");
  w = small_spm();
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>", "<s>", "</s>", "b", "b"}));
  expect_error(w, "duplicate token 'b' (ids 3 and 4)");
  w = small_spm();
  w.set("tokenizer.ggml.token_type", Value::of_i32s({2, 3, 3, 6, 1}));
  expect_error(w,
               "byte token 3 is '\xE2\x96\x81"
               "a', expected <0xXX>");
  // #37: a type outside llama.cpp's enum (0 undefined … 6 byte), and a SentencePiece vocabulary
  // (byte tokens) called bert, which llama.cpp aborts on.
  for (const int32_t type : {7, -1}) {
    w = small_spm();
    w.set("tokenizer.ggml.token_type", Value::of_i32s({2, 3, 3, type, 1}));
    expect_error(w, "tokenizer.ggml.token_type[3] = " + std::to_string(type) + " is not a token type");
  }
  w = small_spm();
  w.set("tokenizer.ggml.model", Value::of_string("bert"));
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>", "<s>", "</s>", "<0x0A>", "b"}));
  w.set("tokenizer.ggml.token_type", Value::of_i32s({2, 3, 3, 6, 1}));
  w.set("tokenizer.ggml.bos_token_id", Value::of_u32(1));
  w.set("tokenizer.ggml.seperator_token_id", Value::of_u32(2));
  expect_error(w, "token 3 '<0x0A>' is a byte token (token_type 6), which a bert vocabulary has not");
  w = small_spm();
  w.set("tokenizer.ggml.model", Value::of_string("t5"));
  expect_error(w, "unsupported tokenizer.ggml.model 't5'");
  w = small_spm();
  w.set("tokenizer.ggml.tokens", Value::of_strings({"<unk>"}));
  w.set("tokenizer.ggml.scores", Value::of_f32s({0}));
  w.set("tokenizer.ggml.token_type", Value::of_i32s({2}));
  expect_error(w, "add_bos_token is true but there is no BOS token");

  w = small_bpe();
  w.set("tokenizer.ggml.merges", Value::of_strings({"a c"}));
  expect_error(w, "tokenizer.ggml.merges[0] = 'a c' refers to a token that is not in the vocabulary");
  w = small_bpe();
  w.set("tokenizer.ggml.merges", Value::of_strings({"a b", "ab"}));
  expect_error(w, "tokenizer.ggml.merges[1] = 'ab' is not two tokens separated by a space");
  w = small_bpe();
  w.set("tokenizer.ggml.merges", Value::of_strings({}));
  expect_error(w, "needs tokenizer.ggml.merges");
  w = small_bpe();
  w.set("tokenizer.ggml.pre", Value::of_string("no-such-pre"));
  expect_error(w, "unknown pre-tokenizer tokenizer.ggml.pre = 'no-such-pre'");
}

// ---- random input -----------------------------------------------------------------------------

TEST(Tokenizer, RandomBytesNeverBreakEncodeOrDecode) {
  std::vector<std::pair<std::string, std::shared_ptr<const Tokenizer>>> toks = {{"bytes", Tokenizer::byte_level()}};
  for (const std::string name : {"llama-spm", "gpt-2", "qwen2", "deepseek-llm", "falcon", "bert-bge"})
    if (auto p = toy::test::fixture(vocab_rel(name)); !p.empty()) toks.emplace_back(name, load(p));
  // Byte-exact round trips: byte-level BPE without clean-up, SentencePiece with byte fallback
  // (unless the text has a literal "▁"). deepseek-llm only for UTF-8: its vocabulary has
  // user-defined tokens "À", "ÿ", ... for GPT-2's spelling of the bytes that UTF-8 never uses,
  // and user-defined tokens decode as their text (as in llama.cpp).
  const auto lossless = [](const std::string& name, const std::string& s) {
    if (s.find("\xE2\x96\x81") != std::string::npos) return false;
    return name == "bytes" || name == "qwen2" || name == "llama-spm" ||
           (name == "deepseek-llm" && toy::unicode::is_valid_utf8(s));
  };
  std::mt19937 rng(1234);
  for (int i = 0; i < 3000; ++i) {
    const std::string s = random_text(rng, i % 10 == 0 ? 2000 : 120);
    const bool add = rng() & 1, parse = rng() & 1;
    for (const auto& [name, tok] : toks) {
      const auto ids = tok->encode(s, add, parse);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << name;
      const std::string back = tok->decode(ids);
      if (lossless(name, s) && !add && !parse) {
        ASSERT_EQ(back, s) << name << " ids" << show(ids);
      }
      StreamDecoder sd(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += sd.push(id);
      streamed += sd.flush();
      ASSERT_TRUE(toy::unicode::is_valid_utf8(streamed)) << name;
    }
  }
}

}  // namespace
