// tests/test_archs.cpp — architecture-specific checks beyond the per-file parity test
// (test_models.cpp): the 200-position references in one batch and through the KV cache, the
// sliding window, Gemma-2's hyper-parameter rules, MoE routing and expert slabs, errors that
// name a missing tensor, GGUF round trips, what llama.cpp needs of a new model, and gradients of
// the primitives the new architectures added (indexing.h, routing.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "fixtures.h"
#include "helpers.h"
#include "toy/archs/gemma2.h"
#include "toy/archs/model.h"
#include "toy/blocks/moe.h"
#include "toy/engines/decode.h"
#include "toy/engines/train.h"
#include "toy/primitives/indexing.h"
#include "toy/primitives/routing.h"

using namespace toy;
using test::nmse;
using test::randn;
namespace fs = std::filesystem;

namespace {

bool supported(const std::string& arch) {
  for (const Architecture& a : architectures())
    if (arch == a.name) return true;
  return false;
}

// A `*.long.ref.json` reference: 200 tokens and their logits [200, V], computed in one batch.
struct LongRef {
  std::string arch;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

LongRef read_long(const fs::path& json) {
  auto ref = nlohmann::json::parse(test::read_text(json));
  LongRef r{ref["architecture"], ref["prompt_tokens"].get<std::vector<int32_t>>(), {}};
  std::vector<uint8_t> raw = test::read_bytes(json.parent_path() / ref["logits_file"].get<std::string>());
  r.logits.resize(raw.size() / 4);
  std::memcpy(r.logits.data(), raw.data(), raw.size());
  return r;
}

// All rows of one causal batch, without a KV cache (the training path).
std::vector<float> forward_batch(const Model& m, std::span<const int32_t> tokens) {
  NoGrad ng;
  return m.forward(Tensor::from_ids({1, int64_t(tokens.size())}, tokens), Ctx{}).to_vector();
}

// The same rows fed through the KV cache in chunks of the given sizes (cycled).
std::vector<float> forward_chunked(const Model& m, std::span<const int32_t> tokens, std::vector<size_t> chunks) {
  DecodeEngine engine(m);
  std::vector<float> out;
  for (size_t at = 0, i = 0; at < tokens.size(); ++i) {
    const size_t n = std::min(chunks[i % chunks.size()], tokens.size() - at);
    auto v = engine.feed(tokens.subspan(at, n)).to_vector();
    out.insert(out.end(), v.begin(), v.end());
    at += n;
  }
  return out;
}

std::unique_ptr<Model> load(const fs::path& p) { return load_model(gguf::GgufFile::open(p.string())); }

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/toy_archs_" + std::to_string(::getpid()) + "_" + name;
}

// A copy of `in` with `edit` applied to the writer (metadata set after the copy wins).
std::string rewrite(const fs::path& in, const std::string& name, const std::function<void(gguf::GgufWriter&)>& edit) {
  auto f = gguf::GgufFile::open(in.string());
  gguf::GgufWriter w = gguf::copy_of(*f);
  edit(w);
  const std::string out = temp_path(name);
  w.write(out);
  return out;
}

}  // namespace

// --- long references -----------------------------------------------------------------------

namespace {
// 200 positions is longer than gemma2's window of 8, so the window is exercised far past its
// edge; the chunked run crosses the window with the KV cache at every possible offset.
void check_long_references(Device device) {
  int run = 0;
  for (const fs::path& p : test::fixture_files("models", ".json")) {
    const std::string name = p.filename().string();
    if (name.size() < 14 || name.substr(name.size() - 14) != ".long.ref.json") continue;
    const LongRef ref = read_long(p);
    if (!supported(ref.arch)) continue;
    SCOPED_TRACE(name + " on " + to_string(device));
    const fs::path model_path = p.parent_path() / name.substr(0, name.size() - 14);
    auto model = load(model_path);
    model->to(device);
    const double batch = nmse(ref.logits, forward_batch(*model, ref.tokens));
    const double chunked = nmse(ref.logits, forward_chunked(*model, ref.tokens, {37, 1, 5, 1, 1, 12, 3}));
    EXPECT_LE(batch, 1e-8);
    EXPECT_LE(chunked, 1e-8);
    std::printf("  %-28s %-7s %-8s 200 rows: one batch nmse %.2e, through the cache %.2e\n",
                model_path.filename().c_str(), ref.arch.c_str(), to_string(device).c_str(), batch, chunked);
    ++run;
  }
  if (run == 0) GTEST_SKIP() << "no long references under " << test::fixtures_dir();
}
}  // namespace

TEST(LongReference, OneBatchAndThroughTheCache) { check_long_references(Device::cpu()); }

