// tests/test_warm_start.cpp — `toy train warm-start`: the donor's embedding through a learned lens,
// folded into an ordinary checkpoint (recipes/warm_start.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/engines/train.h"
#include "toy/io/gguf.h"
#include "toy/primitives/primitives.h"
#include "toy/tokenizer/tokenizer.h"
#include "train_helpers.h"

using namespace toy;
using namespace toy::test;

namespace {

// IEEE half -> float, written out (not toy's conversion: the test checks toy).
double half_to_double(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  const double m = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -m : m;
}

// A Q8_0 matrix [rows, cols] from its bytes: blocks of 32 values, a half scale d then 32 int8 q, x = d·q.
std::vector<double> dequantize_q8_0(const uint8_t* p, int64_t rows, int64_t cols) {
  std::vector<double> x(size_t(rows * cols));
  for (int64_t b = 0; b < rows * cols / 32; ++b, p += 34) {
    uint16_t d;
    std::memcpy(&d, p, 2);
    for (int i = 0; i < 32; ++i) x[size_t(b * 32 + i)] = half_to_double(d) * int8_t(p[2 + i]);
  }
  return x;
}

std::vector<float> f32_tensor(const gguf::GgufFile& f, const std::string& name, Shape shape) {
  const gguf::TensorInfo* ti = f.find_tensor(name);
  EXPECT_TRUE(ti) << name;
  if (!ti) return {};
  EXPECT_EQ(ti->dtype, DType::F32) << name;
  EXPECT_EQ(ti->shape, shape) << name;
  const float* p = reinterpret_cast<const float*>(f.tensor_data(*ti));
  return std::vector<float>(p, p + ti->shape[0] * ti->shape[1]);
}

// A donor: a random llama of width 64 over the byte-level vocabulary, written as Q8_0.
std::string write_donor(const TrainDir& d) {
  auto m = random_model({.arch = "llama",
                         .n_vocab = 260,
                         .d_model = 64,
                         .n_layer = 1,
                         .n_head = 2,
                         .n_kv_head = 2,
                         .d_ff = 128,
                         .n_ctx = 64,
                         .tied_output = true,
                         .keys = {}},
                        7);
  const std::string path = d.path("donor.gguf");
  write_model_gguf(*m, Tokenizer::byte_level().get(), path, "donor", {.file_type = "Q8_0", .metadata = {}});
  return path;
}

}  // namespace

// embedding() of a table carrying a low-rank term returns W[id] + s·B[id]·A (written out here).
TEST(WarmStart, EmbeddingAddsTheLowRankRows) {
  Tensor W = Tensor::empty({5, 3}), B = Tensor::empty({5, 2}), A = Tensor::empty({2, 3});
  for (Tensor* t : {&W, &B, &A})
    for (int64_t i = 0; i < t->numel(); ++i) t->data_mut()[i] = float((i * 7 + t->numel()) % 11) / 4 - 1;
  const Tensor E = with_low_rank(W, {.terms = {{.A = A, .B = B, .scale = 0.5f}}, .dropout = {}, .id = 0});
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  const std::vector<float> y = embedding(E, Tensor::from_ids({4}, ids)).to_vector();  // [4, 3]
  ASSERT_EQ(y.size(), 12u);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int j = 0; j < 3; ++j) {
      double want = W.data()[ids[t] * 3 + j];
      for (int k = 0; k < 2; ++k) want += 0.5 * B.data()[ids[t] * 2 + k] * A.data()[k * 3 + j];
      EXPECT_NEAR(y[t * 3 + size_t(j)], want, 1e-6) << "row " << t << ", column " << j;
    }
}

