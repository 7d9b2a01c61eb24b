// bench/bench_tokenizer.cpp — encoding speed (MB/s) on a multi-megabyte English text.
//
// usage: bench_tokenizer [TEXT_FILE] [VOCAB_NAME...]
//   TEXT_FILE   default: war_and_peace_pg2600.txt from $TOY_CORPORA (default ../shared/corpora)
//   VOCAB_NAME  fixture vocabularies under $TOY_FIXTURES/tokenizer (default ../shared/fixtures),
//               default: llama-bpe (byte-level BPE) and llama-spm (SentencePiece)
// Each vocabulary: load time, then the best of 3 runs of encode() over the whole text and of
// decode() over the resulting ids. The built-in byte-level vocabulary is measured too. Times are
// the thread's CPU time, so that a busy machine (other builds on the same cores) distorts them less.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "toy/io/gguf.h"
#include "toy/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

fs::path shared_dir(const char* env, const char* sub) {
  if (const char* e = std::getenv(env)) return e;
  for (fs::path p : {fs::path("../shared") / sub, fs::path("../../shared") / sub})
    if (fs::exists(p)) return p;
  return fs::path("../shared") / sub;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void measure(const std::string& label, const toy::Tokenizer& tok, const std::string& text) {
  double best_enc = 1e30, best_dec = 1e30;
  std::vector<int32_t> ids;
  for (int run = 0; run < 3; ++run) {
    double t0 = cpu_seconds();
    ids = tok.encode(text);
    best_enc = std::min(best_enc, cpu_seconds() - t0);
    t0 = cpu_seconds();
    const std::string back = tok.decode(ids);
    best_dec = std::min(best_dec, cpu_seconds() - t0);
  }
  const double mb = double(text.size()) / 1e6;
  std::printf("%-16s %9zu tokens  %5.2f bytes/token  encode %7.1f MB/s  decode %7.1f MB/s\n", label.c_str(), ids.size(),
              double(text.size()) / double(ids.size()), mb / best_enc, mb / best_dec);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path text_path = shared_dir("TOY_CORPORA", "corpora") / "war_and_peace_pg2600.txt";
  std::vector<std::string> vocabs;
  for (int i = 1; i < argc; ++i) {
    if (i == 1 && fs::exists(argv[i]))
      text_path = argv[i];
    else
      vocabs.emplace_back(argv[i]);
  }
  if (vocabs.empty()) vocabs = {"llama-bpe", "llama-spm"};

  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_tokenizer: cannot read %s (set TOY_CORPORA)\n", text_path.c_str());
    return 1;
  }
  const std::string text(std::istreambuf_iterator<char>(in), {});
  std::printf("text: %s (%.2f MB)\n", text_path.c_str(), double(text.size()) / 1e6);

  const fs::path dir = shared_dir("TOY_FIXTURES", "fixtures") / "tokenizer";
  for (const std::string& name : vocabs) {
    const fs::path p = dir / ("ggml-vocab-" + name + ".gguf");
    if (!fs::exists(p)) {
      std::fprintf(stderr, "bench_tokenizer: %s not found (set TOY_FIXTURES)\n", p.c_str());
      return 1;
    }
    const double t0 = cpu_seconds();
    const auto tok = toy::Tokenizer::from_gguf(*toy::gguf::GgufFile::open(p.string()));
    std::printf("%-16s loaded in %.0f ms (%d tokens, %s)\n", name.c_str(), (cpu_seconds() - t0) * 1e3, tok->n_vocab(),
                std::string(tok->model()).c_str());
    measure(name, *tok, text);
  }
  measure("bytes (built-in)", *toy::Tokenizer::byte_level(), text);
  return 0;
}
