// io/card_facts.cpp — the architectures a card describes: one row of facts each, the tensors
// those facts imply, and the pseudocode, with the file's hyper-parameters substituted.
//
// Notation (docs/cli.md, STYLE's vocabulary): T tokens, d_model, d_ff, n_head, n_kv_head,
// d_head, n_layer, n_vocab, n_ctx, ℓ a layer index; weights by GGUF name.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "toy/io/card_facts.h"

namespace toy::card::detail {

namespace {

using Init = TensorSpec::Init;

//                 arch      HF class               norm         positions            fused  qkvb   outb   qk_norm            sandw  ffn           escale softcap swa
const Facts kFacts[] = {
    {"llama", "LlamaForCausalLM", Norm::Rms, Positions::RopeNorm, false, false, false, QkNorm::None, false, Ffn::SwiGlu,
     false, false, false},
    {"qwen2", "Qwen2ForCausalLM", Norm::Rms, Positions::RopeNeox, false, true, false, QkNorm::None, false, Ffn::SwiGlu,
     false, false, false},
    {"qwen3", "Qwen3ForCausalLM", Norm::Rms, Positions::RopeNeox, false, false, false, QkNorm::PerHead, false,
     Ffn::SwiGlu, false, false, false},
    {"gemma2", "Gemma2ForCausalLM", Norm::Rms, Positions::RopeNeox, false, false, false, QkNorm::None, true, Ffn::GeGlu,
     true, true, true},
    {"olmoe", "OlmoeForCausalLM", Norm::Rms, Positions::RopeNeox, false, false, false, QkNorm::FullWidth, false,
     Ffn::Moe, false, false, false},
    {"gpt2", "GPT2LMHeadModel", Norm::Layer, Positions::Learned, true, true, true, QkNorm::None, false, Ffn::GeluMlp,
     false, false, false},
};

std::string n(int64_t v) { return std::to_string(v); }

// One parameter of the model; per-layer ones are named without the "blk.ℓ." prefix.
struct Param {
  enum Where { Before, Layer, After } where;
  std::string name;
  std::vector<std::string> sym;  // symbolic shape, e.g. {"n_head·d_head", "d_model"}
  Shape shape;
  Init init;
  std::string role;
};

std::vector<Param> params(const Card& c, const Dims& d, const Facts& f) {
  std::vector<Param> p;
  const int64_t D = d.d_model, q = d.n_head * d.d_head, kv = d.n_kv_head * d.d_head, vv = d.n_kv_head * d.d_value;
  auto add = [&](Param::Where w, std::string name, std::vector<std::string> sym, Shape shape, Init init,
                 std::string role) {
    p.push_back({w, std::move(name), std::move(sym), std::move(shape), init, std::move(role)});
  };
  auto norm = [&](Param::Where w, const std::string& stem, const std::string& role) {
    add(w, stem + ".weight", {"d_model"}, {D}, Init::Ones,
        role + (f.norm == Norm::Layer ? " (LayerNorm gain)" : " (RMSNorm gain)"));
    if (f.norm == Norm::Layer) add(w, stem + ".bias", {"d_model"}, {D}, Init::Zeros, role + " (LayerNorm bias)");
  };
  if (!c.rope_freqs.empty())
    add(Param::Before, "rope_freqs.weight", {"n_rot/2"}, {d.n_rot / 2}, Init::RopeFreqs,
        "RoPE frequency divisors f_i (Llama-3 scaling)");
  add(Param::Before, "token_embd.weight", {"n_vocab", "d_model"}, {d.n_vocab, D}, Init::Normal,
      c.tied_output ? "token embedding; also the unembedding (tied)" : "token embedding");
  if (f.positions == Positions::Learned)
    add(Param::Before, "position_embd.weight", {"n_ctx", "d_model"}, {d.n_ctx, D}, Init::Normal,
        "learned position embedding");

  norm(Param::Layer, "attn_norm", "norm before attention");
  if (f.fused_qkv) {
    add(Param::Layer, "attn_qkv.weight", {"n_head·d_head + 2·n_kv_head·d_head", "d_model"}, {q + 2 * kv, D},
        Init::Normal, "fused query/key/value projection");
    if (f.qkv_bias)
      add(Param::Layer, "attn_qkv.bias", {"n_head·d_head + 2·n_kv_head·d_head"}, {q + 2 * kv}, Init::Zeros,
          "fused q/k/v bias");
  } else {
    add(Param::Layer, "attn_q.weight", {"n_head·d_head", "d_model"}, {q, D}, Init::Normal, "query projection");
    add(Param::Layer, "attn_k.weight", {"n_kv_head·d_head", "d_model"}, {kv, D}, Init::Normal, "key projection");
    add(Param::Layer, "attn_v.weight", {"n_kv_head·d_head", "d_model"}, {vv, D}, Init::Normal, "value projection");
  }
  add(Param::Layer, "attn_output.weight", {"d_model", "n_head·d_head"}, {D, d.n_head * d.d_value}, Init::Normal,
      "attention output projection");
  if (f.output_bias) add(Param::Layer, "attn_output.bias", {"d_model"}, {D}, Init::Zeros, "attention output bias");
  if (f.qkv_bias && !f.fused_qkv) {
    add(Param::Layer, "attn_q.bias", {"n_head·d_head"}, {q}, Init::Zeros, "query bias");
    add(Param::Layer, "attn_k.bias", {"n_kv_head·d_head"}, {kv}, Init::Zeros, "key bias");
    add(Param::Layer, "attn_v.bias", {"n_kv_head·d_head"}, {vv}, Init::Zeros, "value bias");
  }
  if (f.qk_norm == QkNorm::PerHead) {
    add(Param::Layer, "attn_q_norm.weight", {"d_head"}, {d.d_head}, Init::Ones, "RMSNorm gain of each query head");
    add(Param::Layer, "attn_k_norm.weight", {"d_head"}, {d.d_head}, Init::Ones, "RMSNorm gain of each key head");
  } else if (f.qk_norm == QkNorm::FullWidth) {
    add(Param::Layer, "attn_q_norm.weight", {"n_head·d_head"}, {q}, Init::Ones, "RMSNorm gain over all query heads");
    add(Param::Layer, "attn_k_norm.weight", {"n_kv_head·d_head"}, {kv}, Init::Ones, "RMSNorm gain over all key heads");
  }
  if (f.sandwich)
    add(Param::Layer, "post_attention_norm.weight", {"d_model"}, {D}, Init::Ones,
        "norm of the attention output (RMSNorm gain)");
  norm(Param::Layer, "ffn_norm", "norm before the feed-forward network");
  if (f.sandwich)
    add(Param::Layer, "post_ffw_norm.weight", {"d_model"}, {D}, Init::Ones,
        "norm of the feed-forward output (RMSNorm gain)");
  switch (f.ffn) {
    case Ffn::SwiGlu:
    case Ffn::GeGlu:
      add(Param::Layer, "ffn_gate.weight", {"d_ff", "d_model"}, {d.d_ff, D}, Init::Normal, "gate projection");
      add(Param::Layer, "ffn_up.weight", {"d_ff", "d_model"}, {d.d_ff, D}, Init::Normal, "up projection");
      add(Param::Layer, "ffn_down.weight", {"d_model", "d_ff"}, {D, d.d_ff}, Init::Normal, "down projection");
      break;
    case Ffn::GeluMlp:
      add(Param::Layer, "ffn_up.weight", {"d_ff", "d_model"}, {d.d_ff, D}, Init::Normal, "up projection");
      add(Param::Layer, "ffn_up.bias", {"d_ff"}, {d.d_ff}, Init::Zeros, "up bias");
      add(Param::Layer, "ffn_down.weight", {"d_model", "d_ff"}, {D, d.d_ff}, Init::Normal, "down projection");
      add(Param::Layer, "ffn_down.bias", {"d_model"}, {D}, Init::Zeros, "down bias");
      break;
    case Ffn::Moe:
      add(Param::Layer, "ffn_gate_inp.weight", {"n_expert", "d_model"}, {d.n_expert, D}, Init::Normal, "router");
      add(Param::Layer, "ffn_down_exps.weight", {"n_expert", "d_model", "d_ff"}, {d.n_expert, D, d.d_ff}, Init::Normal,
          "down projection of each expert");
      add(Param::Layer, "ffn_gate_exps.weight", {"n_expert", "d_ff", "d_model"}, {d.n_expert, d.d_ff, D}, Init::Normal,
          "gate projection of each expert");
      add(Param::Layer, "ffn_up_exps.weight", {"n_expert", "d_ff", "d_model"}, {d.n_expert, d.d_ff, D}, Init::Normal,
          "up projection of each expert");
      break;
  }
  norm(Param::After, "output_norm", "final norm");
  if (!c.tied_output)
    add(Param::After, "output.weight", {"n_vocab", "d_model"}, {d.n_vocab, D}, Init::Normal, "unembedding");
  return p;
}

// Display width of UTF-8 text (code points, combining marks count 0).
size_t width(const std::string& s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;
    if (c == 0xCC && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80) continue;  // U+0300..U+033F
    if (c == 0xCD && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xB0) continue;   // U+0340..U+036F
    ++w;
  }
  return w;
}

// A numbered algorithm: code lines with an optional "▷ comment", aligned.
struct Algo {
  std::vector<std::pair<std::string, std::string>> lines;
  void add(std::string code, std::string comment = "") { lines.emplace_back(std::move(code), std::move(comment)); }
  std::string text() const {
    size_t w = 0;
    for (const auto& [code, comment] : lines) w = std::max(w, width(code));
    std::string s = "```text\n";
    for (size_t i = 0; i < lines.size(); ++i) {
      char num[8];
      std::snprintf(num, sizeof num, "%2zu  ", i + 1);
      s += num + lines[i].first;
      if (!lines[i].second.empty()) s += std::string(w + 3 - width(lines[i].first), ' ') + "▷ " + lines[i].second;
      s += "\n";
    }
    return s + "```\n\n";
  }
};

std::string shape_text(const Param& p) {
  std::string sym, num;
  for (size_t i = 0; i < p.sym.size(); ++i) {
    sym += (i ? ", " : "") + p.sym[i];
    num += (i ? ", " : "") + n(p.shape[i]);
  }
  return "[" + sym + "] = [" + num + "]";
}

std::string fl(double v) { return short_float(v, true); }

}  // namespace