#ifdef TOY_VULKAN
// The same on vulkan:0 (lavapipe in CI), the same limits.
TEST(LongReference, OnVulkanOneBatchAndThroughTheCache) {
  TOY_REQUIRE_VULKAN();
  check_long_references(Device::vulkan(0));
}
#endif

// --- KV cache ------------------------------------------------------------------------------

// An F16 cache takes half the memory of an F32 one and hands attention the halves of what was
// stored; attention over them equals attention over f32 copies of the same halves, bit for bit,
// on both of its paths (a 20-token prompt batch, then a decode step), with a window and a cap.
TEST(KvCache, F16HalvesTheMemoryAndAttentionReadsTheHalves) {
  KvCache f32(2, 64, 2, 32), f16(2, 64, 2, 32, DType::F16);
  EXPECT_EQ(f32.bytes(), size_t(2 * 2 * 64 * 2 * 32) * 4);  // layers × (K, V) × n_ctx × Hkv × Dh × 4 bytes
  EXPECT_EQ(f16.bytes() * 2, f32.bytes());
  EXPECT_THROW(KvCache(2, 64, 2, 32, DType::Q8_0), std::invalid_argument);
  std::mt19937_64 rng(11);
  int64_t pos0 = 0;
  for (int64_t T : {20, 1}) {
    const Tensor q = randn({1, T, 4, 32}, rng), k = randn({1, T, 2, 32}, rng), v = randn({1, T, 2, 32}, rng);
    auto [K, V] = f16.store(1, pos0, k, v);
    pos0 += T;
    ASSERT_EQ(K.dtype(), DType::F16);
    ASSERT_EQ(K.shape(), (Shape{1, pos0, 2, 32}));
    const Tensor Kf = Tensor::from(K.shape(), K.to_vector()), Vf = Tensor::from(V.shape(), V.to_vector());
    for (int64_t i = 0; i < k.numel(); ++i) {  // the new rows hold the halves of k and v
      ASSERT_EQ(Kf.data()[(pos0 - T) * 64 + i], fp16_to_f32(f32_to_fp16(k.data()[i])));
      ASSERT_EQ(Vf.data()[(pos0 - T) * 64 + i], fp16_to_f32(f32_to_fp16(v.data()[i])));
    }
    for (const AttentionOptions& o :
         {AttentionOptions{.scale = 0.18f}, AttentionOptions{.scale = 0.18f, .softcap = 5, .window = 8}})
      EXPECT_EQ(attention(q, K, V, o).to_vector(), attention(q, Kf, Vf, o).to_vector()) << "T " << T;
  }
}

// --- gemma2 --------------------------------------------------------------------------------

// rope against its formula in double, for a run of calls whose positions, base, n_rot, pairing
// and frequency factors change one at a time (each forward pass builds its own angle table: a
// table kept from an earlier call would show here).
TEST(Rope, MatchesTheFormulaWhateverCameBefore) {
  const int64_t H = 2, Dh = 8;
  std::vector<float> xs(size_t(2 * 3 * H * Dh));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.7f * float(i)) + 0.1f;
  const Tensor x = Tensor::from({2, 3, H, Dh}, xs);
  const std::vector<float> f1 = {1, 2, 4, 8}, f2 = {1, 2, 4, 9};
  struct Case {
    std::vector<int32_t> pos;
    Rope r;
  };
  const std::vector<Case> cases = {
      {{0, 1, 2, 5, 6, 7}, {.mode = RopeMode::Norm, .n_rot = 8, .base = 10000.0f, .freq_factors = {}}},
      {{0, 1, 2, 5, 6, 7}, {.mode = RopeMode::Norm, .n_rot = 8, .base = 10000.0f, .freq_factors = {}}},  // reused
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Norm, .n_rot = 8, .base = 10000.0f, .freq_factors = {}}},
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Norm, .n_rot = 8, .base = 500.0f, .freq_factors = {}}},
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Neox, .n_rot = 8, .base = 500.0f, .freq_factors = {}}},
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Neox, .n_rot = 4, .base = 500.0f, .freq_factors = {}}},
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Neox, .n_rot = 8, .base = 500.0f, .freq_factors = Tensor::from({4}, f1)}},
      {{0, 1, 2, 5, 6, 8}, {.mode = RopeMode::Neox, .n_rot = 8, .base = 500.0f, .freq_factors = Tensor::from({4}, f2)}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Rope& r = cases[c].r;
    const Tensor y = rope(x, rope_angles(Tensor::from_ids({2, 3}, cases[c].pos), r));
    const int64_t half = r.n_rot / 2;
    for (int64_t bt = 0; bt < 6; ++bt)
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = xs.data() + (bt * H + h) * Dh;
        const float* yi = y.data() + (bt * H + h) * Dh;
        std::vector<double> want(xi, xi + Dh);
        for (int64_t i = 0; i < half; ++i) {
          double theta = cases[c].pos[size_t(bt)] * std::pow(double(r.base), -2.0 * double(i) / double(r.n_rot));
          if (r.freq_factors.defined()) theta /= r.freq_factors.data()[i];
          const int64_t a = r.mode == RopeMode::Norm ? 2 * i : i, b = r.mode == RopeMode::Norm ? a + 1 : i + half;
          want[size_t(a)] = xi[a] * std::cos(theta) - xi[b] * std::sin(theta);
          want[size_t(b)] = xi[a] * std::sin(theta) + xi[b] * std::cos(theta);
        }
        for (int64_t d = 0; d < Dh; ++d)
          ASSERT_NEAR(yi[d], want[size_t(d)], 1e-5) << "case " << c << " bt " << bt << " d " << d;
      }
  }
}

