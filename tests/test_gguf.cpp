// tests/test_gguf.cpp — GGUF reader/writer against the fixtures, and corruption robustness.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "fixtures.h"
#include "toy/io/gguf.h"

using namespace toy;
using namespace toy::gguf;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> all_gguf_fixtures() {
  auto a = test::fixture_files("models", ".gguf");
  auto b = test::fixture_files("tokenizer", ".gguf");
  auto c = test::fixture_files("real", ".gguf");
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

// Little-endian GGUF image built by hand, independent of GgufWriter.
struct Image {
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    auto* p = reinterpret_cast<uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

}  // namespace

TEST(Gguf, EveryFixtureLoadsAndMatchesItsDeclaration) {
  auto files = all_gguf_fixtures();
  if (files.empty()) GTEST_SKIP() << "no fixtures under " << test::fixtures_dir() << " (set TOY_FIXTURES)";
  int checked_refs = 0;
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    auto f = GgufFile::open(p.string());
    EXPECT_TRUE(f->version() == 2 || f->version() == 3);
    fs::path ref = p.string() + ".ref.json";
    if (!fs::exists(ref)) continue;
    auto j = nlohmann::json::parse(test::read_text(ref));
    const auto& types = j["tensor_types"];
    EXPECT_EQ(f->tensors().size(), types.size());
    for (auto& [name, type] : types.items()) {
      const TensorInfo* t = f->find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(std::string(toy::name(t->dtype)), type.get<std::string>()) << name;
    }
    // Shapes against family.json (numpy order == toy's PyTorch order).
    fs::path fam = p.parent_path() / "family.json";
    if (fs::exists(fam)) {
      auto fj = nlohmann::json::parse(test::read_text(fam));
      for (auto& t : fj["tensors"]) {
        const TensorInfo* ti = f->find_tensor(t["name"].get<std::string>());
        ASSERT_NE(ti, nullptr);
        EXPECT_EQ(ti->shape, t["shape_numpy"].get<Shape>()) << ti->name;
      }
    }
    ++checked_refs;
  }
  EXPECT_GT(checked_refs, 40);
}

TEST(Gguf, ReadsTokenizerArrays) {
  TOY_REQUIRE_FIXTURE(p, "tokenizer/ggml-vocab-llama-spm.gguf");
  auto f = GgufFile::open(p.string());
  auto tokens = f->get_strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(f->get_floats("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_THROW(f->get_int("tokenizer.ggml.model"), GgufError);
  EXPECT_THROW(f->get_string("no.such.key"), GgufError);
}

TEST(Gguf, HandBuiltFileWithEveryValueTypeAndNestedArrays) {
  Image im;
  im.put<uint32_t>(0x46554747);
  im.put<uint32_t>(2);   // version 2 reads too
  im.put<uint64_t>(1);   // one tensor
  im.put<uint64_t>(16);  // metadata entries
  auto key = [&](const std::string& k, uint32_t t) {
    im.str(k);
    im.put<uint32_t>(t);
  };
  key("u8", 0);
  im.put<uint8_t>(200);
  key("i8", 1);
  im.put<int8_t>(-5);
  key("u16", 2);
  im.put<uint16_t>(60000);
  key("i16", 3);
  im.put<int16_t>(-30000);
  key("u32", 4);
  im.put<uint32_t>(4000000000u);
  key("i32", 5);
  im.put<int32_t>(-7);
  key("f32", 6);
  im.put<float>(1.5f);
  key("bool", 7);
  im.put<uint8_t>(1);
  key("str", 8);
  im.str("héllo");
  key("u64", 10);
  im.put<uint64_t>(1ull << 40);
  key("i64", 11);
  im.put<int64_t>(-(1ll << 40));
  key("f64", 12);
  im.put<double>(0.25);
  key("strings", 9);
  im.put<uint32_t>(8);
  im.put<uint64_t>(2);
  im.str("a");
  im.str("bc");
  key("i16s", 9);
  im.put<uint32_t>(3);
  im.put<uint64_t>(3);
  im.put<int16_t>(-3);
  im.put<int16_t>(7);
  im.put<int16_t>(30000);
  key("bools", 9);
  im.put<uint32_t>(7);
  im.put<uint64_t>(2);
  im.put<uint8_t>(0);
  im.put<uint8_t>(1);
  key("nested", 9);
  im.put<uint32_t>(9);
  im.put<uint64_t>(2);
  im.put<uint32_t>(5);
  im.put<uint64_t>(2);
  im.put<int32_t>(1);
  im.put<int32_t>(2);
  im.put<uint32_t>(5);
  im.put<uint64_t>(1);
  im.put<int32_t>(3);
  im.str("w");  // tensor: ne = {4, 2} F32 at offset 0
  im.put<uint32_t>(2);
  im.put<uint64_t>(4);
  im.put<uint64_t>(2);
  im.put<uint32_t>(0);
  im.put<uint64_t>(0);
  while (im.b.size() % 32) im.b.push_back(0);
  for (int k = 0; k < 8; ++k) im.put<float>(float(k));

  auto f = GgufFile::parse("hand", im.b.data(), im.b.size());
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -5);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -7);
  EXPECT_FLOAT_EQ(float(f->get_float("f32")), 1.5f);
  EXPECT_TRUE(f->get_bool("bool"));
  EXPECT_EQ(f->get_string("str"), "héllo");
  EXPECT_EQ(f->get_int("u64"), 1ll << 40);
  EXPECT_EQ(f->get_int("i64"), -(1ll << 40));
  EXPECT_DOUBLE_EQ(f->get_float("f64"), 0.25);
  EXPECT_EQ(f->get_strings("strings"), (std::vector<std::string_view>{"a", "bc"}));
  // Arrays of scalars stay packed in the image and decode element by element.
  EXPECT_EQ(f->get_ints("i16s"), (std::vector<int32_t>{-3, 7, 30000}));
  const Value* bools = f->find("bools");
  ASSERT_NE(bools, nullptr);
  ASSERT_EQ(bools->size(), 2u);
  EXPECT_FALSE(bools->at(0).b);
  EXPECT_TRUE(bools->at(1).b);
  EXPECT_THROW(bools->at(2), std::out_of_range);
  const Value* n = f->find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->size(), 2u);
  EXPECT_EQ(n->at(0).at(1).as_int(), 2);
  EXPECT_EQ(n->at(1).at(0).as_int(), 3);
  const TensorInfo* t = f->find_tensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (Shape{2, 4}));  // PyTorch order: ne reversed
  EXPECT_EQ(static_cast<const float*>(f->tensor_data(*t))[5], 5.0f);
}