const Facts* find_facts(const std::string& arch) {
  for (const Facts& f : kFacts)
    if (arch == f.arch) return &f;
  return nullptr;
}

const Facts& facts_of(const Card& c) {
  if (const Facts* f = find_facts(c.arch)) return *f;
  std::string known;
  for (const Facts& f : kFacts) known += (known.empty() ? "" : ", ") + std::string(f.arch);
  throw CardError("no algorithm card for architecture '" + c.arch + "' (cards cover: " + known + ")");
}

std::string short_float(double v, bool f32) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {  // 500000, not 5e+05
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    const bool same = f32 ? std::strtof(buf, nullptr) == float(v) : std::strtod(buf, nullptr) == v;
    if (same) break;
  }
  return buf;
}

Dims dims_of(const Card& c) {
  const Facts& f = facts_of(c);
  auto get = [&](const std::string& key) -> const gguf::Value* { return c.find(c.arch + "." + key); };
  auto need_int = [&](const std::string& key) -> int64_t {
    const gguf::Value* v = get(key);
    if (!v || !v->is_integer()) throw CardError("missing integer hyper-parameter " + c.arch + "." + key);
    if (v->as_int() <= 0 || v->as_int() > (int64_t(1) << 24))
      throw CardError(c.arch + "." + key + " = " + n(v->as_int()) + " is out of range");
    return v->as_int();
  };
  auto opt_int = [&](const std::string& key, int64_t def) { return get(key) ? need_int(key) : def; };
  auto opt_float = [&](const std::string& key, double def) {
    const gguf::Value* v = get(key);
    if (v && !(v->is_float() || v->is_integer())) throw CardError(c.arch + "." + key + " must be a number");
    return v ? v->as_float() : def;
  };
  Dims d{};
  d.n_vocab = c.n_vocab;
  d.d_model = need_int("embedding_length");
  d.n_layer = need_int("block_count");
  d.d_ff = need_int("feed_forward_length");
  d.n_head = need_int("attention.head_count");
  d.n_ctx = need_int("context_length");
  d.n_kv_head = opt_int("attention.head_count_kv", d.n_head);
  d.d_head = opt_int("attention.key_length", d.d_model / d.n_head);
  d.d_value = opt_int("attention.value_length", d.d_head);
  d.n_rot = opt_int("rope.dimension_count", d.d_head);
  d.rope_base = opt_float("rope.freq_base", 10000);
  if (d.n_head % d.n_kv_head)
    throw CardError(c.arch + ".attention.head_count_kv = " + n(d.n_kv_head) +
                    " must divide head_count = " + n(d.n_head));
  if (d.n_rot > d.d_head || d.n_rot % 2)
    throw CardError(c.arch + ".rope.dimension_count must be even and at most the head size");
  if (f.fused_qkv && d.d_value != d.d_head) throw CardError(c.arch + ": fused q/k/v needs equal key and value sizes");
  const std::string eps_key =
      f.norm == Norm::Layer ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  if (!get(eps_key)) throw CardError("missing hyper-parameter " + c.arch + "." + eps_key);
  d.eps = opt_float(eps_key, 0);
  if (f.ffn == Ffn::Moe) {
    d.n_expert = need_int("expert_count");
    d.n_expert_used = need_int("expert_used_count");
    if (d.n_expert_used > d.n_expert) throw CardError(c.arch + ".expert_used_count exceeds expert_count");
  }
  if (f.sliding_window) {
    d.window = opt_int("attention.sliding_window", 4096);
    d.window_pattern = opt_int("attention.sliding_window_pattern", 2);
  }
  if (f.softcap) {
    d.attn_cap = opt_float("attn_logit_softcapping", 50);
    d.final_cap = opt_float("final_logit_softcapping", 30);
  }
  if (!c.rope_freqs.empty() && int64_t(c.rope_freqs.size()) != d.n_rot / 2)
    throw CardError("card.rope_freqs has " + n(int64_t(c.rope_freqs.size())) +
                    " factors, expected n_rot/2 = " + n(d.n_rot / 2));
  return d;
}