TEST(Gemma2, SlidingWindowMasksEvenLayers) {
  TOY_REQUIRE_FIXTURE(path, "models/gemma2/gemma2-f32.gguf");
  auto model = load(path);
  const auto f = gguf::GgufFile::open(path.string());
  const Description hp = find_architecture("gemma2")->describe(f->metadata(), model->config().n_vocab, true, {});
  EXPECT_EQ(hp.value("attention.sliding_window"), 8);
  EXPECT_EQ(hp.value("attention.sliding_window_pattern"), 2);  // layers 0, 2, … local; 1, 3, … global
  // The same file with a window as long as the context: every layer global. The long reference
  // must then be far off (README ablation no_swa: 1.2), i.e. the window really masks.
  const LongRef ref = read_long(path.string() + ".long.ref.json");
  const std::string wide = rewrite(path, "gemma2_wide.gguf", [](gguf::GgufWriter& w) {
    w.set("gemma2.attention.sliding_window", gguf::Value::of_u32(256));
  });
  EXPECT_GT(nmse(ref.logits, forward_batch(*load(wide), ref.tokens)), 1e-2);
  EXPECT_LE(nmse(ref.logits, forward_batch(*model, ref.tokens)), 1e-8);
}

TEST(Gemma2, AttentionWindowPrimitive) {
  // q = 0 makes every visible key equally likely, so each output is the mean of the visible v.
  const int64_t T = 5;
  std::vector<float> vals(T);
  for (int64_t t = 0; t < T; ++t) vals[size_t(t)] = float(t + 1);
  Tensor q = Tensor::zeros({1, T, 1, 1}), v = Tensor::from({1, T, 1, 1}, vals);
  Tensor o = attention(q, q, v, {.scale = 1.0f, .window = 2});
  const std::vector<float> want = {1.0f, 1.5f, 2.5f, 3.5f, 4.5f};  // key t−1 and t only
  for (int64_t t = 0; t < T; ++t) EXPECT_FLOAT_EQ(o.data()[t], want[size_t(t)]) << "t = " << t;
}

// Gemma-2 27B (46 layers) is llama.cpp's one exception to the 1/√d_head scale; check the rule and
// the defaults of keys the converter leaves out, on a file with metadata and a token table only.
TEST(Gemma2, HparamsScaleRuleAndDefaults) {
  using gguf::Value;
  auto describe = [](int64_t n_layer) {
    const Metadata meta = {{"gemma2.context_length", Value::of_u32(64)},
                           {"gemma2.embedding_length", Value::of_u32(128)},
                           {"gemma2.block_count", Value::of_u32(uint32_t(n_layer))},
                           {"gemma2.feed_forward_length", Value::of_u32(256)},
                           {"gemma2.attention.head_count", Value::of_u32(4)},
                           {"gemma2.attention.head_count_kv", Value::of_u32(2)},
                           {"gemma2.attention.key_length", Value::of_u32(16)},
                           {"gemma2.attention.value_length", Value::of_u32(16)},
                           {"gemma2.attention.layer_norm_rms_epsilon", Value::of_f32(1e-6f)}};
    return find_architecture("gemma2")->describe(meta, 8, true, {});
  };
  const Description h45 = describe(45), h46 = describe(46);
  EXPECT_FLOAT_EQ(gemma2_attention_scale(h45.config), 1.0f / std::sqrt(16.0f));  // 1/√d_head
  EXPECT_FLOAT_EQ(gemma2_attention_scale(h46.config), 1.0f / std::sqrt(32.0f));  // 1/√(d_model/n_head)
  EXPECT_EQ(h45.value("attention.sliding_window"), 4096);
  EXPECT_FLOAT_EQ(float(h45.value("attn_logit_softcapping")), 50.0f);
  EXPECT_FLOAT_EQ(float(h45.value("final_logit_softcapping")), 30.0f);
  EXPECT_FLOAT_EQ(float(h45.value("rope.freq_base")), 10000.0f);
  EXPECT_EQ(h45.variant.positions, Positions::RopeNeox);
  EXPECT_EQ(h45.value("attention.sliding_window_pattern"), 2);
}

