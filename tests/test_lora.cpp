// tests/test_lora.cpp — LoRA adapters: llama.cpp's GGUF format read, checked against the base and
// applied at run time (`toy eval --lora`), against the PyTorch reference in
// fixtures/train/lora-smollm2-* (README there: conventions and tolerances).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fixtures.h"
#include "helpers.h"
#include "toy/archs/lora.h"
#include "toy/engines/decode.h"
#include "toy/tokenizer/tokenizer.h"
#include "train_helpers.h"

using namespace toy;
using json = nlohmann::json;
using toy::test::run_toy;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) {
  return testing::TempDir() + "/toy_lora_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<float> read_f32(const std::string& path) {
  const auto bytes = test::read_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::string join(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// `toy eval BASE --ids … --dump-logits` with extra flags: the logits [49][512].
std::vector<float> eval_logits(const std::string& base, const std::string& ids, const std::string& flags) {
  const std::string out = tmp("logits.f32");
  const auto r = run_toy("eval " + base + " --ids " + ids + " --dump-logits " + out + " " + flags);
  EXPECT_EQ(r.code, 0) << r.err;
  return read_f32(out);
}

// The reference's trained adapter: its base, the adapter, the 49 tokens and the logits PyTorch
// computed for base + adapter. Skips the calling test where a fixture is absent.
struct TrainedAdapter {
  fs::path base, adapter;
  std::string ids;
  std::vector<float> want;
};
void load_trained_adapter(TrainedAdapter& t) {
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(adapter, "train/lora-smollm2-final.gguf");
  TOY_REQUIRE_FIXTURE(want_path, "train/lora-smollm2-final.logits.f32");
  TOY_REQUIRE_FIXTURE(ref_path, "train/lora-smollm2-adamw.json");
  const json ref = json::parse(test::read_text(ref_path));
  t = {.base = base,
       .adapter = adapter,
       .ids = join(ref["final_logits"]["tokens"].get<std::vector<int>>()),
       .want = read_f32(want_path)};
  ASSERT_EQ(t.want.size(), 49u * 512u);
}

}  // namespace

// The trained adapter of the reference, applied unmerged: the logits PyTorch computed for base +
// adapter, at the F32 tolerance of the model tests (nmse 1e-8). --lora-scaled FILE 0 is the base;
// the adapter is not a no-op (the reference says nmse 3.4e-2 from the base).
TEST(Lora, EvalWithAdapterMatchesPyTorch) {
  TrainedAdapter t;
  load_trained_adapter(t);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::vector<float> got = eval_logits(t.base, t.ids, "--lora " + t.adapter.string());
  ASSERT_EQ(got.size(), t.want.size());
  EXPECT_LE(test::nmse(t.want, got), 1e-8);

  // Merged into the weights (toy export): the same logits as the adapter applied at run time.
  const std::string merged = tmp("merged.gguf");
  const auto e = run_toy("export " + t.base.string() + " --lora " + t.adapter.string() + " -o " + merged);
  ASSERT_EQ(e.code, 0) << e.err;
  const std::vector<float> from_merged = eval_logits(merged, t.ids, "");
  EXPECT_LE(test::nmse(got, from_merged), 1e-12);
  EXPECT_LE(test::nmse(t.want, from_merged), 1e-8);

  const std::vector<float> zero = eval_logits(t.base, t.ids, "--lora-scaled " + t.adapter.string() + " 0");
  const std::vector<float> plain = eval_logits(t.base, t.ids, "");
  EXPECT_EQ(zero, plain);
  EXPECT_GT(test::nmse(t.want, plain), 1e-2);
}

#ifdef TOY_VULKAN
// The same adapter at run time on vulkan:0 (lavapipe in CI): the adapters go to the device with
// their weights, and the logits hold the same limit against PyTorch's.
TEST(Lora, EvalWithAdapterOnVulkanMatchesPyTorch) {
  TOY_REQUIRE_VULKAN();
  TrainedAdapter t;
  load_trained_adapter(t);
  if (IsSkipped() || HasFatalFailure()) return;
  const std::vector<float> got = eval_logits(t.base, t.ids, "--lora " + t.adapter.string() + " --device vulkan");
  ASSERT_EQ(got.size(), t.want.size());
  EXPECT_LE(test::nmse(t.want, got), 1e-8);
  EXPECT_GT(test::nmse(t.want, eval_logits(t.base, t.ids, "--device vulkan")), 1e-2);  // the adapter is applied
}
#endif

// linear() on a weight that carries low-rank terms: x·Wᵀ + Σ s·(x·Aᵀ)·Bᵀ, the same as the merged
// weight (archs/lora merged_weight), with gradients for x, A and B against finite differences and
// none for the frozen W.
TEST(Lora, LowRankLinearForwardAndGradients) {
  auto tensor = [](Shape s, uint32_t seed) { return Tensor::from(s, test::randn(size_t(numel(s)), seed, 0.5f)); };
  const Tensor W = tensor({4, 5}, 1).set_name("W");
  const Tensor A1 = tensor({2, 5}, 2), B1 = tensor({4, 2}, 3), A2 = tensor({3, 5}, 4), B2 = tensor({4, 3}, 5);
  const Tensor x = tensor({3, 5}, 6);
  const Tensor adapted = with_low_rank(W, {.terms = {{A1, B1, 1.5f}, {A2, B2, -0.5f}}, .dropout = {}, .id = 0});
  EXPECT_EQ(adapted.name(), "W");
  EXPECT_FALSE(W.impl()->low_rank);  // W itself is unchanged
  {
    NoGrad no_grad;
    const std::vector<float> got = linear(x, adapted).to_vector(), want = linear(x, merged_weight(adapted)).to_vector();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
    EXPECT_GT(test::nmse(linear(x, W).to_vector(), got), 1e-3);  // the terms are not a no-op
  }
  std::vector<Tensor> in = {x.clone(), W.clone(), A1.clone(), B1.clone()};
  test::GradCheck c;
  c.f = [](std::span<const Tensor> v) {
    return linear(v[0], with_low_rank(v[1], {.terms = {{v[2], v[3], 1.5f}}, .dropout = {}, .id = 0}));
  };
  c.differentiable = [](size_t i) { return i != 1; };  // the base is frozen
  c.name = "low-rank linear";
  test::check_gradients(c, in, tensor({3, 4}, 7));
}

// Bad adapters and adapters for another base: a clear message and exit 3, for each way they can
// be wrong. Built by editing the reference adapter.
TEST(Lora, MismatchedOrMalformedAdaptersExit3) {
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(adapter, "train/lora-smollm2-init.gguf");
  const LoraAdapter good = read_lora(adapter.string());
  EXPECT_EQ(good.rank, 4);
  EXPECT_EQ(good.alpha, 8.0f);
  EXPECT_EQ(good.pairs.size(), 14u);

  struct Case {
    const char* what;
    std::function<void(LoraAdapter&)> edit;
    const char* message;
  };
  const Tensor a4 = Tensor::zeros({4, 64});
  const std::vector<Case> cases = {
      {"architecture", [](LoraAdapter& a) { a.arch = "qwen2"; }, "is for architecture \"qwen2\""},
      {"unknown tensor", [](LoraAdapter& a) { a.pairs["blk.7.attn_q.weight"] = a.pairs.begin()->second; },
       "blk.7.attn_q.weight: the model has no such tensor"},
      {"shape", [&](LoraAdapter& a) { a.pairs["blk.0.attn_q.weight"].A = a4; }, "do not fit the weight"},
      {"embedding", [](LoraAdapter& a) { a.pairs["token_embd.weight"] = a.pairs.begin()->second; },
       "token_embd.weight: not a projection weight"},
  };
  for (const Case& c : cases) {
    LoraAdapter bad = good;
    c.edit(bad);
    const std::string path = tmp("bad.gguf");
    write_lora(bad, path);
    const auto r = run_toy("eval " + base.string() + " --ids 1,2,3 --lora " + path);
    EXPECT_EQ(r.code, 3) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.what << ": " << r.err;
  }
  // A lora_a without its lora_b: refused when read, naming the tensor.
  {
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::of_string("llama"));
    w.set("general.type", gguf::Value::of_string("adapter"));
    w.set("adapter.type", gguf::Value::of_string("lora"));
    const Tensor& A = good.pairs.begin()->second.A;
    w.add_tensor(good.pairs.begin()->first + ".lora_a", A);
    const std::string path = tmp("unpaired.gguf");
    w.write(path);
    const auto u = run_toy("eval " + base.string() + " --ids 1,2,3 --lora " + path);
    EXPECT_EQ(u.code, 3) << u.err;
    EXPECT_NE(u.err.find("blk.0.attn_k.weight.lora_a has no blk.0.attn_k.weight.lora_b"), std::string::npos) << u.err;
  }
  // Not an adapter at all: the base model itself.
  const auto r = run_toy("eval " + base.string() + " --ids 1,2,3 --lora " + base.string());
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("not a LoRA adapter"), std::string::npos) << r.err;
  // A scale that is not a number is a usage error.
  EXPECT_EQ(run_toy("eval " + base.string() + " --ids 1,2,3 --lora-scaled " + adapter.string() + " x").code, 2);
}

