// tests/test_tokenize_cli.cpp — `toy tokenize` end to end against llama.cpp's test vectors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fixtures.h"

namespace {

using toy::test::run_toy;

std::string vocab(const std::string& name) {
  const auto p = toy::test::fixture("tokenizer/ggml-vocab-" + name + ".gguf");
  return p.empty() ? "" : p.string();
}

// Test case `index` of a vector file: its text and its expected ids as `toy tokenize` prints them.
std::pair<std::string, std::string> vector_case(const std::string& gguf, size_t index) {
  const std::string raw = toy::test::read_text(gguf + ".inp"), sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  for (size_t i = 0; i < index; ++i) pos = raw.find(sep, pos) + sep.size();
  const std::string text = raw.substr(pos, raw.find(sep, pos) - pos);
  std::istringstream out(toy::test::read_text(gguf + ".out"));
  std::string line;
  for (size_t i = 0; i <= index; ++i) std::getline(out, line);
  std::istringstream ids(line);
  std::string printed;
  for (std::string id; ids >> id;) printed += (printed.empty() ? "" : " ") + id;
  return {text, printed + "\n"};
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = testing::TempDir() + "/tokenize_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(TokenizeCli, FileGivesTheVectorIds) {
  // Empty text, "Hello world", emoji, the long mixed block (each run loads the vocabulary anew).
  const std::vector<size_t> cases = {2, 11, 22, 45};
  for (const std::string name : {"llama-spm", "llama-bpe", "qwen2", "bert-bge"}) {
    const std::string v = vocab(name);
    if (v.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
    for (size_t c : cases) {
      SCOPED_TRACE(name + " case " + std::to_string(c));
      const auto [text, expected] = vector_case(v, c);
      const std::string f = write_temp(name + std::to_string(c) + ".txt", text);
      const auto r = run_toy("tokenize " + v + " --file " + f);
      EXPECT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, expected);
      std::filesystem::remove(f);
    }
  }
}

TEST(TokenizeCli, TextPiecesAndSpecialTokens) {
  const std::string spm = vocab("llama-spm"), qwen = vocab("qwen2");
  if (spm.empty() || qwen.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
  EXPECT_EQ(run_toy("tokenize " + spm + " --text 'Hello world'").out, "15043 3186\n");
  EXPECT_EQ(run_toy("tokenize " + spm + " --text 'Hello world' --add-special").out, "1 15043 3186\n");
  EXPECT_EQ(run_toy("tokenize " + spm + " --text 'Hello world' --pieces").out, "15043 -> ' Hello'\n3186 -> ' world'\n");
  EXPECT_EQ(run_toy("tokenize " + spm + " --text 'a\nb' --pieces --add-special").out,
            "1 -> '<s>'\n263 -> ' a'\n13 -> '\\n'\n29890 -> 'b'\n");
  EXPECT_EQ(run_toy("tokenize " + qwen + " --text '<|im_start|>hi' --parse-special").out, "151644 6023\n");
  EXPECT_NE(run_toy("tokenize " + qwen + " --text '<|im_start|>hi'").out.substr(0, 6), "151644");
  EXPECT_EQ(run_toy("tokenize " + qwen + " --file -", "Hello world").out,
            run_toy("tokenize " + qwen + " --text 'Hello world'").out);
}

TEST(TokenizeCli, Errors) {
  const std::string spm = vocab("llama-spm");
  if (spm.empty()) GTEST_SKIP() << "tokenizer fixtures not found (set TOY_FIXTURES)";
  auto r = run_toy("tokenize " + spm + " --file /no/such/prompt.txt");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("cannot read /no/such/prompt.txt"), std::string::npos) << r.err;
  EXPECT_EQ(run_toy("tokenize " + spm).code, 2);                         // neither --text nor --file
  EXPECT_EQ(run_toy("tokenize " + spm + " --text a --file b").code, 2);  // both
  EXPECT_EQ(run_toy("tokenize /no/such/model.gguf --text a").code, 3);
  // A GGUF file without a tokenizer: exit 3 with the reason.
  const std::string empty = write_temp("no_vocab.gguf", std::string("GGUF\x03\0\0\0", 8) + std::string(16, '\0'));
  r = run_toy("tokenize " + empty + " --text a");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("no tokenizer.ggml.model"), std::string::npos) << r.err;
  std::filesystem::remove(empty);
}

}  // namespace