// --- olmoe / mixture of experts ------------------------------------------------------------

TEST(Moe, RouteTopKWithoutRenormalisation) {
  // Logits log(p) give back p after softmax (the rows already sum to 1).
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.05f, 0.25f, 0.2f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(std::log(v));
  MoeRoute r = moe_route(Tensor::from({2, 4}, logits), 2);
  ASSERT_EQ(r.expert.shape(), (Shape{2, 2}));
  EXPECT_EQ(r.expert.ids()[0], 3);
  EXPECT_EQ(r.expert.ids()[1], 2);
  EXPECT_EQ(r.expert.ids()[2], 0);
  EXPECT_EQ(r.expert.ids()[3], 2);
  // The chosen probabilities as they are: 0.4 + 0.3 = 0.7, not renormalised to 4/7 and 3/7.
  EXPECT_NEAR(r.weight.data()[0], 0.4f, 1e-6);
  EXPECT_NEAR(r.weight.data()[1], 0.3f, 1e-6);
  EXPECT_NEAR(r.weight.data()[2], 0.5f, 1e-6);
  EXPECT_NEAR(r.weight.data()[3], 0.25f, 1e-6);
}

TEST(Moe, TopKTiesGoToTheLowerIndex) {
  Tensor idx = top_k(Tensor::from({1, 5}, std::vector<float>{1, 3, 2, 3, 0}), 3);
  EXPECT_EQ(std::vector<int32_t>(idx.ids(), idx.ids() + 3), (std::vector<int32_t>{1, 3, 2}));
}

// moe_ffn (grouped by expert, zero-copy slabs) against a dense per-token reference in double.
TEST(Moe, FfnMatchesDenseReference) {
  std::mt19937_64 rng(7);
  const int64_t N = 9, D = 8, F = 6, E = 5, k = 2;
  MoeFfnWeights w{randn({E, D}, rng), randn({E, F, D}, rng, 0.3f), randn({E, F, D}, rng, 0.3f),
                  randn({E, D, F}, rng, 0.3f)};
  Tensor x = randn({N, D}, rng);
  Tensor y = moe_ffn(w, {.n_expert = E, .n_expert_used = k}, x);
  auto at = [](const Tensor& t, int64_t i) { return double(t.data()[i]); };
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> p(E);
    double z = 0;
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t d = 0; d < D; ++d) p[size_t(e)] += at(w.ffn_gate_inp, e * D + d) * at(x, n * D + d);
    }
    const double mx = *std::max_element(p.begin(), p.end());
    for (double& v : p) z += v = std::exp(v - mx);
    for (double& v : p) v /= z;
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
    for (int64_t d = 0; d < D; ++d) {
      double want = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = order[size_t(j)];
        double out = 0;
        for (int64_t f = 0; f < F; ++f) {
          double g = 0, u = 0;
          for (int64_t i = 0; i < D; ++i) {
            g += at(w.ffn_gate_exps, (e * F + f) * D + i) * at(x, n * D + i);
            u += at(w.ffn_up_exps, (e * F + f) * D + i) * at(x, n * D + i);
          }
          out += at(w.ffn_down_exps, (e * D + d) * F + f) * g / (1 + std::exp(-g)) * u;
        }
        want += p[size_t(e)] * out;
      }
      EXPECT_NEAR(y.data()[n * D + d], want, 1e-5) << "token " << n << ", d " << d;
    }
  }
}

// Expert e is slab e of the stacked tensor, viewed without a copy, in every dtype of the set.
TEST(Moe, ExpertSlabsAreZeroCopyViewsInEveryDtype) {
  int run = 0;
  for (const char* dt : {"f32", "f16", "bf16", "q8_0", "q4_0"}) {
    const fs::path p = test::fixture(std::string("models/olmoe/olmoe-") + dt + ".gguf");
    if (p.empty()) continue;
    auto f = gguf::GgufFile::open(p.string());
    for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight"}) {
      Tensor W = f->tensor(*f->find_tensor(name));
      ASSERT_EQ(W.shape(), (Shape{8, 128, 128}));
      const std::vector<float> all = W.to_vector();
      const size_t slab_bytes = W.nbytes() / 8;
      for (int64_t e = 0; e < 8; ++e) {
        Tensor s = slab(W, e);
        ASSERT_EQ(s.shape(), (Shape{128, 128}));
        EXPECT_EQ(s.dtype(), W.dtype());
        EXPECT_EQ(s.raw(), static_cast<const char*>(W.raw()) + e * slab_bytes) << dt << " " << name << " expert " << e;
        const std::vector<float> v = s.to_vector();
        ASSERT_TRUE(std::equal(v.begin(), v.end(), all.begin() + e * 128 * 128))
            << dt << " " << name << " expert " << e;
      }
    }
    ++run;
  }
  if (run == 0) GTEST_SKIP() << "olmoe fixtures not found";
}