// An adapter holding a NaN or an infinity is refused when read, as a model's weights are (#37 item
// 4): eval scored every token nan with it, and export wrote a merged model toy itself refuses.
// read_lora() is the loader of every command (serve's --lora too).
TEST(Lora, NonFiniteAdaptersAreRefused) {
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(adapter, "train/lora-smollm2-init.gguf");
  const LoraAdapter good = read_lora(adapter.string());
  for (const float bad_value : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad_value);
    LoraAdapter bad = good;
    LoraPair& pair = bad.pairs.begin()->second;                // blk.0.attn_k.weight
    Tensor& edited = std::isnan(bad_value) ? pair.A : pair.B;  // a NaN in lora_a, an infinity in lora_b
    edited = edited.clone();
    edited.data_mut()[5] = bad_value;
    const std::string path = tmp("nonfinite.gguf");
    write_lora(bad, path);
    const std::string says = std::string("tensor blk.0.attn_k.weight") +
                             (std::isnan(bad_value) ? ".lora_a" : ".lora_b") + " holds NaN or infinite values";
    try {
      read_lora(path);
      ADD_FAILURE() << "read_lora accepted it";
    } catch (const gguf::GgufError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    const std::string merged = tmp("merged-nonfinite.gguf");
    fs::remove(merged);
    for (const std::string& command :
         {"eval " + base.string() + " --ids 1,2,3", "infer " + base.string() + " --ids 1 -n 1",
          "export " + base.string() + " -o " + merged}) {
      const auto r = run_toy(command + " --lora " + path);
      EXPECT_EQ(r.code, 3) << command << ": " << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << command << ": " << r.err;
    }
    EXPECT_FALSE(fs::exists(merged));
  }
}

