// archs/lora.cpp — reading, checking, writing and attaching LoRA adapters.
#include "toy/archs/lora.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy {

namespace {

constexpr const char* kSuffixA = ".lora_a";
constexpr const char* kSuffixB = ".lora_b";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A weight a LoRA may adapt: a matrix that only linear() reads. The embedding tables are refused:
// LoRA adapts projections (an embedding's low-rank term is warm-start's lens, recipes/warm_start.h).
bool adaptable(const Tensor& W) {
  return W.dim() == 2 && W.name() != "token_embd.weight" && W.name() != "position_embd.weight";
}

}  // namespace

LoraAdapter read_lora(const std::string& path) {
  LoraAdapter a;
  a.path = path;
  a.file = gguf::GgufFile::open(path);
  const gguf::GgufFile& f = *a.file;
  auto fail = [&](const std::string& what) { throw gguf::GgufError(path + ": " + what); };
  if (f.opt_string("general.type").value_or("") != "adapter")
    fail("not a LoRA adapter (general.type is not \"adapter\")");
  if (f.opt_string("adapter.type").value_or("") != "lora")
    fail("adapter.type is \"" + f.opt_string("adapter.type").value_or("") + "\", only \"lora\" is supported");
  a.arch = f.architecture();
  if (a.arch.empty()) fail("general.architecture is missing");
  const double alpha = f.opt_float("adapter.lora.alpha").value_or(0.0);
  if (!std::isfinite(alpha) || alpha < 0 || alpha > 1e6)
    fail("adapter.lora.alpha " + std::to_string(alpha) + " is out of range");
  a.alpha = float(alpha);

  std::map<std::string, Tensor> as, bs;
  for (const gguf::TensorInfo& t : f.tensors()) {
    const bool is_a = ends_with(t.name, kSuffixA), is_b = ends_with(t.name, kSuffixB);
    if (!is_a && !is_b) fail("tensor " + t.name + " is neither <name>.lora_a nor <name>.lora_b");
    if (t.shape.size() != 2) fail("tensor " + t.name + " has shape " + to_string(t.shape) + ", expected 2 dimensions");
    if (!f.finite(t)) fail("tensor " + t.name + " holds NaN or infinite values");  // as a model's weights
    (is_a ? as : bs)[t.name.substr(0, t.name.size() - 7)] = f.tensor(t);
  }
  if (as.empty()) fail("the adapter has no tensors");
  for (const auto& [name, A] : as) {
    auto b = bs.find(name);
    if (b == bs.end()) fail(name + kSuffixA + " has no " + name + kSuffixB);
    const Tensor& B = b->second;
    const int64_t r = B.size(1);  // llama.cpp: rank = lora_b.ne[0]
    if (A.size(0) != r)
      fail(name + ": lora_a " + to_string(A.shape()) + " and lora_b " + to_string(B.shape()) +
           " disagree on the rank (A [r, n_in], B [n_out, r])");
    if (a.rank == 0) a.rank = r;
    if (r != a.rank) fail(name + ": rank " + std::to_string(r) + ", other tensors have " + std::to_string(a.rank));
    a.pairs[name] = {A, B};
  }
  for (const auto& [name, B] : bs)
    if (!as.count(name)) fail(name + kSuffixB + " has no " + name + kSuffixA);
  return a;
}

void write_lora(const LoraAdapter& a, const std::string& path) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string(a.arch));
  w.set("general.type", gguf::Value::of_string("adapter"));
  w.set("adapter.type", gguf::Value::of_string("lora"));
  w.set("adapter.lora.alpha", gguf::Value::of_f32(a.alpha));
  for (const auto& [name, p] : a.pairs) {
    w.add_tensor(name + kSuffixA, p.A);
    w.add_tensor(name + kSuffixB, p.B);
  }
  w.write(path);
}

void apply_loras(Model& m, const std::vector<ScaledLora>& loras, std::shared_ptr<const LowRankDropout> dropout) {
  std::map<std::string, Tensor> weights;
  m.for_each_param([&](Tensor& t) { weights[t.name()] = t; });
  std::map<std::string, std::vector<LowRankTerm>> terms;
  for (const ScaledLora& l : loras) {
    const LoraAdapter& a = *l.adapter;
    auto fail = [&](const std::string& what) { throw gguf::GgufError(a.path + ": " + what); };
    if (a.arch != m.config().arch)
      fail("the adapter is for architecture \"" + a.arch + "\", the model is \"" + m.config().arch + "\"");
    for (const auto& [name, p] : a.pairs) {
      auto w = weights.find(name);
      if (w == weights.end()) fail(name + ": the model has no such tensor");
      const Tensor& W = w->second;
      if (!adaptable(W)) fail(name + ": not a projection weight an adapter can change");
      if (p.A.shape() != Shape{a.rank, W.size(1)} || p.B.shape() != Shape{W.size(0), a.rank})
        fail(name + ": lora_a " + to_string(p.A.shape()) + " and lora_b " + to_string(p.B.shape()) +
             " do not fit the weight " + to_string(W.shape()) + " (expected [" + std::to_string(a.rank) + ", " +
             std::to_string(W.size(1)) + "] and [" + std::to_string(W.size(0)) + ", " + std::to_string(a.rank) + "])");
      terms[name].push_back({.A = p.A, .B = p.B, .scale = l.scale * a.scale()});
    }
  }
  uint64_t id = 0;  // walk order: the dropout masks of different weights differ
  m.for_each_param([&](Tensor& t) {
    ++id;
    auto it = terms.find(t.name());
    if (it != terms.end()) t = with_low_rank(t, {.terms = std::move(it->second), .dropout = dropout, .id = id});
  });
}

Tensor merged_weight(const Tensor& W) {
  Tensor merged = W.clone().set_name(W.name());  // [N, K] F32
  const LowRank* lr = W.impl()->low_rank.get();
  if (!lr) return merged;
  auto [N, K] = W.dims<2>("merged_weight: W");
  Tensor BA = Tensor::empty({N, K});
  for (const LowRankTerm& t : lr->terms) {
    const Tensor A = t.A.clone(), B = t.B.clone();                                           // F32 [r, K], [N, r]
    kernels::gemm(false, false, N, K, A.size(0), B.data(), A.data(), BA.data_mut(), false);  // B·A [N, K]
    float* w = merged.data_mut();
    const float* d = BA.data();
    for (int64_t i = 0; i < N * K; ++i) w[i] += t.scale * d[i];
  }
  return merged;
}

std::vector<std::string> lora_target_names(Model& m, const std::vector<std::string>& targets) {
  std::vector<std::string> names, available;
  m.for_each_param([&](Tensor& t) {
    if (!adaptable(t)) return;
    const std::string& n = t.name();
    // "blk.3.attn_q.weight" -> "attn_q"; "output.weight" -> "output"
    std::string kind = n.rfind("blk.", 0) == 0 ? n.substr(n.find('.', 4) + 1) : n;
    if (ends_with(kind, ".weight")) kind.resize(kind.size() - 7);
    if (std::find(available.begin(), available.end(), kind) == available.end()) available.push_back(kind);
    if (std::find(targets.begin(), targets.end(), kind) != targets.end()) names.push_back(n);
  });
  for (const std::string& t : targets)
    if (std::find(available.begin(), available.end(), t) == available.end()) {
      std::string list;
      for (const std::string& k : available) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument("LoRA target \"" + t + "\" is not a projection of this " + m.config().arch +
                                  " model (it has: " + list + ")");
    }
  return names;
}

}  // namespace toy