TEST(Olmoe, MissingOrMisshapedExpertTensorIsNamed) {
  TOY_REQUIRE_FIXTURE(path, "models/olmoe/olmoe-f32.gguf");
  auto f = gguf::GgufFile::open(path.string());
  auto without = [&](const std::string& skip, const std::string& out, bool misshape) {
    gguf::GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    for (const gguf::TensorInfo& t : f->tensors()) {
      if (t.name != skip)
        w.add_tensor(t.name, t.shape, t.dtype, f->tensor_data(t));
      else if (misshape)
        w.add_tensor(t.name, {4, 256, 128}, t.dtype, f->tensor_data(t));  // same bytes, wrong shape
    }
    w.write(temp_path(out));
    return temp_path(out);
  };
  try {
    load(without("blk.1.ffn_up_exps.weight", "olmoe_missing.gguf", false));
    FAIL() << "loading without an expert tensor succeeded";
  } catch (const gguf::GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'blk.1.ffn_up_exps.weight'"), std::string::npos) << e.what();
  }
  try {
    load(without("blk.0.ffn_down_exps.weight", "olmoe_misshaped.gguf", true));
    FAIL() << "loading a mis-shaped expert tensor succeeded";
  } catch (const gguf::GgufError& e) {
    EXPECT_NE(
        std::string(e.what()).find("'blk.0.ffn_down_exps.weight' has shape [4, 256, 128], expected [8, 128, 128]"),
        std::string::npos)
        << e.what();
  }
}

// --- gpt2 ----------------------------------------------------------------------------------

TEST(Gpt2, UsesOutputWeightWhenPresent) {
  TOY_REQUIRE_FIXTURE(path, "models/gpt2/gpt2-f32.gguf");
  auto tied = load(path);
  // An output.weight of 2·token_embd: the logits are linear in it, and ×2 is exact in float.
  auto f = gguf::GgufFile::open(path.string());
  std::vector<float> twice = f->tensor(*f->find_tensor("token_embd.weight")).to_vector();
  for (float& v : twice) v *= 2;
  const std::string untied = rewrite(path, "gpt2_untied.gguf", [&](gguf::GgufWriter& w) {
    w.add_tensor("output.weight", {512, 128}, DType::F32, twice.data());
  });
  const std::vector<int32_t> toks = {1, 200, 300, 17};
  const std::vector<float> a = forward_batch(*tied, toks), b = forward_batch(*load(untied), toks);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_FLOAT_EQ(b[i], 2 * a[i]) << i;
}

TEST(Gpt2, PositionsBeyondTheLearnedTableAreAnError) {
  TOY_REQUIRE_FIXTURE(path, "models/gpt2/gpt2-f32.gguf");
  auto model = load(path);
  NoGrad ng;
  const std::vector<int32_t> toks(10, 5);
  EXPECT_THROW(model->forward(Tensor::from_ids({1, 10}, toks), Ctx{.seqs = {{.pos0 = 250}}}), ShapeError);
  EXPECT_NO_THROW(model->forward(Tensor::from_ids({1, 10}, toks), Ctx{.seqs = {{.pos0 = 246}}}));
}

// --- all three: GGUF round trip through for_each_param and write_metadata -------------------

TEST(Archs, SaveAndReloadGivesTheSameLogits) {
  int run = 0;
  for (const char* rel : {"models/gemma2/gemma2-f32.gguf", "models/gemma2softcap/gemma2softcap-q8_0.gguf",
                          "models/olmoe/olmoe-q4_0.gguf", "models/gpt2/gpt2-bf16.gguf"}) {
    const fs::path p = test::fixture(rel);
    if (p.empty()) continue;
    SCOPED_TRACE(rel);
    auto model = load(p);
    gguf::GgufWriter w;
    model->write_metadata(w);
    std::vector<std::string> names;
    model->for_each_param([&](Tensor& t) {
      names.push_back(t.name());
      w.add_tensor(t.name(), t);
    });
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size())
        << "a parameter was visited twice";
    EXPECT_EQ(names.size(), gguf::GgufFile::open(p.string())->tensors().size());
    const std::string out = temp_path(p.filename().string());
    w.write(out);
    const std::vector<int32_t> toks = {1, 33, 444, 12, 90, 91, 92, 93, 94, 95, 96, 97};
    EXPECT_EQ(forward_batch(*model, toks), forward_batch(*load(out), toks));
    ++run;
  }
  if (run == 0) GTEST_SKIP() << "fixtures not found";
}