namespace {

double rel(double got, double want) { return std::abs(got - want) / std::abs(want); }

struct TraceRun {
  std::vector<double> loss, grad_norm;  // per step, from stdout and events.jsonl
  double loss_after = 0;                // of the final adapter, scored by `toy eval --lora`
  LoraAdapter final_adapter;
};

// `toy train lora` over `base` from the reference's initial adapter, with the reference's batch as
// --data-ids and its optimizer settings; then the written final adapter scored on that batch.
TraceRun run_trace(const json& ref, const std::string& base, const std::string& init, const test::TrainDir& d) {
  TraceRun t;
  std::vector<std::string> rows;
  {
    std::ofstream f(d.path("batch.i32"), std::ios::binary);
    for (const auto& row : ref["batch"]) {
      std::vector<int> ids = row.get<std::vector<int>>();
      for (int32_t id : ids) f.write(reinterpret_cast<const char*>(&id), 4);  // little-endian host
      rows.push_back(join(ids));
    }
  }
  const auto r =
      run_toy("train lora --base " + base + " --init-adapter " + init + " --data-ids " + d.path("batch.i32") +
              " --batch 2 --context 31 --steps 8 --lr 1e-3 --schedule constant --warmup 0 --beta1 0.9"
              " --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --clip 0 --eval-every 0 --no-progress"
              " --run-id trace --runs-dir " +
              d.path("runs"));
  EXPECT_EQ(r.code, 0) << r.err;
  for (const std::string& line : test::loss_lines(r.out)) t.loss.push_back(test::loss_of(line));
  for (const json& e : test::events_of(d.dir / "runs" / "trace"))
    if (e["kind"] == "step") t.grad_norm.push_back(e["grad_norm"].get<double>());
  const std::string adapter = (d.dir / "runs" / "trace" / "adapters" / "final.gguf").string();
  EXPECT_TRUE(fs::exists(d.dir / "runs" / "trace" / "adapters" / "step-8.gguf"));
  for (const std::string& ids : rows) {  // the loss is the mean over both rows' 31 terms
    const auto e = run_toy("eval " + base + " --lora " + adapter + " --json --ids " + ids);
    EXPECT_EQ(e.code, 0) << e.err;
    t.loss_after -= json::parse(e.out)["mean_logprob"].get<double>() / double(rows.size());
  }
  t.final_adapter = read_lora(adapter);
  return t;
}

// run_trace, with every step's loss, gradient norm and the final loss checked against `ref`.
TraceRun check_trace(const json& ref, const fs::path& base, const fs::path& init, double loss_tol, double norm_tol) {
  test::TrainDir d;
  TraceRun t = run_trace(ref, base.string(), init.string(), d);
  EXPECT_EQ(t.loss.size(), 8u);
  EXPECT_EQ(t.grad_norm.size(), 8u);
  for (size_t k = 0; k < std::min<size_t>(8, std::min(t.loss.size(), t.grad_norm.size())); ++k) {
    EXPECT_LT(rel(t.loss[k], ref["loss_before_step"][k]), loss_tol) << "step " << k;
    EXPECT_LT(rel(t.grad_norm[k], ref["grad_global_l2_norm"][k]), norm_tol) << "step " << k;
  }
  EXPECT_LT(rel(t.loss_after, ref["loss_after_last_step"]), loss_tol);
  return t;
}

}  // namespace

