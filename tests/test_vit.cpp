// tests/test_vit.cpp — the ViT image classifier: IDX and PGM reading (good and malformed files),
// the model's GGUF round trip, that the class token sees every patch (bidirectional attention),
// and `toy train vit` / `toy eval --images` / `toy infer --image` on a small part of Fashion-MNIST.
// (Its gradients: GradCheck.VitLoss in test_autograd.cpp.)
#include <gtest/gtest.h>
#include <png.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "fixtures.h"
#include "helpers.h"
#include "toy/archs/vit.h"
#include "toy/io/idx.h"
#include "toy/recipes/vit.h"
#include "train_helpers.h"

using namespace toy;
using test::TrainDir;
namespace fs = std::filesystem;

namespace {

const char* const kFashion = "/usr/share/datasets/fashion-mnist";

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)}; }
// An unsigned-byte IDX file of these sizes and values (gzip-compressed when gz).
void write_idx(const std::string& path, const std::vector<uint32_t>& dims, const std::string& values, bool gz,
               const std::string& header = "") {
  std::string bytes = header.empty() ? std::string("\0\0\x08", 3) + char(dims.size()) : header;
  for (uint32_t d : dims) bytes += be32(d);
  bytes += values;
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

void expect_idx_error(const std::string& path, const std::string& words) {
  try {
    read_idx(path);
    ADD_FAILURE() << path << ": no error, expected one saying '" << words << "'";
  } catch (const IdxError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

VitHparams tiny_hparams() {
  return {.image_size = 8,
          .patch_size = 4,
          .n_channel = 1,
          .d_model = 8,
          .n_layer = 2,
          .n_head = 2,
          .d_ff = 16,
          .n_class = 3,
          .eps = 1e-5f};
}

}  // namespace

TEST(Idx, ReadsPlainAndGzipFilesAndRefusesMalformedOnes) {
  TrainDir d;
  const std::string values = "\x01\x02\x03\x04\x05\x06";
  for (bool gz : {false, true}) {
    const std::string p = d.path(gz ? "ok.gz" : "ok");
    write_idx(p, {3, 2}, values, gz);
    const Idx idx = read_idx(p);
    EXPECT_EQ(idx.dims, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(std::string(idx.values.begin(), idx.values.end()), values);
  }
  expect_idx_error(d.path("absent.gz"), "no such file");
  write_idx(d.path("magic"), {6}, values, true, std::string("\0\0\x0b\x01", 4));  // int32 values
  expect_idx_error(d.path("magic"), "not an unsigned-byte IDX file");
  write_idx(d.path("short"), {3, 2}, values.substr(0, 5), true);
  expect_idx_error(d.path("short"), "ends before its 6 values");
  write_idx(d.path("long"), {5}, values, true);
  expect_idx_error(d.path("long"), "goes on after its 5 values");
  write_idx(d.path("zero"), {0, 2}, "", true);
  expect_idx_error(d.path("zero"), "has size 0");
  write_idx(d.path("huge"), {65536, 65536}, "", true);  // 2^32 values: refused before allocating
  expect_idx_error(d.path("huge"), "more than 2^31 values");
  std::ofstream(d.path("header"), std::ios::binary) << std::string("\0\0\x08\x02\0\0", 6);
  expect_idx_error(d.path("header"), "ends inside the sizes");

  // A set: images and labels must agree in count, labels must be classes.
  fs::create_directories(d.path("set"));
  write_idx(d.path("set/t10k-images-idx3-ubyte.gz"), {2, 1, 3}, values, true);
  write_idx(d.path("set/t10k-labels-idx1-ubyte.gz"), {2}, "\x01\x09", true);
  const ImageSet s = read_image_set(d.path("set"), "t10k", 10);
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.cols, 3);
  EXPECT_THROW(read_image_set(d.path("set"), "t10k", 9), IdxError);  // label 9 ≥ 9 classes
  write_idx(d.path("set/t10k-labels-idx1-ubyte.gz"), {3}, "\x01\x02\x03", true);
  EXPECT_THROW(read_image_set(d.path("set"), "t10k", 10), IdxError);  // 2 images, 3 labels
}

TEST(Pgm, ReadsBinaryAndPlainImagesAndRefusesMalformedOnes) {
  TrainDir d;
  std::ofstream(d.path("a.pgm"), std::ios::binary) << "P5\n# a comment\n3 2\n255\n"
                                                   << std::string("\x00\x10\x20\x30\x40\xff", 6);
  std::ofstream(d.path("b.pgm")) << "P2 3 2 15\n0 1 2\n3 4 15\n";
  const ImageSet a = read_pgm(d.path("a.pgm")), b = read_pgm(d.path("b.pgm"));
  EXPECT_EQ(a.rows, 2);
  EXPECT_EQ(a.cols, 3);
  EXPECT_EQ(a.pixels, (std::vector<uint8_t>{0, 0x10, 0x20, 0x30, 0x40, 0xff}));
  EXPECT_EQ(b.pixels, (std::vector<uint8_t>{0, 17, 34, 51, 68, 255}));  // scaled from maxval 15
  std::ofstream(d.path("short.pgm"), std::ios::binary) << "P5 3 2 255\n" << std::string("\x01\x02", 2);
  std::ofstream(d.path("png.pgm"), std::ios::binary) << "\x89PNG\r\n";
  std::ofstream(d.path("over.pgm")) << "P2 1 1 15\n16\n";
  for (const char* bad : {"short.pgm", "png.pgm", "over.pgm", "absent.pgm"})
    EXPECT_THROW(read_pgm(d.path(bad)), IdxError) << bad;
}

// PNG through libpng: a grey image's bytes come back as written, colour is turned into grey,
// read_image tells PNG from PGM by the signature, and a cut-off file is an IdxError.
TEST(Png, ReadsGreyAndColourImagesAndRefusesMalformedOnes) {
  TrainDir d;
  auto write_png = [&](const std::string& name, uint32_t format, const std::vector<uint8_t>& px) {
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    image.width = 3, image.height = 2, image.format = format;
    ASSERT_TRUE(png_image_write_to_file(&image, d.path(name).c_str(), 0, px.data(), 0, nullptr)) << image.message;
  };
  const std::vector<uint8_t> grey = {0, 0x10, 0x20, 0x30, 0x40, 0xff};
  write_png("grey.png", PNG_FORMAT_GRAY, grey);
  const ImageSet g = read_image(d.path("grey.png"));
  EXPECT_EQ(g.rows, 2);
  EXPECT_EQ(g.cols, 3);
  EXPECT_EQ(g.pixels, grey);
  std::vector<uint8_t> rgb;  // white, black, white / black, white, black
  for (int i = 0; i < 6; ++i) rgb.insert(rgb.end(), 3, uint8_t(i % 2 ? 0 : 255));
  write_png("rgb.png", PNG_FORMAT_RGB, rgb);
  EXPECT_EQ(read_png(d.path("rgb.png")).pixels, (std::vector<uint8_t>{255, 0, 255, 0, 255, 0}));
  std::ofstream(d.path("a.pgm"), std::ios::binary) << "P2 1 1 15\n15\n";
  EXPECT_EQ(read_image(d.path("a.pgm")).pixels, (std::vector<uint8_t>{255}));
  const std::string bytes = test::read_text(d.path("grey.png"));
  std::ofstream(d.path("cut.png"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::ofstream(d.path("not.png"), std::ios::binary) << "\x89PNG\r\n\x1a\nnot a chunk";
  for (const char* bad : {"cut.png", "not.png", "absent.png"}) EXPECT_THROW(read_image(d.path(bad)), IdxError) << bad;
}

// Augmentation: each augmented image must be its source image mirrored and/or moved by at most
// `shift` pixels with zero fill — checked here against every candidate (dy, dx, mirror) written
// out directly, not against the recipe's own loop — and the draws depend on (seed, step) only.
TEST(VitAugment, MirrorsAndShiftsWithZeroFillFromTheSeedAndStepAlone) {
  ImageSet set{.n = 64, .rows = 5, .cols = 6, .pixels = {}, .labels = std::vector<uint8_t>(64, 0)};
  std::mt19937 rng(3);
  for (int64_t i = 0; i < set.n * 30; ++i) set.pixels.push_back(uint8_t(1 + rng() % 255));  // no 0: fill is visible
  std::vector<int64_t> items(size_t(set.n));
  for (int64_t i = 0; i < set.n; ++i) items[size_t(i)] = (i * 7) % set.n;
  const auto px = [&](int64_t item, int64_t y, int64_t c) {
    return float(set.pixels[size_t(item * 30 + y * 6 + c)]) / 255;
  };
  // Which (mirror, dy, dx) turns image `item` into `out`? -1 when none with |dy|, |dx| ≤ shift does.
  const auto transform_of = [&](const float* out, int64_t item, int64_t shift) {
    for (int mirror = 0; mirror < 2; ++mirror)
      for (int64_t dy = -shift; dy <= shift; ++dy)
        for (int64_t dx = -shift; dx <= shift; ++dx) {
          bool same = true;
          for (int64_t y = 0; y < 5 && same; ++y)
            for (int64_t c = 0; c < 6 && same; ++c) {
              const int64_t sy = y - dy, sc = c - dx;  // position before the move, in the (mirrored) image
              const float want = sy < 0 || sy >= 5 || sc < 0 || sc >= 6 ? 0.0f : px(item, sy, mirror ? 5 - sc : sc);
              same = out[y * 6 + c] == want;
            }
          if (same) return int((mirror * 5 + dy + 2) * 5 + dx + 2);
        }
    return -1;
  };
  const Tensor plain = recipes::augmented_batch(set, items, 0.0f, 0, 1, 0);
  EXPECT_EQ(std::vector<float>(plain.data(), plain.data() + plain.numel()), [&] {
    const Tensor t = recipes::image_batch(set, items);
    return std::vector<float>(t.data(), t.data() + t.numel());
  }());
  const Tensor mirrored = recipes::augmented_batch(set, items, 1.0f, 0, 1, 0);
  for (int64_t i = 0; i < set.n; ++i)
    EXPECT_EQ(transform_of(mirrored.data() + i * 30, items[size_t(i)], 0), (5 + 2) * 5 + 2);  // mirror, dy = dx = 0
  const Tensor a = recipes::augmented_batch(set, items, 0.5f, 2, 1, 9);
  std::set<int> seen;
  for (int64_t i = 0; i < set.n; ++i) {
    const int t = transform_of(a.data() + i * 30, items[size_t(i)], 2);
    ASSERT_GE(t, 0) << "image " << i << " is not a mirror/shift of its source";
    seen.insert(t);
  }
  EXPECT_GE(seen.size(), 20u) << "64 draws of 50 transforms should hit many of them";
  const Tensor again = recipes::augmented_batch(set, items, 0.5f, 2, 1, 9),
               next = recipes::augmented_batch(set, items, 0.5f, 2, 1, 10);
  EXPECT_TRUE(std::equal(a.data(), a.data() + a.numel(), again.data()));
  EXPECT_FALSE(std::equal(a.data(), a.data() + a.numel(), next.data()));
}

TEST(Vit, GgufRoundTripGivesTheSameLogits) {
  TrainDir d;
  std::unique_ptr<VitModel> m = VitModel::random(tiny_hparams(), 3);
  std::mt19937 rng(5);
  const Tensor images = test::randn({2, 1, 8, 8}, rng);
  m->write_gguf(d.path("unnamed.gguf"), "tiny");
  EXPECT_TRUE(VitModel::load(gguf::GgufFile::open(d.path("unnamed.gguf")))->class_names().empty());
  EXPECT_THROW(m->set_class_names({"cat", "dog"}), std::invalid_argument);  // 3 classes
  m->set_class_names({"cat", "dog", "bird"});
  m->write_gguf(d.path("vit.gguf"), "tiny");
  std::unique_ptr<VitModel> back = VitModel::load(gguf::GgufFile::open(d.path("vit.gguf")));
  EXPECT_EQ(back->hparams().patch_size, 4);
  EXPECT_EQ(back->hparams().n_class, 3);
  EXPECT_EQ(back->class_names(), (std::vector<std::string>{"cat", "dog", "bird"}));
  NoGrad ng;
  EXPECT_EQ(m->forward(images).to_vector(), back->forward(images).to_vector());
  EXPECT_EQ(m->forward(images).shape(), (Shape{2, 3}));
  EXPECT_THROW(m->forward(test::randn({2, 1, 9, 9}, rng)), ShapeError);

  // A file that lacks a tensor, or whose keys do not fit together, is refused naming the problem.
  const auto file = gguf::GgufFile::open(d.path("vit.gguf"));  // the writer points into its tensors
  gguf::GgufWriter w = gguf::copy_of(*file);
  w.set("vit.patch_size", gguf::Value::of_u32(3));  // does not divide 8
  w.write(d.path("bad.gguf"));
  EXPECT_THROW(VitModel::load(gguf::GgufFile::open(d.path("bad.gguf"))), gguf::GgufError);
  gguf::GgufWriter two_names = gguf::copy_of(*file);
  two_names.set("vit.class_names", gguf::Value::of_strings({"cat", "dog"}));  // 3 classes
  two_names.write(d.path("two_names.gguf"));
  EXPECT_THROW(VitModel::load(gguf::GgufFile::open(d.path("two_names.gguf"))), gguf::GgufError);
  VitHparams odd = tiny_hparams();
  odd.n_head = 3;  // does not divide d_model 8
  EXPECT_THROW(VitModel::random(odd, 1), std::invalid_argument);
}

// The class token is the first token: with causal attention it would see only itself and the
// logits could not depend on the image. Changing one pixel of the last patch must change them.
TEST(Vit, TheClassTokenSeesEveryPatch) {
  std::unique_ptr<VitModel> m = VitModel::random(tiny_hparams(), 4);
  std::mt19937 rng(6);
  Tensor images = test::randn({1, 1, 8, 8}, rng);
  NoGrad ng;
  const std::vector<float> before = m->forward(images).to_vector();
  images.data_mut()[63] += 1.0f;  // the bottom-right pixel: the last patch
  const std::vector<float> after = m->forward(images).to_vector();
  double change = 0;
  for (size_t k = 0; k < before.size(); ++k) change += std::fabs(after[k] - before[k]);
  EXPECT_GT(change, 1e-5);
}

// A tiny ViT on 2000 training images for 60 steps (about a second of CPU): the test accuracy on 500
// test images must rise well above chance (10%); a run stopped and resumed ends with the same
// bytes as one run straight through; `toy eval` reports the accuracy the run reported; `toy infer`
// prints probabilities; missing or malformed data are input errors (exit 3).
TEST(VitCli, TrainsAboveChanceResumesBitIdenticallyAndEvalAgrees) {
  if (!fs::exists(std::string(kFashion) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << kFashion << " is missing (Debian: dataset-fashion-mnist; scripts/setup.sh installs it)";
  TrainDir d;
  const std::string tiny =
      " --train-images 2000 --test-images 500 --steps 60 --batch 32 --patch 7 --d-model 32"
      " --layers 2 --heads 2 --ff 64 --lr 5e-3 --warmup 5 --log-every 10 --runs-dir " +
      d.path("runs");
  const auto straight = test::run_toy("train vit" + tiny + " --run-id a");
  ASSERT_EQ(straight.code, 0) << straight.err;
  EXPECT_NE(straight.out.find("step 10: loss="), std::string::npos) << straight.out;
  const auto first = test::run_toy("train vit" + tiny + " --run-id b --stop-after 20 --threads 1");
  ASSERT_EQ(first.code, 0) << first.err;
  // `toy train --resume` reads the recipe from config.json: a vit run continues as one, and
  // refuses toy train's settings (a vit run has none of them to change).
  EXPECT_EQ(test::run_toy("train --resume " + d.path("runs/b") + " --steps 30").code, 2);
  const auto second = test::run_toy("train --resume " + d.path("runs/b") + " --stop-after 40");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("step 30: loss="), std::string::npos) << second.out;
  const auto rest = test::run_toy("train vit --resume " + d.path("runs/b"));
  ASSERT_EQ(rest.code, 0) << rest.err;
  const fs::path a = d.dir / "runs/a", b = d.dir / "runs/b";
  EXPECT_EQ(test::read_bytes(a / "weights/final.gguf"), test::read_bytes(b / "weights/final.gguf"));
  // A run killed before its first checkpoint (its config.json and an empty log) trains again from
  // step 0 on --resume, to the same bytes (issue #37 item 5).
  const fs::path k = d.dir / "runs/killed";
  fs::create_directories(k);
  fs::copy_file(a / "config.json", k / "config.json");
  std::ofstream(k / "events.jsonl");
  const auto again = test::run_toy("train --resume " + k.string());
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.err.find("has no checkpoint yet"), std::string::npos) << again.err;
  EXPECT_EQ(test::read_bytes(a / "weights/final.gguf"), test::read_bytes(k / "weights/final.gguf"));
  EXPECT_TRUE(fs::exists(a / "loss.svg"));
  EXPECT_NE(test::read_text(a / "accuracy.svg").find("test accuracy"), std::string::npos);
  EXPECT_NE(test::read_text(a / "confusion.txt").find("Ankle boot"), std::string::npos);
  EXPECT_NE(test::read_text(a / "confusion.svg").find("Ankle boot"), std::string::npos);
  EXPECT_EQ(VitModel::load(gguf::GgufFile::open((a / "weights/final.gguf").string()))->class_names().back(),
            "Ankle boot");

  const nlohmann::json end = test::events_of(a).back();
  ASSERT_EQ(end["kind"], "run_end");
  EXPECT_EQ(end["reason"], "completed");
  const double accuracy = end["accuracy"].get<double>();
  EXPECT_GT(accuracy, 0.3) << "chance is 0.1";

  const auto eval =
      test::run_toy("eval " + (a / "weights/final.gguf").string() + " --images " + kFashion + " --n-images 500 --json");
  ASSERT_EQ(eval.code, 0) << eval.err;
  const nlohmann::json j = nlohmann::json::parse(eval.out);
  EXPECT_EQ(j["n"], 500);
  EXPECT_EQ(j["accuracy"].get<double>(), accuracy);
  const auto text =
      test::run_toy("eval " + (a / "weights/final.gguf").string() + " --images " + kFashion + " --n-images 500");
  EXPECT_NE(text.out.find("confusion matrix"), std::string::npos) << text.out;

  const auto infer = test::run_toy("infer " + (a / "weights/final.gguf").string() + " --image 0");
  ASSERT_EQ(infer.code, 0) << infer.err;
  EXPECT_NE(infer.out.find("test image 0, labelled 9 (Ankle boot)"), std::string::npos) << infer.out;
  EXPECT_NE(infer.out.find("%"), std::string::npos) << infer.out;
  EXPECT_EQ(test::run_toy("infer " + (a / "weights/final.gguf").string() + " --image 10000").code, 2);
  EXPECT_EQ(test::run_toy("infer " + (a / "weights/final.gguf").string() + " --image " + d.path("no.pgm")).code, 3);
  png_image image{};  // a 28×28 PNG: classified like a PGM
  image.version = PNG_IMAGE_VERSION;
  image.width = 28, image.height = 28, image.format = PNG_FORMAT_GRAY;
  const std::vector<uint8_t> grey(28 * 28, 200);
  ASSERT_TRUE(png_image_write_to_file(&image, d.path("grey.png").c_str(), 0, grey.data(), 0, nullptr));
  const auto png = test::run_toy("infer " + (a / "weights/final.gguf").string() + " --image " + d.path("grey.png"));
  EXPECT_EQ(png.code, 0) << png.err;
  EXPECT_NE(png.out.find("%"), std::string::npos) << png.out;

  // Missing and malformed data: exit 3, naming the file.
  const auto missing = test::run_toy("train vit" + tiny + " --run-id c --data " + d.path("nothing"));
  EXPECT_EQ(missing.code, 3) << missing.err;
  EXPECT_NE(missing.err.find("no such file"), std::string::npos) << missing.err;
  fs::create_directories(d.path("bad"));
  write_idx(d.path("bad/train-images-idx3-ubyte.gz"), {10, 28, 28}, std::string(100, '\x01'), true);
  const auto bad = test::run_toy("train vit" + tiny + " --run-id c --data " + d.path("bad"));
  EXPECT_EQ(bad.code, 3) << bad.err;
  EXPECT_NE(bad.err.find("train-images-idx3-ubyte.gz: ends before its 7840 values"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(d.dir / "runs/c"));  // a run that cannot start leaves no directory
  EXPECT_EQ(test::run_toy("eval " + (a / "weights/final.gguf").string() + " --images " + d.path("bad")).code, 3);
}