// Ctx::hidden_states: every architecture returns its final hidden states [B, T, d_model] (after
// the output norm) instead of logits, and they are what its logits are made of: the output
// projection of them (gemma2 soft-caps after it), row for row; with last_logits, the last row.
TEST(Archs, HiddenStatesAreWhatTheLogitsAreMadeOf) {
  std::vector<std::unique_ptr<Model>> models;
  for (const char* rel :
       {"models/llama32/llama32-f32.gguf", "models/qwen25/qwen25-f32.gguf", "models/qwen3/qwen3-f32.gguf",
        "models/gemma2/gemma2-f32.gguf", "models/olmoe/olmoe-f32.gguf", "models/gpt2/gpt2-f32.gguf",
        "models/qwen35/qwen35-f32.gguf", "models/qwen3next/qwen3next-f32.gguf"})
    if (const fs::path p = test::fixture(rel); !p.empty()) models.push_back(load(p));
  if (models.empty()) GTEST_SKIP() << "fixtures not found";
  models.push_back(random_model(test::tiny_shape("dragon", 64), 3));
  std::set<std::string> covered;
  const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 30};
  const int64_t T = int64_t(ids.size());
  for (const auto& m : models) {
    const ModelConfig& c = m->config();
    SCOPED_TRACE(c.arch);
    NoGrad ng;
    const Tensor tokens = Tensor::from_ids({1, T}, ids);
    const Tensor logits = m->forward(tokens, Ctx{});                                          // [1, T, V]
    const Tensor hidden = m->forward(tokens, Ctx{.hidden_states = true});                     // [1, T, D]
    const Tensor last = m->forward(tokens, Ctx{.last_logits = true, .hidden_states = true});  // [1, 1, D]
    ASSERT_EQ(hidden.shape(), Shape({1, T, c.d_model}));
    ASSERT_EQ(last.shape(), Shape({1, 1, c.d_model}));
    const std::vector<float> h = hidden.to_vector();
    EXPECT_EQ(last.to_vector(), std::vector<float>(h.end() - c.d_model, h.end()));
    Tensor output;  // output.weight, or token_embd.weight when tied
    m->for_each_param([&](Tensor& t) {
      if (t.name() == "output.weight" || (t.name() == "token_embd.weight" && !output.defined())) output = t;
    });
    if (c.arch != "gemma2") {
      EXPECT_EQ(linear(hidden, output).to_vector(), logits.to_vector());
    }
    covered.insert(c.arch);
  }
  EXPECT_EQ(covered.size(), architectures().size()) << "an architecture without a check here";
}

// Training will need gradients for every parameter the walk visits (soft-caps, slabs of the
// stacked experts, the fused QKV split and the learned positions included).
TEST(Archs, EveryParameterGetsAGradient) {
  int run = 0;
  for (const char* rel :
       {"models/gemma2softcap/gemma2softcap-f32.gguf", "models/olmoe/olmoe-f32.gguf", "models/gpt2/gpt2-f32.gguf"}) {
    const fs::path p = test::fixture(rel);
    if (p.empty()) continue;
    SCOPED_TRACE(rel);
    auto model = load(p);
    model->for_each_param([](Tensor& t) { t.requires_grad_(); });
    const std::vector<int32_t> toks = {1, 33, 444, 12, 90, 91, 92, 93};
    Tensor logits = model->forward(Tensor::from_ids({1, 8}, toks), Ctx{});
    cross_entropy(logits.reshape({8, 512}), Tensor::from_ids({8}, std::vector<int32_t>{33, 444, 12, 90, 91, 92, 93, 5}))
        .backward();
    model->for_each_param([](Tensor& t) {
      ASSERT_TRUE(t.grad().defined()) << t.name() << " got no gradient";
      double s = 0;
      for (float g : t.grad().to_vector()) s += std::abs(g);
      EXPECT_GT(s, 0.0) << t.name();
    });
    ++run;
  }
  if (run == 0) GTEST_SKIP() << "fixtures not found";
}

// --- gradients of the new primitives (central differences) ----------------------------------

namespace {

// The recorded gradient of every input against central differences (test::check_gradients),
// with R drawn from seed; these rules chain several ops, so atol 2e-3 and rtol 2e-2.
void check_grad(const test::Forward& f, std::vector<Tensor> in, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor R;
  {
    NoGrad ng;
    R = randn(f(in).shape(), rng);
  }
  test::check_gradients({.f = f, .tol = {.atol = 2e-3, .rtol = 2e-2}}, in, R);
}

}  // namespace