// lora-smollm2-adamw.json through the CLI, base F32: losses within 1e-5 and gradient norms within
// 1e-4 relative (README: float32 reruns differ by ≤ 1.3e-7 and ≤ 8.5e-8), the final adapter
// tensors' norms within 1e-4.
TEST(Lora, TrainTraceF32MatchesPyTorch) {
  TOY_REQUIRE_FIXTURE(trace_path, "train/lora-smollm2-adamw.json");
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(init, "train/lora-smollm2-init.gguf");
  const json ref = json::parse(test::read_text(trace_path));
  const TraceRun t = check_trace(ref, base, init, 1e-5, 1e-4);
  ASSERT_EQ(t.final_adapter.pairs.size(), 14u);
  for (const auto& [name, p] : t.final_adapter.pairs)
    for (const auto& [suffix, x] : {std::pair{".lora_a", p.A}, std::pair{".lora_b", p.B}}) {
      double ss = 0;
      for (float v : x.to_vector()) ss += double(v) * v;
      EXPECT_LT(rel(std::sqrt(ss), ref["adapter_l2_norm_after"][name + suffix]), 1e-4) << name << suffix;
    }
}

// lora-smollm2-q8_0-adamw.json: the same run over the Q8_0 base, which toy uses in place through
// its Q8_0 kernels. Those quantize each matmul's input to Q8_0 as llama.cpp's CPU backend does,
// while the reference uses float64 activations; the README measures that activation rounding
// alone moves the step-0 loss by 4.1e-5 relative (`q8_0_activation_emulation`). So: step 0 must
// match the emulated loss at the F32 tolerance (1e-5) — the deviation is the rounding and nothing
// else — and the trace must stay within 1e-4 on the losses (the README's bound; measured ≤ 7.6e-5
// as the steps compound it). The gradient norms are first-order differences of the loss, so they
// see the rounding (up to half a step, max|x|/254 per 32-value block, ~2e-3 RMS relative per
// element) more: measured ≤ 1.0e-3, allowed 3e-3 (a wrong scale moves them by 50% or more).
TEST(Lora, TrainTraceQ8_0WithinActivationQuantization) {
  TOY_REQUIRE_FIXTURE(trace_path, "train/lora-smollm2-q8_0-adamw.json");
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-q8_0.gguf");
  TOY_REQUIRE_FIXTURE(init, "train/lora-smollm2-init.gguf");
  const json ref = json::parse(test::read_text(trace_path));
  const TraceRun t = check_trace(ref, base, init, 1e-4, 3e-3);
  ASSERT_FALSE(t.loss.empty());
  EXPECT_LT(rel(t.loss[0], ref["q8_0_activation_emulation"]["loss_step0"]), 1e-5);
}

