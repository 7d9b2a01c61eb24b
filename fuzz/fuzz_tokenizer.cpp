// fuzz/fuzz_tokenizer.cpp — libFuzzer target: any bytes go through encode, decode and streaming,
// with each kind of tokenizer.
//
// The vocabularies are loaded once, from $TOY_FIXTURES (default ../shared/fixtures)/tokenizer:
// llama-spm (SPM), llama-bpe and qwen2 (BPE with two pre-tokenizer regexes), bert-bge (WPM); one
// that is absent is replaced by the built-in byte-level vocabulary. $TOY_FUZZ_VOCAB, when set,
// is the only vocabulary.
// Input layout: byte 0 chooses add_special (bit 0), parse_special (bit 1) and the vocabulary
// (bits 2-3); the rest is the text, and is also read as little-endian u16 ids (taken modulo
// n_vocab) for decode, piece and the StreamDecoder.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace {

using Vocab = std::shared_ptr<const toy::Tokenizer>;

Vocab load(const std::string& path) {
  if (!std::filesystem::exists(path)) return toy::Tokenizer::byte_level();
  return toy::Tokenizer::from_gguf(*toy::gguf::GgufFile::open(path));  // a broken vocabulary aborts the run
}

std::vector<Vocab> load_vocabularies() {
  if (const char* v = std::getenv("TOY_FUZZ_VOCAB")) return {load(v)};
  const char* f = std::getenv("TOY_FIXTURES");
  const std::string dir = std::string(f ? f : "../shared/fixtures") + "/tokenizer/ggml-vocab-";
  return {load(dir + "llama-spm.gguf"), load(dir + "llama-bpe.gguf"), load(dir + "qwen2.gguf"),
          load(dir + "bert-bge.gguf")};
}

std::vector<Vocab> vocabularies;

}  // namespace

// Before the first input, so that loading (seconds under ASan) does not count against -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vocabularies = load_vocabularies();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_special = data[0] & 1, parse_special = data[0] & 2;
  const toy::Tokenizer& tok = *vocabularies[size_t(data[0] >> 2) % vocabularies.size()];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) std::abort();  // encode must only produce vocabulary ids
  (void)tok.decode(ids);

  std::vector<int32_t> any;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    uint16_t v;
    std::memcpy(&v, text.data() + i, 2);
    any.push_back(int32_t(v % uint32_t(tok.n_vocab())));
  }
  (void)tok.decode(any);
  toy::StreamDecoder sd(tok);
  for (int32_t id : any) (void)sd.push(id), (void)tok.piece(id, parse_special);
  (void)sd.flush();
  return 0;
}