std::string render_algorithms(const Card& c) {
  const Facts& f = facts_of(c);
  const Dims d = dims_of(c);
  const bool rope = f.positions != Positions::Learned, gqa = d.n_kv_head != d.n_head;
  const std::string norm = f.norm == Norm::Rms ? "RMSNorm" : "LayerNorm";
  const std::string ffn = f.ffn == Ffn::SwiGlu    ? "SwiGLU"
                          : f.ffn == Ffn::GeGlu   ? "GeGLU"
                          : f.ffn == Ffn::GeluMlp ? "MLP"
                                                  : "MoE";
  std::string s;

  // --- notation ---
  s += "## Notation\n\n| symbol | meaning | value |\n|---|---|---|\n";
  auto row = [&](const std::string& sym, const std::string& what, const std::string& val) {
    s += "| " + sym + " | " + what + " | " + val + " |\n";
  };
  row("T", "tokens in the sequence, T ≤ n_ctx", "");
  row("n_vocab", "vocabulary size", n(d.n_vocab));
  row("n_ctx", f.positions == Positions::Learned ? "context length (rows of position_embd)" : "training context length",
      n(d.n_ctx));
  row("n_layer", "blocks", n(d.n_layer));
  row("d_model", "residual stream width", n(d.d_model));
  row("n_head", "query heads", n(d.n_head));
  row("n_kv_head", "key/value heads", n(d.n_kv_head));
  row("d_head", "size of a query/key head", n(d.d_head));
  if (d.d_value != d.d_head) row("d_value", "size of a value head", n(d.d_value));
  row("d_ff", f.ffn == Ffn::Moe ? "hidden size of each expert" : "feed-forward hidden size", n(d.d_ff));
  if (f.ffn == Ffn::Moe) {
    row("n_expert", "experts per layer", n(d.n_expert));
    row("k", "experts used per token", n(d.n_expert_used));
  }
  row("ε", norm + " epsilon", fl(d.eps));
  if (rope) {
    row("n_rot", "rotated components of a head", n(d.n_rot));
    row("θ_base", "RoPE base", fl(d.rope_base));
  }
  if (f.sliding_window) row("w", "sliding window (local layers)", n(d.window));
  if (f.softcap) {
    row("c_attn", "attention logit soft-cap", fl(d.attn_cap));
    row("c_final", "final logit soft-cap", fl(d.final_cap));
  }

  // --- parameters ---
  s += "\n## Parameters\n\nθ is these tensors (GGUF names; `blk.ℓ.` for each layer ℓ = 0 … " + n(d.n_layer - 1) +
       "; shapes outermost first).\n\n| tensor | shape | role |\n|---|---|---|\n";
  for (const Param& p : params(c, d, f))
    s += "| `" + std::string(p.where == Param::Layer ? "blk.ℓ." : "") + p.name + "` | " + shape_text(p) + " | " +
         p.role + " |\n";
  s += "\nParameters: " + std::to_string(parameter_count(c)) + ".\n\n";

  // --- algorithm 1: the whole model ---
  const std::string unembed = c.tied_output ? "token_embd" : "output";
  s += "## Algorithm 1: DTransformer(x | θ), " + c.arch + "\n\n";
  s += "**Input:** x ∈ {0, …, n_vocab−1}^T, token ids, T ≤ n_ctx = " + n(d.n_ctx) + ".  \n";
  s += "**Output:** P ∈ (0, 1)^(T × n_vocab); P[t] is the distribution of the token after x[0 … t].  \n";
  s += "**Hyper-parameters:** n_layer = " + n(d.n_layer) + ", d_model = " + n(d.d_model) +
       ", n_vocab = " + n(d.n_vocab) + ".  \n";
  s += "**Parameters:** θ (above).\n\n";
  Algo a1;
  a1.add("for t = 0 … T−1:  X[t] ← token_embd[x[t]]", "X: [T, d_model] = [T, " + n(d.d_model) + "]");
  if (f.embed_scale) a1.add("X ← X · √d_model = X · " + fl(std::sqrt(float(d.d_model))), "embedding scale");
  if (f.positions == Positions::Learned)
    a1.add("for t = 0 … T−1:  X[t] ← X[t] + position_embd[t]", "learned absolute positions");
  a1.add("for ℓ = 0 … n_layer−1 = " + n(d.n_layer - 1) + ":");
  a1.add("    X̃ ← " + norm + "(X | blk.ℓ.attn_norm)", "Algorithm 4, each row");
  a1.add("    A ← Attention(X̃ | ℓ)", "Algorithm 2; [T, " + n(d.d_model) + "]");
  if (f.sandwich) a1.add("    A ← RMSNorm(A | blk.ℓ.post_attention_norm)", "norm of the sub-layer output");
  a1.add("    X ← X + A", "residual");
  a1.add("    X̃ ← " + norm + "(X | blk.ℓ.ffn_norm)");
  a1.add("    F ← " + ffn + "(X̃ | ℓ)", "Algorithm 5, each row");
  if (f.sandwich) a1.add("    F ← RMSNorm(F | blk.ℓ.post_ffw_norm)");
  a1.add("    X ← X + F", "residual");
  a1.add("X ← " + norm + "(X | output_norm)");
  a1.add("Z ← X · " + unembed + "ᵀ",
         "logits [T, n_vocab] = [T, " + n(d.n_vocab) + "]" + (c.tied_output ? "; tied to the embedding" : ""));
  if (f.softcap) a1.add("Z ← c_final · tanh(Z / c_final),  c_final = " + fl(d.final_cap), "final soft-cap");
  a1.add("return P ← softmax(Z), each row");
  s += a1.text();

  // --- algorithm 2: attention ---
  const std::string qd = "[T, n_head, d_head] = [T, " + n(d.n_head) + ", " + n(d.d_head) + "]";
  const std::string kd = "[T, n_kv_head, d_head] = [T, " + n(d.n_kv_head) + ", " + n(d.d_head) + "]";
  s += "## Algorithm 2: Attention(X̃ | ℓ), " + std::string(gqa ? "grouped-query" : "multi-head") + ", causal" +
       (rope ? ", RoPE" : "") + (f.sliding_window ? ", soft-capped, sliding window on local layers" : "") + "\n\n";
  s += "**Input:** X̃ ∈ ℝ^(T × d_model), rows at positions p₀ … p₀+T−1 (p₀ = 0 for a whole sequence; a KV cache "
       "holds the keys and values of earlier positions and extends K and V).  \n**Output:** ∈ ℝ^(T × d_model).\n\n";
  Algo a2;
  const std::string qb = f.qkv_bias ? " + blk.ℓ.attn_q.bias" : "", kb = f.qkv_bias ? " + blk.ℓ.attn_k.bias" : "",
                    vb = f.qkv_bias ? " + blk.ℓ.attn_v.bias" : "";
  if (f.fused_qkv) {
    const int64_t q = d.n_head * d.d_head, kv = d.n_kv_head * d.d_head;
    a2.add("Y ← X̃ · blk.ℓ.attn_qkvᵀ" + std::string(f.qkv_bias ? " + blk.ℓ.attn_qkv.bias" : ""),
           "[T, " + n(q + 2 * kv) + "]");
    a2.add("Q ← Y[:, 0 : " + n(q) + "],  K ← Y[:, " + n(q) + " : " + n(q + kv) + "],  V ← Y[:, " + n(q + kv) + " : " +
               n(q + 2 * kv) + "]",
           "each viewed as [T, heads, d_head]");
  } else {
    a2.add("Q ← X̃ · blk.ℓ.attn_qᵀ" + qb, qd);
    a2.add("K ← X̃ · blk.ℓ.attn_kᵀ" + kb, kd);
    a2.add("V ← X̃ · blk.ℓ.attn_vᵀ" + vb, "[T, n_kv_head, d_value]");
  }
  if (f.qk_norm == QkNorm::PerHead) {
    a2.add("Q[t, h] ← RMSNorm(Q[t, h] | blk.ℓ.attn_q_norm) for every t, h",
           "each head's " + n(d.d_head) + " values on their own");
    a2.add("K[t, g] ← RMSNorm(K[t, g] | blk.ℓ.attn_k_norm) for every t, g");
  } else if (f.qk_norm == QkNorm::FullWidth) {
    a2.add("Q[t] ← RMSNorm(Q[t] | blk.ℓ.attn_q_norm) for every t",
           "over all " + n(d.n_head * d.d_head) + " values of the token");
    a2.add("K[t] ← RMSNorm(K[t] | blk.ℓ.attn_k_norm) for every t", "over all " + n(d.n_kv_head * d.d_head) + " values");
  }
  if (rope) {
    a2.add("Q[t, h] ← RoPE(Q[t, h], p₀ + t) for every t, h", "Algorithm 3");
    a2.add("K[t, g] ← RoPE(K[t, g], p₀ + t) for every t, g");
  }
  a2.add("for h = 0 … n_head−1 = " + n(d.n_head - 1) + ":");
  if (gqa)
    a2.add("    g ← ⌊h / (n_head / n_kv_head)⌋ = ⌊h / " + n(d.n_head / d.n_kv_head) + "⌋",
           "consecutive query heads share a key/value head");
  else
    a2.add("    g ← h");
  const std::string rs = "√d_head = √" + n(d.d_head);
  if (f.softcap) {
    a2.add("    S ← (Q[:, h] / √d_head) · K[:, g]ᵀ", "[T, T]; " + rs + ", the scale applied to Q first");
    a2.add("    S ← c_attn · tanh(S / c_attn),  c_attn = " + fl(d.attn_cap), "soft-cap");
  } else {
    a2.add("    S ← Q[:, h] · K[:, g]ᵀ / √d_head", "[T, T]; " + rs);
  }
  a2.add("    S[t, t′] ← −∞ where t′ > t", "causal mask");
  if (f.sliding_window)
    a2.add((d.window_pattern == 2 ? std::string("    if ℓ is even")
                                  : "    if ℓ mod " + n(d.window_pattern) + " < " + n(d.window_pattern - 1)) +
               ":  S[t, t′] ← −∞ where t − t′ ≥ w = " + n(d.window),
           "local layers see the last " + n(d.window) + " positions");
  a2.add("    O[:, h] ← softmax(S) · V[:, g]", "softmax over t′; [T, d_value]");
  a2.add("return [O[:, 0], …, O[:, n_head−1]] · blk.ℓ.attn_outputᵀ" +
             std::string(f.output_bias ? " + blk.ℓ.attn_output.bias" : ""),
         "heads concatenated in order; [T, d_model]");
  s += a2.text();

  // --- algorithm 3: positions ---
  if (rope) {
    const bool neox = f.positions == Positions::RopeNeox;
    s += "## Algorithm 3: RoPE(u, p), " + std::string(neox ? "NEOX (halves)" : "NORM (adjacent pairs)") + "\n\n";
    s += "**Input:** u ∈ ℝ^d_head, one head of one token, and its position p.  \n**Output:** u rotated by position p.  "
         "\n"
         "**Hyper-parameters:** n_rot = " +
         n(d.n_rot) + ", θ_base = " + fl(d.rope_base) + ".\n\n";
    Algo a3;
    a3.add("for i = 0 … n_rot/2 − 1 = " + n(d.n_rot / 2 - 1) + ":");
    a3.add(
        c.rope_freqs.empty() ? "    φ ← p · θ_base^(−2i / n_rot)" : "    φ ← p · θ_base^(−2i / n_rot) / rope_freqs[i]",
        c.rope_freqs.empty() ? "" : "Llama-3 frequency scaling");
    a3.add(neox ? "    (a, b) ← (i, i + n_rot/2) = (i, i + " + n(d.n_rot / 2) + ")" : "    (a, b) ← (2i, 2i + 1)");
    a3.add("    (u[a], u[b]) ← (u[a]·cos φ − u[b]·sin φ,  u[a]·sin φ + u[b]·cos φ)");
    a3.add("return u", d.n_rot < d.d_head ? "components n_rot … d_head−1 unchanged" : "");
    s += a3.text();
    if (!neox)
      s += "The converter permuted the rows of `attn_q` and `attn_k` head by head, so rotating adjacent pairs here "
           "equals "
           "Hugging Face's rotate-half on the original weights.\n\n";
  } else {
    s += "## Algorithm 3: positions\n\nLearned absolute positions: row t of `position_embd` is added to the embedding "
         "of "
         "token t (Algorithm 1); attention itself is position-free.\n\n";
  }

  // --- algorithm 4: the norm ---
  s += "## Algorithm 4: " + norm + "(x | " + std::string(f.norm == Norm::Rms ? "w" : "w, b") + ")\n\n";
  s += "**Input:** x ∈ ℝ^d (one row).  **Output:** ∈ ℝ^d.  **Hyper-parameters:** ε = " + fl(d.eps) + ".\n\n";
  Algo a4;
  if (f.norm == Norm::Rms) {
    a4.add("r ← 1 / √(mean(x ⊙ x) + ε)");
    a4.add("return (r · x) ⊙ w");
  } else {
    a4.add("μ ← mean(x)");
    a4.add("σ² ← mean((x − μ) ⊙ (x − μ))", "biased variance");
    a4.add("return (x − μ) / √(σ² + ε) ⊙ w + b");
  }
  s += a4.text();
  if (f.arch == std::string("gemma2"))
    s += "Gemma's norms compute x̂ · (1 + w); the GGUF file stores 1 + w, so w here is the stored tensor as is.\n\n";

  // --- algorithm 5: the feed-forward network ---
  s += "## Algorithm 5: " + ffn + "(x | ℓ)\n\n**Input:** x ∈ ℝ^d_model (one row).  **Output:** ∈ ℝ^d_model.\n\n";
  Algo a5;
  const std::string gelu = "gelu(v) = ½·v·(1 + tanh(√(2/π)·(v + 0.044715·v³)))";
  switch (f.ffn) {
    case Ffn::SwiGlu:
    case Ffn::GeGlu:
      a5.add("a ← x · blk.ℓ.ffn_gateᵀ", "[d_ff] = [" + n(d.d_ff) + "]");
      a5.add("b ← x · blk.ℓ.ffn_upᵀ", "[d_ff]");
      a5.add(f.ffn == Ffn::SwiGlu ? "h ← silu(a) ⊙ b" : "h ← gelu(a) ⊙ b",
             f.ffn == Ffn::SwiGlu ? "silu(v) = v / (1 + e^(−v))" : gelu);
      a5.add("return h · blk.ℓ.ffn_downᵀ", "[d_model]");
      break;
    case Ffn::GeluMlp:
      a5.add("h ← gelu(x · blk.ℓ.ffn_upᵀ + blk.ℓ.ffn_up.bias)", "[d_ff] = [" + n(d.d_ff) + "]; " + gelu);
      a5.add("return h · blk.ℓ.ffn_downᵀ + blk.ℓ.ffn_down.bias", "[d_model]");
      break;
    case Ffn::Moe:
      a5.add("r ← x · blk.ℓ.ffn_gate_inpᵀ", "router logits [n_expert] = [" + n(d.n_expert) + "]");
      a5.add("p ← softmax(r)", "over all " + n(d.n_expert) + " experts");
      a5.add("E ← the k = " + n(d.n_expert_used) + " experts with the largest p[e]", "ties: the lower index");
      a5.add("for e ∈ E:  y_e ← (silu(x · ffn_gate_exps[e]ᵀ) ⊙ (x · ffn_up_exps[e]ᵀ)) · ffn_down_exps[e]ᵀ",
             "SwiGLU of expert e (blk.ℓ.), d_ff = " + n(d.d_ff));
      a5.add("return Σ_{e ∈ E} p[e] · y_e", "p not renormalised over E");
      break;
  }
  s += a5.text();
  return s;
}

}  // namespace toy::card::detail

namespace toy::card {

std::vector<TensorSpec> tensors(const Card& c) {
  const detail::Dims d = detail::dims_of(c);
  const std::vector<detail::Param> ps = detail::params(c, d, detail::facts_of(c));
  std::vector<TensorSpec> out;
  for (const detail::Param& p : ps)
    if (p.where == detail::Param::Before) out.push_back({p.name, p.shape, p.init});
  for (int64_t l = 0; l < d.n_layer; ++l)
    for (const detail::Param& p : ps)
      if (p.where == detail::Param::Layer) out.push_back({"blk." + std::to_string(l) + "." + p.name, p.shape, p.init});
  for (const detail::Param& p : ps)
    if (p.where == detail::Param::After) out.push_back({p.name, p.shape, p.init});
  return out;
}

}  // namespace toy::card