// A new adapter (A random, B zero) on chosen targets: step 0 is the base's own loss (the
// reference's loss without adapter), the checkpoint holds exactly those targets at the given rank
// and alpha, and dropout trains without changing that first loss. An unknown target is a usage
// error naming the ones the model has.
TEST(Lora, NewAdapterStartsAtTheBaseLoss) {
  TOY_REQUIRE_FIXTURE(trace_path, "train/lora-smollm2-adamw.json");
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  const json ref = json::parse(test::read_text(trace_path));
  test::TrainDir d;
  {
    std::ofstream f(d.path("batch.i32"), std::ios::binary);
    for (const auto& row : ref["batch"])
      for (int32_t id : row.get<std::vector<int32_t>>()) f.write(reinterpret_cast<const char*>(&id), 4);
  }
  const std::string common = "train lora --base " + base.string() + " --data-ids " + d.path("batch.i32") +
                             " --batch 2 --context 31 --steps 2 --eval-every 0 --no-progress --runs-dir " +
                             d.path("runs");
  const auto r = run_toy(common + " --targets attn_q,ffn_down --rank 2 --alpha 4 --dropout 0.1 --run-id new");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = test::loss_lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_LT(rel(test::loss_of(lines[0]), ref["loss_base_without_adapter"]), 1e-5);
  EXPECT_FALSE(fs::exists(d.dir / "runs" / "new" / "weights"));
  const LoraAdapter a = read_lora((d.dir / "runs" / "new" / "adapters" / "final.gguf").string());
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.alpha, 4.0f);
  std::vector<std::string> names;
  for (const auto& [name, p] : a.pairs) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.1.attn_q.weight",
                                             "blk.1.ffn_down.weight"}));

  const auto bad = run_toy(common + " --targets attn_q,attn_z --run-id bad");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("attn_z"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("ffn_gate"), std::string::npos) << bad.err;  // the list of what the model has
}

// `toy train lora --resume`: 6 steps straight, versus stopped after 3 and resumed, print the same
// step lines and write the same adapter and optimizer bytes. Dropout is on, so the masks must be
// those of the step too; the cosine schedule spans the interruption.
TEST(Lora, ResumeContinuesExactly) {
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  test::TrainDir d;
  {
    std::ofstream f(d.path("ids.i32"), std::ios::binary);
    for (int32_t i = 0; i < 2000; ++i) {
      const int32_t id = (i * 7919 + 13) % 512;
      f.write(reinterpret_cast<const char*>(&id), 4);
    }
  }
  const std::string cmd = "train lora --base " + base.string() + " --data-ids " + d.path("ids.i32") +
                          " --batch 2 --context 16 --steps 6 --rank 2 --alpha 4 --dropout 0.1"
                          " --targets attn_q,attn_v,ffn_down --lr 3e-3 --warmup 1 --eval-every 0"
                          " --checkpoint-every 2 --no-progress --runs-dir " +
                          d.path("runs");
  const auto full = run_toy(cmd + " --run-id full");
  const auto part = run_toy(cmd + " --stop-after 3 --run-id part");
  ASSERT_EQ(full.code, 0) << full.err;
  ASSERT_EQ(part.code, 0) << part.err;
  EXPECT_EQ(test::loss_lines(part.out).size(), 3u);
  const fs::path p = d.dir / "runs" / "part" / "adapters", f = d.dir / "runs" / "full" / "adapters";
  EXPECT_TRUE(fs::exists(p / "step-3.gguf"));
  EXPECT_FALSE(fs::exists(p / "step-2.optim.gguf"));  // only the newest checkpoint keeps its state
  const auto rest = run_toy("train --resume " + d.path("runs/part") + " --no-progress");
  ASSERT_EQ(rest.code, 0) << rest.err;
  std::vector<std::string> joined = test::loss_lines(part.out);
  for (const std::string& l : test::loss_lines(rest.out)) joined.push_back(l);
  EXPECT_EQ(joined, test::loss_lines(full.out));
  ASSERT_TRUE(fs::exists(p / "final.gguf"));
  EXPECT_EQ(test::read_bytes(f / "step-6.gguf"), test::read_bytes(p / "step-6.gguf"));
  EXPECT_EQ(test::read_bytes(f / "final.gguf"), test::read_bytes(p / "final.gguf"));
  EXPECT_EQ(test::read_bytes(f / "step-6.optim.gguf"), test::read_bytes(p / "step-6.optim.gguf"));
  EXPECT_FALSE(fs::exists(d.dir / "runs" / "part" / "weights"));
  const auto ev = test::events_of(d.dir / "runs" / "part");
  EXPECT_EQ(ev.back()["kind"], "run_end");
  EXPECT_EQ(ev.back()["reason"], "completed");
  EXPECT_EQ(ev.back()["checkpoint"], "adapters/step-6.gguf");
  // Nothing left to train: a usage error, as for any run.
  EXPECT_EQ(run_toy("train --resume " + d.path("runs/part") + " --no-progress").code, 2);
}

// llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU build, bench/peer/generate.mjs) loads an adapter
// `toy train lora` wrote and continues a prompt with the same greedy text as `toy infer --lora`.
// The adapter changes that text, so the base alone could not pass. Runs where node and
// bench/peer/node_modules are (bench/peer/run.sh, or `cd bench/peer && npm i`, installs it).
TEST(Lora, LlamaCppLoadsAToyAdapterAndPicksToysTokens) {
  if (test::llama_cpp_peer().empty())
    GTEST_SKIP() << "node-llama-cpp is not installed: run `cd bench/peer && npm i` for this check";
  const std::string base = (fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf").string();
  test::TrainDir d;
  {
    std::ofstream f(d.path("corpus.txt"));
    for (int i = 0; i < 30; ++i)
      f << "Once upon a time, there was a purple robot named Zed. Zed loved to sing songs about the moon.\n";
  }
  const auto t = run_toy("train lora --base " + base + " --corpus " + d.path("corpus.txt") +
                         " --context 32 --batch 4 --steps 30 --lr 1e-2 --rank 4 --alpha 8"
                         " --targets attn_q,attn_v,ffn_down --eval-every 0 --no-progress --run-id a"
                         " --runs-dir " +
                         d.path("runs"));
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string adapter = d.path("runs/a/adapters/final.gguf"), prompt = "'Once upon a time'";
  const auto toy_base = run_toy("infer " + base + " -p " + prompt + " -n 40 --temp 0 --no-display-prompt");
  const auto toy_lora =
      run_toy("infer " + base + " --lora " + adapter + " -p " + prompt + " -n 40 --temp 0 --no-display-prompt");
  ASSERT_EQ(toy_lora.code, 0) << toy_lora.err;
  EXPECT_NE(toy_lora.out, toy_base.out);
  // llama.cpp's greedy ids against toy's: the base with the adapter attached, fed as `toy infer
  // --temp 0` feeds it (ids, not text: the two spell a byte-fallback "▁" differently).
  const auto llama = test::llama_cpp_greedy_ids({base}, "Once upon a time", 40, adapter);
  ASSERT_EQ(llama.size(), 1u);

  const auto file = gguf::GgufFile::open(base);
  std::unique_ptr<Model> m = load_model(file);
  apply_loras(*m, {{std::make_shared<const LoraAdapter>(read_lora(adapter)), 1.0f}});
  EXPECT_EQ(llama[0], test::toy_greedy_ids(*m, *Tokenizer::from_gguf(*file), "Once upon a time", 40).ids);
}

// serve's second model over one set of weights (Model::share_params): the same tensors afterwards,
// and a model of another shape refused.
TEST(Lora, ShareParamsGivesTheSameTensorsAndRefusesAnotherShape) {
  ModelShape shape;
  shape.n_vocab = 64, shape.d_model = 32, shape.n_layer = 2, shape.n_head = 4, shape.d_ff = 64, shape.n_ctx = 64;
  std::unique_ptr<Model> a = random_model(shape, 1), b = random_model(shape, 2);
  b->share_params(*a);
  std::vector<const float*> of_a, of_b;
  a->for_each_param([&](Tensor& t) { of_a.push_back(t.data()); });
  b->for_each_param([&](Tensor& t) { of_b.push_back(t.data()); });
  EXPECT_EQ(of_a, of_b);
  ModelShape wider = shape;
  wider.d_ff = 96;
  std::unique_ptr<Model> c = random_model(wider, 3);
  EXPECT_THROW(c->share_params(*a), ShapeError);
}