TEST(Gguf, WriterRoundTripIsIdentical) {
  auto files = test::fixture_files("models/smollm2", ".gguf");
  auto q = test::fixture_files("models/llama2w256", ".gguf");
  files.insert(files.end(), q.begin(), q.end());
  if (files.empty()) GTEST_SKIP() << "fixtures not found (set TOY_FIXTURES)";
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    auto a = GgufFile::open(p.string());
    const std::string out = testing::TempDir() + "/roundtrip.gguf";
    copy_of(*a).write(out);
    auto b = GgufFile::open(out);
    ASSERT_EQ(a->metadata().size(), b->metadata().size());
    for (size_t k = 0; k < a->metadata().size(); ++k) {
      EXPECT_EQ(a->metadata()[k].first, b->metadata()[k].first);
      EXPECT_EQ(a->metadata()[k].second.to_display(1000000), b->metadata()[k].second.to_display(1000000));
    }
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t k = 0; k < a->tensors().size(); ++k) {
      const auto& ta = a->tensors()[k];
      const auto& tb = b->tensors()[k];
      EXPECT_EQ(ta.name, tb.name);
      EXPECT_EQ(ta.shape, tb.shape);
      EXPECT_EQ(ta.dtype, tb.dtype);
      ASSERT_EQ(ta.nbytes, tb.nbytes);
      EXPECT_EQ(0, std::memcmp(a->tensor_data(ta), b->tensor_data(tb), ta.nbytes)) << ta.name;
    }
    for (const auto& e : fs::directory_iterator(testing::TempDir()))  // no temporary file left beside it
      EXPECT_EQ(e.path().filename().string().rfind("roundtrip.gguf.tmp.", 0), std::string::npos) << e.path();
  }
}

TEST(Gguf, ViewsAreZeroCopy) {
  TOY_REQUIRE_FIXTURE(p, "models/smollm2/smollm2-f32.gguf");
  auto f = GgufFile::open(p.string());
  const TensorInfo* t = f->find_tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  Tensor w = f->tensor(*t);
  EXPECT_EQ(w.raw(), f->tensor_data(*t));
  f.reset();  // the view keeps the mapping alive
  EXPECT_EQ(w.shape(), (Shape{512, 128}));
  EXPECT_TRUE(std::isfinite(w.data()[100]));
}