// The checkpoint holds token_embd = c·donor·lens (checked against a naive product of the donor's Q8_0
// bytes and the lens in the optimizer state), an untied output.weight and the donor's vocabulary;
// `toy infer` runs it; a run stopped after 3 steps and resumed gives the same bytes as one that
// never stopped (the lens comes back from the optimizer state).
TEST(WarmStart, FoldsTheLensIntoAPlainCheckpointAndResumesExactly) {
  TrainDir d;
  const std::string donor = write_donor(d), corpus = write_corpus(d);
  const std::string base = "train warm-start --donor " + donor + " --corpus " + corpus + kTiny +
                           " --steps 6 --eval-every 0 --checkpoint-every 3 --runs-dir " + d.path("runs");
  auto full = run_toy(base + " --run-id full");
  ASSERT_EQ(full.code, 0) << full.err;
  auto part = run_toy(base + " --stop-after 3 --run-id part");
  ASSERT_EQ(part.code, 0) << part.err;
  auto rest = run_toy("train --resume " + d.path("runs/part") + " --no-progress");
  ASSERT_EQ(rest.code, 0) << rest.err;
  auto joined = loss_lines(part.out);
  for (const auto& l : loss_lines(rest.out)) joined.push_back(l);
  const auto lines = loss_lines(full.out);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(joined, lines);
  EXPECT_LT(loss_of(lines.back()), loss_of(lines.front()));
  for (const char* w : {"step-6.gguf", "step-6.optim.gguf"})
    EXPECT_EQ(read_bytes(d.dir / "runs/full/weights" / w), read_bytes(d.dir / "runs/part/weights" / w)) << w;

  // With --train-embd the new model's own table W trains too, and the file holds W + c·E·lens.
  auto own = run_toy(base + " --train-embd --run-id own");
  ASSERT_EQ(own.code, 0) << own.err;

  auto donor_file = gguf::GgufFile::open(donor);
  const gguf::TensorInfo* de = donor_file->find_tensor("token_embd.weight");
  ASSERT_TRUE(de);
  ASSERT_EQ(de->dtype, DType::Q8_0);
  const std::vector<double> E =
      dequantize_q8_0(static_cast<const uint8_t*>(donor_file->tensor_data(*de)), 260, 64);  // [260, 64]
  double sum_sq = 0;  // token_embd = W + c·E·lens with c = 32 / (rms(E)·√donor_d) (recipes/warm_start.h)
  for (double e : E) sum_sq += e * e;
  const double c = 32 / (std::sqrt(sum_sq / double(E.size())) * std::sqrt(64.0));
  for (const char* run : {"full", "own"}) {
    SCOPED_TRACE(run);
    const fs::path weights = d.dir / "runs" / run / "weights";
    auto ckpt = gguf::GgufFile::open((weights / "step-6.gguf").string());
    auto optim = gguf::GgufFile::open((weights / "step-6.optim.gguf").string());
    const std::vector<float> lens = f32_tensor(*optim, "optim.w.token_embd.lens", {64, 32});
    const std::vector<float> folded = f32_tensor(*ckpt, "token_embd.weight", {260, 32});
    std::vector<float> W(260 * 32, 0.0f);  // frozen at zero, unless trained: then in the optimizer state
    if (std::string(run) == "own") W = f32_tensor(*optim, "optim.w.token_embd.weight", {260, 32});
    ASSERT_EQ(lens.size(), 64u * 32);
    ASSERT_EQ(folded.size(), 260u * 32);
    ASSERT_EQ(W.size(), 260u * 32);
    double worst = 0, largest = 0, largest_w = 0;
    for (int v = 0; v < 260; ++v)
      for (int j = 0; j < 32; ++j) {
        double sum = W[size_t(v * 32 + j)];
        for (int k = 0; k < 64; ++k) sum += c * E[size_t(v * 64 + k)] * lens[size_t(k * 32 + j)];
        worst = std::max(worst, std::abs(sum - folded[size_t(v * 32 + j)]));
        largest = std::max(largest, std::abs(sum));
        largest_w = std::max(largest_w, double(std::abs(W[size_t(v * 32 + j)])));
      }
    EXPECT_GT(largest, 1e-3);
    EXPECT_LE(worst, 1e-6 * largest);  // f32 sums of 64 products
    EXPECT_EQ(largest_w > 0, std::string(run) == "own");
  }

  auto ckpt = gguf::GgufFile::open((d.dir / "runs/full/weights/step-6.gguf").string());
  const std::vector<float> folded = f32_tensor(*ckpt, "token_embd.weight", {260, 32});
  const std::vector<float> output = f32_tensor(*ckpt, "output.weight", {260, 32});
  EXPECT_NE(output, folded);  // untied, trained on its own
  for (const auto& t : ckpt->tensors()) EXPECT_EQ(t.name.find("lens"), std::string::npos) << t.name;
  EXPECT_EQ(Tokenizer::from_gguf(*ckpt)->n_vocab(), 260);
  EXPECT_EQ(events_of(d.dir / "runs/full").front()["config"]["donor"], donor);

  auto infer = run_toy("infer " + (d.dir / "runs/full/weights/final.gguf").string() + " --prompt Tom -n 4 --temp 0");
  EXPECT_EQ(infer.code, 0) << infer.err;
  EXPECT_FALSE(infer.out.empty());
}

TEST(WarmStart, BadDonorIsAClearError) {
  TrainDir d;
  const std::string donor = write_donor(d), corpus = write_corpus(d);
  const std::string tail = " --corpus " + corpus + kTiny + " --steps 2 --runs-dir " + d.path("runs");
  auto expect = [&](const std::string& args, int code, const std::string& says) {
    SCOPED_TRACE(args);
    auto r = run_toy("train " + args + tail);
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  expect("warm-start --donor " + d.path("missing.gguf"), 3, "missing.gguf: no such file");
  {
    gguf::GgufWriter w;  // a GGUF without tokenizer.ggml.*
    w.set("general.architecture", gguf::Value::of_string("llama"));
    w.write(d.path("novocab.gguf"));
  }
  expect("warm-start --donor " + d.path("novocab.gguf"), 3, "no vocabulary");
  const std::string other_vocab = std::string(TOY_SOURCE_DIR) + "/models/toy-stories.gguf";
  expect("warm-start --donor " + donor + " --tokenizer " + other_vocab, 3, "is not the vocabulary of --donor");
  expect("warm-start", 2, "needs --donor");
  expect("from-scratch --donor " + donor, 2, "--donor is for the warm-start recipe");
  expect("from-scratch --train-embd", 2, "--train-embd is for the warm-start recipe");
  expect("warm-start --donor " + donor + " --init-weights " + donor, 2, "--init-weights");
  // A resumed run whose donor has gone.
  ASSERT_EQ(run_toy("train warm-start --donor " + donor + tail + " --stop-after 1 --run-id r").code, 0);
  std::filesystem::rename(donor, d.path("moved.gguf"));
  auto r = run_toy("train --resume " + d.path("runs/r") + " --no-progress");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("donor.gguf: no such file"), std::string::npos) << r.err;
}