TEST(PrimitiveGradients, Softmax) {
  std::mt19937_64 rng(1);
  check_grad([](std::span<const Tensor> a) { return softmax(a[0]); }, {randn({3, 5}, rng)}, 11);
}

TEST(PrimitiveGradients, SlabAndNarrow) {
  std::mt19937_64 rng(2);
  check_grad([](std::span<const Tensor> a) { return slab(a[0], 1); }, {randn({3, 2, 4}, rng)}, 12);
  check_grad([](std::span<const Tensor> a) { return narrow(a[0], 2, 3); }, {randn({2, 3, 6}, rng)}, 13);
}

TEST(PrimitiveGradients, GatherConcatScatterScaleRows) {
  std::mt19937_64 rng(3);
  const Tensor rows = Tensor::from_ids({5}, std::vector<int32_t>{2, 0, 2, 3, 0});  // repeats add up
  check_grad([&](std::span<const Tensor> a) { return gather_rows(a[0], rows); }, {randn({4, 3}, rng)}, 14);
  check_grad([&](std::span<const Tensor> a) { return scatter_add_rows(a[0], rows, a[1]); },
             {randn({4, 3}, rng), randn({5, 3}, rng)}, 15);
  check_grad([](std::span<const Tensor> a) { return scale_rows(a[0], a[1]); }, {randn({4, 3}, rng), randn({4}, rng)},
             16);
  check_grad(
      [](std::span<const Tensor> a) {
        return concat_rows({a[0], a[1]});
      },
      {randn({2, 3}, rng), randn({3, 3}, rng)}, 18);
}

// The whole MoE FFN is differentiable in x, the router and the stacked experts (the routing
// choice itself is piecewise constant; random inputs keep it away from ties).
TEST(PrimitiveGradients, MoeFfn) {
  std::mt19937_64 rng(4);
  const int64_t N = 4, D = 4, F = 3, E = 3;
  check_grad(
      [&](std::span<const Tensor> a) {
        return moe_ffn({.ffn_gate_inp = a[1], .ffn_gate_exps = a[2], .ffn_up_exps = a[3], .ffn_down_exps = a[4]},
                       {.n_expert = E, .n_expert_used = 2}, a[0]);
      },
      {randn({N, D}, rng), randn({E, D}, rng), randn({E, F, D}, rng), randn({E, F, D}, rng), randn({E, D, F}, rng)},
      17);
  // Qwen3-Next's routing: the top k weights renormalised to sum to 1 (their division differentiated).
  check_grad(
      [&](std::span<const Tensor> a) {
        return moe_ffn({.ffn_gate_inp = a[1], .ffn_gate_exps = a[2], .ffn_up_exps = a[3], .ffn_down_exps = a[4]},
                       {.n_expert = E, .n_expert_used = 2, .renormalize = true}, a[0]);
      },
      {randn({N, D}, rng), randn({E, D}, rng), randn({E, F, D}, rng), randn({E, F, D}, rng), randn({E, D, F}, rng)},
      19);
}

