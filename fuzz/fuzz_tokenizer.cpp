// fuzz/fuzz_tokenizer.cpp — libFuzzer target: any bytes go through encode, decode and streaming.
//
// The vocabulary is loaded once: $TOY_FUZZ_VOCAB, else the llama-spm fixture under
// $TOY_FIXTURES (default ../shared/fixtures), else the built-in byte-level vocabulary.
// Input layout: byte 0 chooses add_special / parse_special; the rest is the text, and is also
// read as little-endian u16 ids (taken modulo n_vocab) for decode and the StreamDecoder.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace {

std::shared_ptr<const toy::Tokenizer> load_vocab() {
  std::string path;
  if (const char* v = std::getenv("TOY_FUZZ_VOCAB"))
    path = v;
  else if (const char* f = std::getenv("TOY_FIXTURES"))
    path = std::string(f) + "/tokenizer/ggml-vocab-llama-spm.gguf";
  else
    path = "../shared/fixtures/tokenizer/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) return toy::Tokenizer::byte_level();
  return toy::Tokenizer::from_gguf(*toy::gguf::GgufFile::open(path));  // a broken vocabulary aborts the run
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok = load_vocab();
  if (size == 0) return 0;
  const bool add_special = data[0] & 1, parse_special = data[0] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::vector<int32_t> ids = tok->encode(text, add_special, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok->n_vocab()) std::abort();  // encode must only produce vocabulary ids
  (void)tok->decode(ids);

  std::vector<int32_t> any;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    uint16_t v;
    std::memcpy(&v, text.data() + i, 2);
    any.push_back(int32_t(v % uint32_t(tok->n_vocab())));
  }
  (void)tok->decode(any);
  toy::StreamDecoder sd(*tok);
  for (int32_t id : any) (void)sd.push(id);
  (void)sd.flush();
  return 0;
}
