// tests/test_zero_copy.cpp — loading maps the weights instead of copying them.
#include <gtest/gtest.h>

#include <fstream>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/engines/decode.h"

using namespace toy;

namespace {

// Anonymous (heap) resident memory of this process in KiB: file-backed pages of a mapping
// are not counted, so copying weights would show here and mapping them would not.
long rss_anon_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

}  // namespace

TEST(ZeroCopy, WeightsPointIntoTheMappingAndHeapDoesNotGrowByTheModel) {
  if (rss_anon_kib() < 0) GTEST_SKIP() << "/proc/self/status has no RssAnon";
  // A 6-layer, d_model 512 llama with random F32 weights (~60 MiB), written as GGUF.
  const std::string path = testing::TempDir() + "/zero_copy.gguf";
  uint64_t file_bytes = 0;
  {
    std::unique_ptr<Model> m = random_model({.arch = "llama",
                                             .n_vocab = 4096,
                                             .d_model = 512,
                                             .n_layer = 6,
                                             .n_head = 8,
                                             .n_kv_head = 4,
                                             .d_ff = 1536,
                                             .n_ctx = 256,
                                             .tied_output = false,
                                             .keys = {}},
                                            1);
    gguf::GgufWriter w;
    m->write_metadata(w);
    m->for_each_param([&](Tensor& t) { w.add_tensor(t.name(), t); });
    w.write(path);
    file_bytes = std::filesystem::file_size(path);
  }
  const long before = rss_anon_kib();
  auto file = gguf::GgufFile::open(path);
  auto model = load_model(file);
  // Every matrix is a view into the mapped file.
  const char* lo = static_cast<const char*>(file->tensor_data(file->tensors().front()));
  const char* hi = lo + file->file_size();
  int views = 0;
  model->for_each_param([&](Tensor& t) {
    if (t.dim() == 2) {
      EXPECT_GE(static_cast<const char*>(t.raw()), lo - file->data_offset()) << t.name();
      EXPECT_LT(static_cast<const char*>(t.raw()), hi) << t.name();
      ++views;
    }
  });
  EXPECT_EQ(views, 1 + 6 * 7 + 1);
  DecodeEngine engine(*model, 64);
  std::vector<int32_t> ids(32, 7);
  engine.feed(ids);
  const long grown_kib = rss_anon_kib() - before;
  // Activations, the KV cache and the pool are a few MiB; a copy of the weights would be ~60 MiB.
  EXPECT_LT(grown_kib * 1024, long(file_bytes) / 5)
      << "heap grew by " << grown_kib << " KiB for a " << file_bytes / 1024 << " KiB model";
  std::filesystem::remove(path);
}