// Metadata that means nothing physically (a rope base of 0 or NaN, a NaN epsilon, a gemma2 soft-cap
// of 0, which divides by zero, #37) and weights holding NaN are refused at load, naming the key or
// the tensor (#22: they generated garbage).
TEST(Archs, MeaninglessMetadataAndNanWeightsAreRefusedAtLoad) {
  TOY_REQUIRE_FIXTURE(path, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(q8, "models/smollm2/smollm2-q8_0.gguf");
  TOY_REQUIRE_FIXTURE(gemma2, "models/gemma2/gemma2-f32.gguf");
  // The file at `in` with one key set to `v` (none when key is empty) and the first value of
  // tensor `bad` (its first scale, for Q8_0) made NaN.
  auto write = [](const fs::path& in, const std::string& out_name, const std::string& key, gguf::Value v,
                  const std::string& bad) {
    auto f = gguf::GgufFile::open(in.string());
    gguf::GgufWriter w;
    for (const auto& [k, val] : f->metadata()) w.set(k, val);
    if (!key.empty()) w.set(key, v);
    static std::vector<std::vector<uint8_t>> keep;  // alive until the write
    for (const auto& t : f->tensors()) {
      const auto* p = static_cast<const uint8_t*>(f->tensor_data(t));
      if (t.name != bad) {
        w.add_tensor(t.name, t.shape, t.dtype, p);
        continue;
      }
      keep.emplace_back(p, p + t.nbytes);
      if (t.dtype == DType::F32) {
        const float nan = std::nanf("");
        std::memcpy(keep.back().data(), &nan, 4);
      } else {
        const uint16_t nan_half = 0x7e00;  // the block's scale d
        std::memcpy(keep.back().data(), &nan_half, 2);
      }
      w.add_tensor(t.name, t.shape, t.dtype, keep.back().data());
    }
    const std::string out = temp_path(out_name);
    w.write(out);
    return out;
  };
  using gguf::Value;
  EXPECT_NO_THROW(load(write(path, "meta_ok.gguf", "", {}, "")));
  const std::vector<std::pair<std::string, Value>> bad_keys = {
      {"llama.rope.freq_base", Value::of_f32(0.0f)},
      {"llama.rope.freq_base", Value::of_f32(std::nanf(""))},
      {"llama.attention.layer_norm_rms_epsilon", Value::of_f32(std::nanf(""))},
      {"llama.attention.layer_norm_rms_epsilon", Value::of_f32(-1e-5f)},
      {"llama.rope.dimension_count", Value::of_u32(7)},
      {"llama.attention.head_count_kv", Value::of_u32(0)},
      {"gemma2.attn_logit_softcapping", Value::of_f32(0.0f)},
      {"gemma2.attn_logit_softcapping", Value::of_f32(-50.0f)},
      {"gemma2.final_logit_softcapping", Value::of_f32(0.0f)},
      {"gemma2.final_logit_softcapping", Value::of_f32(std::numeric_limits<float>::infinity())}};
  for (const auto& [key, v] : bad_keys) {
    try {
      load(write(key.starts_with("gemma2.") ? gemma2 : path, "meta_bad.gguf", key, v, ""));
      ADD_FAILURE() << key << " = " << v.to_display() << " was accepted";
    } catch (const gguf::GgufError& e) {
      EXPECT_NE(std::string(e.what()).find(key.substr(6)), std::string::npos) << e.what();
    }
  }
  for (const auto& [file, name] : {std::pair{path, "nan_f32.gguf"}, std::pair{q8, "nan_q8.gguf"}}) {
    const std::string p = write(file, name, "", {}, "blk.1.attn_k.weight");
    try {
      load(p);
      ADD_FAILURE() << name << ": a NaN weight was accepted";
    } catch (const gguf::GgufError& e) {
      EXPECT_NE(std::string(e.what()).find("blk.1.attn_k.weight"), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::run_toy("infer " + p + " --ids 1 -n 1").code, 3);
  }
}

// What llama.cpp needs of a new model beyond toy's own forward (each found by
// TrainCli.LlamaCppContinuesEveryArchitecturesCheckpointWithToysTokens, where llama.cpp refused or
// crashed): qwen35 writes rope.dimension_sections covering the rotated pairs; a qwen35 or qwen3next
// shallower than full_attention_interval (4) makes its last layer attention, as llama.cpp cannot
// load a model without one; OLMoE has no grouped-query attention. Keys that break these are refused.
TEST(Archs, NewModelsAreWhatLlamaCppLoads) {
  const std::string path = testing::TempDir() + "/toy_hybrid_" + std::to_string(::getpid()) + ".gguf";
  auto shape = [](const std::string& arch, Metadata keys) {
    return ModelShape{.arch = arch,
                      .n_vocab = 64,
                      .d_model = 32,
                      .n_layer = 2,
                      .n_head = 4,
                      .n_kv_head = 2,
                      .d_ff = 64,
                      .n_ctx = 16,
                      .tied_output = true,
                      .keys = std::move(keys)};
  };
  for (const std::string arch : {"qwen35", "qwen3next"}) {
    SCOPED_TRACE(arch);
    write_model_gguf(*random_model(shape(arch, {}), 1), nullptr, path, "t");
    const auto f = gguf::GgufFile::open(path);
    EXPECT_EQ(f->find(arch + ".full_attention_interval")->as_int(), 2);  // layer 1 is attention
    EXPECT_THROW(random_model(shape(arch, {{"full_attention_interval", gguf::Value::of_u32(4)}}), 1),
                 std::invalid_argument);
  }
  write_model_gguf(*random_model(shape("qwen35", {}), 1), nullptr, path, "t");
  const auto file = gguf::GgufFile::open(path);
  const gguf::Value* sections = file->find("qwen35.rope.dimension_sections");
  ASSERT_TRUE(sections);
  std::vector<int64_t> got;
  for (size_t k = 0; k < sections->size(); ++k) got.push_back(sections->at(k).as_int());
  EXPECT_EQ(got, (std::vector<int64_t>{2, 1, 1, 0}));  // the 4 rotated pairs of a head of 8
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{1, 1, 1, 0}, {2, 1, 0, 1}, {2, 2}})
    EXPECT_THROW(random_model(shape("qwen35", {{"rope.dimension_sections", gguf::Value::of_i32s(bad)}}), 1),
                 std::invalid_argument);
  EXPECT_THROW(random_model(shape("olmoe", {}), 1), std::invalid_argument);  // 2 KV heads for 4
  fs::remove(path);
}