TEST(Gguf, ClearErrorsForBadFiles) {
  auto expect_error = [](const std::vector<uint8_t>& b, const std::string& needle) {
    try {
      GgufFile::parse("bad.gguf", b.data(), b.size());
      ADD_FAILURE() << "no error for: " << needle;
    } catch (const GgufError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({}, "bad magic");
  expect_error({'G', 'G', 'U', 'F', 9, 0, 0, 0}, "version 9");
  Image im;
  im.put<uint32_t>(0x46554747);
  im.put<uint32_t>(3);
  im.put<uint64_t>(0);
  im.put<uint64_t>(1ull << 60);
  expect_error(im.b, "metadata count");
  Image s;
  s.put<uint32_t>(0x46554747);
  s.put<uint32_t>(3);
  s.put<uint64_t>(0);
  s.put<uint64_t>(1);
  s.put<uint64_t>(1ull << 62);  // key length
  s.b.resize(s.b.size() + 16);
  expect_error(s.b, "exceeds");
  // A tensor whose data lies past the end.
  Image t;
  t.put<uint32_t>(0x46554747);
  t.put<uint32_t>(3);
  t.put<uint64_t>(1);
  t.put<uint64_t>(0);
  t.str("w");
  t.put<uint32_t>(1);
  t.put<uint64_t>(1024);
  t.put<uint32_t>(0);
  t.put<uint64_t>(0);
  while (t.b.size() % 32) t.b.push_back(0);
  expect_error(t.b, "outside the file");
  // Unknown dtype, dimension overflow.
  Image u = t;
  u.b.resize(u.b.size());
  Image d;
  d.put<uint32_t>(0x46554747);
  d.put<uint32_t>(3);
  d.put<uint64_t>(1);
  d.put<uint64_t>(0);
  d.str("w");
  d.put<uint32_t>(2);
  d.put<uint64_t>(1ull << 40);
  d.put<uint64_t>(1ull << 40);
  d.put<uint32_t>(0);
  d.put<uint64_t>(0);
  expect_error(d.b, "invalid dimension");
  Image e;
  e.put<uint32_t>(0x46554747);
  e.put<uint32_t>(3);
  e.put<uint64_t>(1);
  e.put<uint64_t>(0);
  e.str("w");
  e.put<uint32_t>(1);
  e.put<uint64_t>(32);
  e.put<uint32_t>(77);
  e.put<uint64_t>(0);
  expect_error(e.b, "unknown dtype id 77");
  EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), GgufError);
}

// Found by fuzz_gguf: 2^62 + 4 F32 values take 2^64 + 16 bytes, which wrapped to 16 and passed the
// bounds check, so the tensor's shape promised 2^62 values over a 16-byte buffer.
TEST(Gguf, TensorSizeThatWrapsAroundIsRefused) {
  Image t;
  t.put<uint32_t>(0x46554747);
  t.put<uint32_t>(3);
  t.put<uint64_t>(1);
  t.put<uint64_t>(0);
  t.str("w");
  t.put<uint32_t>(1);
  t.put<uint64_t>((1ull << 62) + 4);
  t.put<uint32_t>(0);  // F32
  t.put<uint64_t>(0);
  while (t.b.size() % 32) t.b.push_back(0);
  t.b.resize(t.b.size() + 16);  // the 16 bytes the wrapped size asks for
  try {
    GgufFile::parse("wrap.gguf", t.b.data(), t.b.size());
    ADD_FAILURE() << "a tensor of 2^62 + 4 F32 values in a " << t.b.size() << "-byte file was accepted";
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("more bytes than the file holds"), std::string::npos) << e.what();
  }
}

// Thousands of mutated fixture images: every one either parses or raises GgufError.
TEST(Gguf, MutatedFilesNeverCrash) {
  std::vector<fs::path> seeds;
  for (const char* rel : {"models/smollm2/smollm2-q4_0.gguf", "models/gpt2/gpt2-q8_0.gguf",
                          "tokenizer/ggml-vocab-llama-spm.gguf", "models/olmoe/olmoe-q4_0.gguf"})
    if (auto p = test::fixture(rel); !p.empty()) seeds.push_back(p);
  if (seeds.empty()) GTEST_SKIP() << "fixtures not found (set TOY_FIXTURES)";
  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  for (const fs::path& p : seeds) {
    const std::vector<uint8_t> orig = test::read_bytes(p);
    // Header region: metadata and tensor infos (where lengths and counts live).
    auto f = GgufFile::parse("seed", orig.data(), orig.size());
    const size_t header = size_t(f->data_offset());
    for (int it = 0; it < 1000; ++it) {
      std::vector<uint8_t> b = orig;
      switch (it % 4) {
        case 0:  // truncate
          b.resize(size_t(rng() % (header + 64)));
          break;
        case 1:  // flip random bytes in the header
          for (int k = 0; k < 1 + int(rng() % 8); ++k) b[rng() % header] ^= uint8_t(1 + rng() % 255);
          break;
        case 2: {  // a huge 64-bit value at a random 8-byte-aligned-or-not position in the header
          const size_t at = rng() % (header - 8);
          const uint64_t huge = (it % 8 == 2) ? ~0ull : (1ull << (32 + rng() % 31));
          std::memcpy(b.data() + at, &huge, 8);
          break;
        }
        default: {  // a huge 32-bit value (types, dimension counts)
          const size_t at = rng() % (header - 4);
          const uint32_t huge = uint32_t(rng());
          std::memcpy(b.data() + at, &huge, 4);
          break;
        }
      }
      try {
        auto g = GgufFile::parse("mutant", b.data(), b.size());
        for (const auto& t : g->tensors()) ASSERT_LE(g->data_offset() + t.offset + t.nbytes, b.size());
        ++parsed;
      } catch (const GgufError&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_EQ(parsed + rejected, int(seeds.size()) * 1000);
}
