// cards/render.cpp — the pseudocode of a card, written from the architecture's description
// (archs/: its variant, its keys with the values in force, its tensor table) with the file's
// hyper-parameters substituted.
//
// Notation (docs/cli.md, STYLE's vocabulary): T tokens, d_model, d_ff, n_head, n_kv_head,
// d_head, n_layer, n_vocab, n_ctx, ℓ a layer index; weights by GGUF name.
#include "toy/cards/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace toy::card {

namespace {

std::string n(int64_t v) { return std::to_string(v); }

// What each tensor does, by its GGUF name (the per-layer ones without `blk.ℓ.`): one glossary
// for every architecture. A tensor not listed here (an architecture from outside toy) gets none.
std::string role(const std::string& stem, const Variant& v, bool tied) {
  const std::string gain = v.norm == NormKind::Layer ? " (LayerNorm gain)" : " (RMSNorm gain)";
  const bool per_head = v.qk_norm == QkNorm::PerHead;
  static const std::map<std::string, std::string> fixed = {
      {"rope_freqs.weight", "RoPE frequency divisors f_i (Llama-3 scaling)"},
      {"position_embd.weight", "learned position embedding"},
      {"attn_norm.bias", "norm before attention (LayerNorm bias)"},
      {"attn_qkv.weight", "fused query/key/value projection"},
      {"attn_qkv.bias", "fused q/k/v bias"},
      {"attn_q.weight", "query projection"},
      {"attn_k.weight", "key projection"},
      {"attn_v.weight", "value projection"},
      {"attn_output.weight", "attention output projection"},
      {"attn_output.bias", "attention output bias"},
      {"attn_q.bias", "query bias"},
      {"attn_k.bias", "key bias"},
      {"attn_v.bias", "value bias"},
      {"ffn_norm.bias", "norm before the feed-forward network (LayerNorm bias)"},
      {"post_ffw_norm.weight", "norm of the feed-forward output (RMSNorm gain)"},
      {"ffn_gate.weight", "gate projection"},
      {"ffn_up.weight", "up projection"},
      {"ffn_up.bias", "up bias"},
      {"ffn_down.weight", "down projection"},
      {"ffn_down.bias", "down bias"},
      {"ffn_gate_inp.weight", "router"},
      {"ffn_down_exps.weight", "down projection of each expert"},
      {"ffn_gate_exps.weight", "gate projection of each expert"},
      {"ffn_up_exps.weight", "up projection of each expert"},
      {"ffn_gate_inp_shexp.weight", "shared expert's gate (σ of its dot with the input scales the shared expert)"},
      {"ffn_gate_shexp.weight", "gate projection of the shared expert"},
      {"ffn_up_shexp.weight", "up projection of the shared expert"},
      {"ffn_down_shexp.weight", "down projection of the shared expert"},
      {"attn_gate.weight", "Gated DeltaNet output gate z (the output is RMSNorm(o)·silu(z))"},
      {"ssm_conv1d.weight", "Gated DeltaNet causal convolution over the q, k, v channels"},
      {"ssm_dt.bias", "Gated DeltaNet decay bias (g = softplus(α + ssm_dt)·ssm_a)"},
      {"ssm_a", "Gated DeltaNet decay rate per value head, −exp(A_log)"},
      {"ssm_beta.weight", "Gated DeltaNet write strength β = σ(ssm_beta·x) per value head"},
      {"ssm_alpha.weight", "Gated DeltaNet decay input α per value head"},
      {"ssm_ba.weight", "Gated DeltaNet β and α projections, fused per key head"},
      {"ssm_norm.weight", "Gated DeltaNet output norm of each head (RMSNorm gain)"},
      {"ssm_out.weight", "Gated DeltaNet output projection"},
      {"attn_lambda_q1", "differential attention: λ = exp(λq₁·λk₁) − exp(λq₂·λk₂) + λ_init"},
      {"attn_lambda_k1", "differential attention: λk₁ of λ"},
      {"attn_lambda_q2", "differential attention: λq₂ of λ"},
      {"attn_lambda_k2", "differential attention: λk₂ of λ"},
      {"attn_sub_norm.weight", "differential attention: RMSNorm gain of each head's output, then ×(1 − λ_init)"},
      {"attn_ssmax", "Scalable-Softmax: s of each head (logits × s·log n, n the keys attended)"},
      {"output_norm.bias", "final norm (LayerNorm bias)"},
      {"output.weight", "unembedding"},
  };
  if (stem == "token_embd.weight") return tied ? "token embedding; also the unembedding (tied)" : "token embedding";
  if (stem == "attn_norm.weight") return "norm before attention" + gain;
  if (stem == "ffn_norm.weight") return "norm before the feed-forward network" + gain;
  if (stem == "output_norm.weight") return "final norm" + gain;
  if (stem == "post_attention_norm.weight")  // gemma2: a sandwich norm; the Qwen3 hybrids: the pre-FFN norm
    return v.sandwich_norms ? "norm of the attention output (RMSNorm gain)"
                            : "norm before the feed-forward network (RMSNorm gain)";
  if (stem == "attn_q_norm.weight")
    return per_head ? "RMSNorm gain of each query head" : "RMSNorm gain over all query heads";
  if (stem == "attn_k_norm.weight")
    return per_head ? "RMSNorm gain of each key head" : "RMSNorm gain over all key heads";
  auto it = fixed.find(stem);
  return it == fixed.end() ? "" : it->second;
}

// A tensor's name without its layer: "blk.ℓ.attn_q.weight" and "blk.3.attn_q.weight" -> "attn_q.weight".
std::string stem_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return name;
  const size_t dot = name.find('.', 4);
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// The sizes and values the formulas use.
struct Dims {
  int64_t n_vocab, d_model, n_layer, n_head, n_kv_head, d_head, d_value, d_ff, n_ctx, n_rot = 0;
  int64_t n_expert = 0, n_expert_used = 0, d_shexp = 0;  // d_shexp: the shared expert's hidden size (qwen3next)
  int64_t window = 0, window_pattern = 0;                // gemma2 sliding window
  int64_t d_conv = 0, d_state = 0, n_k_head = 0, n_v_head = 0, interval = 0;  // Gated DeltaNet hybrids
  double eps = 0, rope_base = 10000;
  double attn_cap = 0, final_cap = 0;  // gemma2 soft-caps
};

Dims dims_of(const Description& desc) {
  const ModelConfig& c = desc.config;
  const Variant& v = desc.variant;
  auto opt = [&](const char* key, double def) {
    for (const auto& [k, x] : desc.values)
      if (k == key) return x;
    return def;
  };
  Dims d{.n_vocab = c.n_vocab,
         .d_model = c.d_model,
         .n_layer = c.n_layer,
         .n_head = c.n_head,
         .n_kv_head = c.n_kv_head,
         .d_head = c.d_head,
         .d_value = c.d_head,
         .d_ff = c.d_ff,
         .n_ctx = c.n_ctx};
  d.n_rot = int64_t(opt("rope.dimension_count", double(c.d_head)));
  d.rope_base = opt("rope.freq_base", 10000);
  d.eps = opt(v.norm == NormKind::Layer ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon", 0);
  d.n_expert = int64_t(opt("expert_count", 0));
  d.n_expert_used = int64_t(opt("expert_used_count", 0));
  d.d_ff = int64_t(opt("expert_feed_forward_length", double(d.d_ff)));  // an expert's, where it differs
  d.d_shexp = int64_t(opt("expert_shared_feed_forward_length", 0));
  d.window = int64_t(opt("attention.sliding_window", 0));
  d.window_pattern = int64_t(opt("attention.sliding_window_pattern", 2));
  d.attn_cap = opt("attn_logit_softcapping", 0);
  d.final_cap = opt("final_logit_softcapping", 0);
  d.d_conv = int64_t(opt("ssm.conv_kernel", 0));
  d.d_state = int64_t(opt("ssm.state_size", 0));
  d.n_k_head = int64_t(opt("ssm.group_count", 0));
  d.n_v_head = int64_t(opt("ssm.time_step_rank", 0));
  d.interval = int64_t(opt("full_attention_interval", 0));
  return d;
}

bool has_tensor(const Description& d, const std::string& name) {
  return std::any_of(d.tensors.begin(), d.tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
}
// The tensor `stem` of layer ℓ: in the list every layer shares (`blk.ℓ.`), or in the layer's own
// (a hybrid, whose layers differ, lists each layer's tensors under `blk.<ℓ>.`).
const TensorSpec* layer_tensor(const Description& d, int64_t l, const std::string& stem) {
  for (const TensorSpec& t : d.tensors)
    if (t.name == "blk.ℓ." + stem || t.name == "blk." + n(l) + "." + stem) return &t;
  return nullptr;
}
bool any_layer_has(const Description& d, const std::string& stem) {
  for (int64_t l = 0; l < d.config.n_layer; ++l)
    if (layer_tensor(d, l, stem)) return true;
  return false;
}
// A hybrid's recurrent layers are those with a Gated DeltaNet convolution.
bool recurrent(const Description& d, int64_t l) { return layer_tensor(d, l, "ssm_conv1d.weight") != nullptr; }

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
      const std::string num = std::to_string(i + 1);
      s += std::string(num.size() < 2 ? 2 - num.size() : 0, ' ') + num + "  " + lines[i].first;
      if (!lines[i].second.empty()) s += std::string(w + 3 - width(lines[i].first), ' ') + "▷ " + lines[i].second;
      s += "\n";
    }
    return s + "```\n\n";
  }
};

std::string shape_text(const TensorSpec& p) {
  std::string sym, num;
  for (size_t i = 0; i < p.sym.size(); ++i) {
    sym += (i ? ", " : "") + p.sym[i];
    num += (i ? ", " : "") + n(p.shape[i]);
  }
  return "[" + sym + "] = [" + num + "]";
}

std::string fl(double v) { return short_float(v, true); }

// Algorithm 6: the Gated DeltaNet layer of a hybrid (blocks/delta_net.h), written as the
// token-by-token recurrence that toy's chunked kernel is checked against.
std::string delta_net_algorithm(const Description& desc, const Dims& d, const Variant& f) {
  const int64_t Ck = d.n_k_head * d.d_state, C = 2 * Ck + d.n_v_head * d.d_state, r = d.n_v_head / d.n_k_head;
  std::string s = "## Algorithm 6: GatedDeltaNet(X̃ | ℓ), the layers ℓ ∉ 𝒜\n\n";
  s += "**Input:** X̃ ∈ ℝ^(T × d_model), rows at positions p₀ … p₀+T−1, and the layer's cache: the last d_conv − 1 "
       "inputs of its convolution and the state S₀[h] ∈ ℝ^(D_k × D_v) of each value head h (zeros when p₀ = 0).  \n"
       "**Output:** ∈ ℝ^(T × d_model), and the cache after the T tokens.  \n"
       "**Hyper-parameters:** H_k = " +
       n(d.n_k_head) + ", H_v = " + n(d.n_v_head) + ", D_k = D_v = d_state = " + n(d.d_state) +
       ", d_conv = " + n(d.d_conv) + ", ε = " + fl(d.eps) + ".\n\n";
  Algo a;
  a.add("Y ← X̃ · blk.ℓ.attn_qkvᵀ", "[T, 2·H_k·D_k + H_v·D_v] = [T, " + n(C) + "]");
  a.add("Y[t] ← silu(Σ_{j=0}^{d_conv−1} blk.ℓ.ssm_conv1d[:, j] ⊙ Y[t − d_conv + 1 + j]) for every t",
        "causal convolution of each channel; rows before t = 0 from the cache");
  a.add("Q ← Y[:, 0 : " + n(Ck) + "],  K ← Y[:, " + n(Ck) + " : " + n(2 * Ck) + "],  V ← Y[:, " + n(2 * Ck) + " : " +
            n(C) + "]",
        "[T, H_k, D_k], [T, H_k, D_k], [T, H_v, D_v]");
  a.add("Q[t, i] ← Q[t, i] / max(‖Q[t, i]‖, ε),  K[t, i] ← K[t, i] / max(‖K[t, i]‖, ε)", "L2 norm of each head");
  a.add("Z ← X̃ · blk.ℓ.attn_gateᵀ", "[T, H_v, D_v], the output gate");
  if (any_layer_has(desc, "ssm_ba.weight"))
    a.add("[b | a] ← X̃ · blk.ℓ.ssm_baᵀ",
          "[T, 2·H_v]: per key head its " + n(r) + " β rows, then its " + n(r) + " α rows");
  else
    a.add("b ← X̃ · blk.ℓ.ssm_betaᵀ,  a ← X̃ · blk.ℓ.ssm_alphaᵀ", "[T, H_v] each");
  a.add("β ← σ(b),  g ← softplus(a + blk.ℓ.ssm_dt.bias) · blk.ℓ.ssm_a",
        "write strength in (0, 1); log-decay g ≤ 0 (ssm_a = −exp(A_log))");
  a.add("for h = 0 … H_v−1 = " + n(d.n_v_head - 1) + ":");
  if (f.delta_heads == HeadMap::Tiled)
    a.add("    i ← h mod H_k = h mod " + n(d.n_k_head), "the key head value head h reads");
  else
    a.add("    i ← ⌊h / (H_v / H_k)⌋ = ⌊h / " + n(r) + "⌋", "the key head value head h reads");
  a.add("    S ← S₀[h]", "[D_k, D_v] = [" + n(d.d_state) + ", " + n(d.d_state) + "]");
  a.add("    for t = 0 … T−1:");
  a.add("        S ← exp(g[t, h]) · S", "decay");
  a.add("        u ← Sᵀ · K[t, i]", "what the state recalls for this key");
  a.add("        S ← S + K[t, i] · (β[t, h] · (V[t, h] − u))ᵀ", "the delta rule: recall moves towards V[t, h]");
  a.add("        O[t, h] ← Sᵀ · Q[t, i] / √D_k", "[D_v]; √D_k = √" + n(d.d_state));
  a.add("    S₀[h] ← S", "the cache");
  a.add("O[t, h] ← RMSNorm(O[t, h] | blk.ℓ.ssm_norm) ⊙ silu(Z[t, h]) for every t, h",
        "gated norm, each head's " + n(d.d_state) + " values on their own");
  a.add("return [O[:, 0], …, O[:, H_v−1]] · blk.ℓ.ssm_outᵀ", "[T, d_model]");
  s += a.text();
  return s +
         "toy runs lines 10–16 in chunks of 64 tokens (the WY / UT form: matrix products and one triangular "
         "solve per chunk, `kernels/delta_rule.cpp`) with the same result; the recurrence above is the "
         "reference it is tested against.\n\n";
}

}  // namespace

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

std::string render_algorithms(const Card& c, const Description& desc) {
  const Variant& f = desc.variant;
  const Dims d = dims_of(desc);
  const bool hybrid = any_layer_has(desc, "ssm_conv1d.weight");
  const bool fused_qkv = has_tensor(desc, "blk.ℓ.attn_qkv.weight");  // gpt2's; a hybrid's attn_qkv is its recurrence's
  const bool qkv_bias = has_tensor(desc, "blk.ℓ.attn_q.bias") || has_tensor(desc, "blk.ℓ.attn_qkv.bias");
  const bool output_bias = has_tensor(desc, "blk.ℓ.attn_output.bias");
  const bool differential = any_layer_has(desc, "attn_lambda_q1"), ssmax = any_layer_has(desc, "attn_ssmax");
  bool gated_q = false;  // attn_q gives each head's query and an output gate (qwen35, qwen3next)
  for (const TensorSpec& t : desc.tensors)
    if (stem_of(t.name) == "attn_q.weight") gated_q = t.shape[0] == 2 * d.n_head * d.d_head;
  const std::string ffn_norm = any_layer_has(desc, "ffn_norm.weight") ? "ffn_norm" : "post_attention_norm";
  const bool shared_expert = any_layer_has(desc, "ffn_gate_inp_shexp.weight");
  const bool rope = f.positions != Positions::Learned, gqa = d.n_kv_head != d.n_head;
  const std::string norm = f.norm == NormKind::Rms ? "RMSNorm" : "LayerNorm";
  const std::string ffn = f.ffn == FfnKind::SwiGlu    ? "SwiGLU"
                          : f.ffn == FfnKind::GeGlu   ? "GeGLU"
                          : f.ffn == FfnKind::GeluMlp ? "MLP"
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
  row("d_ff", f.ffn == FfnKind::Moe ? "hidden size of each expert" : "feed-forward hidden size", n(d.d_ff));
  if (f.ffn == FfnKind::Moe) {
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
  if (hybrid) {
    row("𝒜", "attention layers: (ℓ + 1) mod full_attention_interval = 0; the others are Gated DeltaNet",
        "interval " + n(d.interval));
    row("H_k", "Gated DeltaNet query/key heads", n(d.n_k_head));
    row("H_v", "Gated DeltaNet value heads", n(d.n_v_head));
    row("d_state", "size of a Gated DeltaNet head (D_k = D_v); its state is [D_k, D_v]", n(d.d_state));
    row("d_conv", "width of the causal convolution", n(d.d_conv));
  }

  // --- parameters ---
  s += "\n## Parameters\n\nθ is these tensors (GGUF names; `blk.ℓ.` for each layer ℓ = 0 … " + n(d.n_layer - 1) +
       "; shapes outermost first).\n\n| tensor | shape | role |\n|---|---|---|\n";
  for (const TensorSpec& p : desc.tensors)
    s += "| `" + p.name + "` | " + shape_text(p) + " | " + role(stem_of(p.name), f, c.tied_output) + " |\n";
  s += "\nParameters: " + std::to_string(desc.parameter_count()) + ".\n\n";

  // --- the layer pattern of a hybrid ---
  std::string attention_layers;  // "3, 7"
  if (hybrid) {
    std::string pattern;
    for (int64_t l = 0; l < d.n_layer; ++l) {
      if (l > 0 && d.interval > 1 && l % d.interval == 0) pattern += ' ';
      pattern += recurrent(desc, l) ? 'G' : 'A';
      if (!recurrent(desc, l)) attention_layers += (attention_layers.empty() ? "" : ", ") + n(l);
    }
    s += "## Layer pattern\n\n`" + pattern +
         "`\n\nLayer ℓ is an attention layer (A, Algorithm 2) when (ℓ + 1) mod full_attention_interval = 0, "
         "full_attention_interval = " +
         n(d.interval) + ": here " + (attention_layers.empty() ? "none" : "ℓ ∈ 𝒜 = {" + attention_layers + "}") +
         ". Every other layer is a Gated DeltaNet layer (G, Algorithm 6): linear attention whose state, one [D_k, "
         "D_v] matrix per value head, decays and is corrected token by token (the gated delta rule). A G layer's "
         "cache is its state and its convolution's last inputs; only A layers keep keys and values.\n\n";
  }

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
  if (hybrid) {
    a1.add("    if ℓ ∈ 𝒜:  A ← Attention(X̃ | ℓ)", "Algorithm 2; 𝒜 = {" + attention_layers + "}");
    a1.add("    else:      A ← GatedDeltaNet(X̃ | ℓ)", "Algorithm 6; [T, " + n(d.d_model) + "]");
  } else {
    a1.add("    A ← Attention(X̃ | ℓ)", "Algorithm 2; [T, " + n(d.d_model) + "]");
  }
  if (f.sandwich_norms) a1.add("    A ← RMSNorm(A | blk.ℓ.post_attention_norm)", "norm of the sub-layer output");
  a1.add("    X ← X + A", "residual");
  a1.add("    X̃ ← " + norm + "(X | blk.ℓ." + ffn_norm + ")");
  a1.add("    F ← " + ffn + "(X̃ | ℓ)", "Algorithm 5, each row");
  if (f.sandwich_norms) a1.add("    F ← RMSNorm(F | blk.ℓ.post_ffw_norm)");
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
       (rope ? ", RoPE" : "") + (f.sliding_window ? ", soft-capped, sliding window on local layers" : "") +
       (gated_q ? ", gated output" : "") + (differential ? ", differential" : "") +
       (ssmax ? ", Scalable-Softmax" : "") + (hybrid ? " (the layers ℓ ∈ 𝒜)" : "") + "\n\n";
  s += "**Input:** X̃ ∈ ℝ^(T × d_model), rows at positions p₀ … p₀+T−1 (p₀ = 0 for a whole sequence; a KV cache "
       "holds the keys and values of earlier positions and extends K and V).  \n**Output:** ∈ ℝ^(T × d_model).\n\n";
  Algo a2;
  const std::string qb = qkv_bias ? " + blk.ℓ.attn_q.bias" : "", kb = qkv_bias ? " + blk.ℓ.attn_k.bias" : "",
                    vb = qkv_bias ? " + blk.ℓ.attn_v.bias" : "";
  if (fused_qkv) {
    const int64_t q = d.n_head * d.d_head, kv = d.n_kv_head * d.d_head;
    a2.add("Y ← X̃ · blk.ℓ.attn_qkvᵀ" + std::string(qkv_bias ? " + blk.ℓ.attn_qkv.bias" : ""),
           "[T, " + n(q + 2 * kv) + "]");
    a2.add("Q ← Y[:, 0 : " + n(q) + "],  K ← Y[:, " + n(q) + " : " + n(q + kv) + "],  V ← Y[:, " + n(q + kv) + " : " +
               n(q + 2 * kv) + "]",
           "each viewed as [T, heads, d_head]");
  } else if (gated_q) {
    a2.add("Y ← X̃ · blk.ℓ.attn_qᵀ", "[T, n_head, 2·d_head] = [T, " + n(d.n_head) + ", " + n(2 * d.d_head) + "]");
    a2.add("Q[t, h] ← Y[t, h, 0 : d_head],  G[t, h] ← Y[t, h, d_head : 2·d_head]",
           "each head's query, then its output gate");
    a2.add("K ← X̃ · blk.ℓ.attn_kᵀ", kd);
    a2.add("V ← X̃ · blk.ℓ.attn_vᵀ", "[T, n_kv_head, d_value]");
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
  const std::string half = n(d.d_head / 2);
  if (differential) {
    a2.add("Q[t, h] = [Q₁[t, h] | Q₂[t, h]],  K[t, g] = [K₁[t, g] | K₂[t, g]]",
           "each head as two halves of d_head/2 = " + half);
    a2.add("Qᵢ[t, h] ← RoPE(Qᵢ[t, h], p₀ + t),  Kᵢ[t, g] ← RoPE(Kᵢ[t, g], p₀ + t),  i = 1, 2",
           "Algorithm 3 on each half");
  } else if (rope) {
    a2.add("Q[t, h] ← RoPE(Q[t, h], p₀ + t) for every t, h", "Algorithm 3");
    a2.add("K[t, g] ← RoPE(K[t, g], p₀ + t) for every t, g");
  }
  if (ssmax)
    a2.add("Q[t, h] ← Q[t, h] · blk.ℓ.attn_ssmax[h] · log n_t,  n_t = p₀ + t + 1",
           "Scalable-Softmax: logits × s·log n, n_t the keys query t attends");
  if (differential) {
    a2.add("λ_init ← 0.8 − 0.6·exp(−0.3·ℓ)", "by depth");
    a2.add(
        "λ ← exp(blk.ℓ.attn_lambda_q1 · blk.ℓ.attn_lambda_k1) − exp(blk.ℓ.attn_lambda_q2 · blk.ℓ.attn_lambda_k2) + "
        "λ_init",
        "one scalar per layer");
  }
  a2.add("for h = 0 … n_head−1 = " + n(d.n_head - 1) + ":");
  if (gqa)
    a2.add("    g ← ⌊h / (n_head / n_kv_head)⌋ = ⌊h / " + n(d.n_head / d.n_kv_head) + "⌋",
           "consecutive query heads share a key/value head");
  else
    a2.add("    g ← h");
  const std::string rs = "√d_head = √" + n(d.d_head);
  if (differential) {
    a2.add("    Sᵢ ← Qᵢ[:, h] · Kᵢ[:, g]ᵀ / √(d_head/2),  i = 1, 2", "[T, T] each; √(d_head/2) = √" + half);
    a2.add("    Sᵢ[t, t′] ← −∞ where t′ > t", "causal mask");
    a2.add("    O[:, h] ← (softmax(S₁) − λ · softmax(S₂)) · V[:, g]", "softmax over t′; two maps, the same values");
    a2.add("    O[t, h] ← (1 − λ_init) · RMSNorm(O[t, h] | blk.ℓ.attn_sub_norm) for every t",
           "each head's " + n(d.d_head) + " values on their own");
  } else if (f.softcap) {
    a2.add("    S ← (Q[:, h] / √d_head) · K[:, g]ᵀ", "[T, T]; " + rs + ", the scale applied to Q first");
    a2.add("    S ← c_attn · tanh(S / c_attn),  c_attn = " + fl(d.attn_cap), "soft-cap");
  } else {
    a2.add("    S ← Q[:, h] · K[:, g]ᵀ / √d_head", "[T, T]; " + rs);
  }
  if (!differential) a2.add("    S[t, t′] ← −∞ where t′ > t", "causal mask");
  if (f.sliding_window)
    a2.add((d.window_pattern == 2 ? std::string("    if ℓ is even")
                                  : "    if ℓ mod " + n(d.window_pattern) + " < " + n(d.window_pattern - 1)) +
               ":  S[t, t′] ← −∞ where t − t′ ≥ w = " + n(d.window),
           "local layers see the last " + n(d.window) + " positions");
  if (!differential) a2.add("    O[:, h] ← softmax(S) · V[:, g]", "softmax over t′; [T, d_value]");
  if (gated_q) a2.add("    O[:, h] ← O[:, h] ⊙ σ(G[:, h])", "output gate; σ(v) = 1 / (1 + e^(−v))");
  a2.add("return [O[:, 0], …, O[:, n_head−1]] · blk.ℓ.attn_outputᵀ" +
             std::string(output_bias ? " + blk.ℓ.attn_output.bias" : ""),
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
  s += "## Algorithm 4: " + norm + "(x | " + std::string(f.norm == NormKind::Rms ? "w" : "w, b") + ")\n\n";
  s += "**Input:** x ∈ ℝ^d (one row).  **Output:** ∈ ℝ^d.  **Hyper-parameters:** ε = " + fl(d.eps) + ".\n\n";
  Algo a4;
  if (f.norm == NormKind::Rms) {
    a4.add("r ← 1 / √(mean(x ⊙ x) + ε)");
    a4.add("return (r · x) ⊙ w");
  } else {
    a4.add("μ ← mean(x)");
    a4.add("σ² ← mean((x − μ) ⊙ (x − μ))", "biased variance");
    a4.add("return (x − μ) / √(σ² + ε) ⊙ w + b");
  }
  s += a4.text();
  if (*f.norm_note) s += std::string(f.norm_note) + "\n\n";

  // --- algorithm 5: the feed-forward network ---
  s += "## Algorithm 5: " + ffn + "(x | ℓ)\n\n**Input:** x ∈ ℝ^d_model (one row).  **Output:** ∈ ℝ^d_model.\n\n";
  Algo a5;
  const std::string gelu = "gelu(v) = ½·v·(1 + tanh(√(2/π)·(v + 0.044715·v³)))";
  switch (f.ffn) {
    case FfnKind::SwiGlu:
    case FfnKind::GeGlu:
      a5.add("a ← x · blk.ℓ.ffn_gateᵀ", "[d_ff] = [" + n(d.d_ff) + "]");
      a5.add("b ← x · blk.ℓ.ffn_upᵀ", "[d_ff]");
      a5.add(f.ffn == FfnKind::SwiGlu ? "h ← silu(a) ⊙ b" : "h ← gelu(a) ⊙ b",
             f.ffn == FfnKind::SwiGlu ? "silu(v) = v / (1 + e^(−v))" : gelu);
      a5.add("return h · blk.ℓ.ffn_downᵀ", "[d_model]");
      break;
    case FfnKind::GeluMlp:
      a5.add("h ← gelu(x · blk.ℓ.ffn_upᵀ + blk.ℓ.ffn_up.bias)", "[d_ff] = [" + n(d.d_ff) + "]; " + gelu);
      a5.add("return h · blk.ℓ.ffn_downᵀ + blk.ℓ.ffn_down.bias", "[d_model]");
      break;
    case FfnKind::Moe:
      a5.add("r ← x · blk.ℓ.ffn_gate_inpᵀ", "router logits [n_expert] = [" + n(d.n_expert) + "]");
      a5.add("p ← softmax(r)", "over all " + n(d.n_expert) + " experts");
      a5.add("E ← the k = " + n(d.n_expert_used) + " experts with the largest p[e]", "ties: the lower index");
      if (f.moe_renormalize) a5.add("p[e] ← p[e] / Σ_{e′ ∈ E} p[e′] for e ∈ E", "the k weights renormalised");
      a5.add("for e ∈ E:  y_e ← (silu(x · ffn_gate_exps[e]ᵀ) ⊙ (x · ffn_up_exps[e]ᵀ)) · ffn_down_exps[e]ᵀ",
             "SwiGLU of expert e (blk.ℓ.), d_ff = " + n(d.d_ff));
      a5.add(std::string(shared_expert ? "y ← " : "return ") + "Σ_{e ∈ E} p[e] · y_e",
             f.moe_renormalize ? "" : "p not renormalised over E");
      if (shared_expert) {
        a5.add("y_s ← (silu(x · blk.ℓ.ffn_gate_shexpᵀ) ⊙ (x · blk.ℓ.ffn_up_shexpᵀ)) · blk.ℓ.ffn_down_shexpᵀ",
               "the shared expert, every token; hidden size " + n(d.d_shexp));
        a5.add("return y + σ(x · blk.ℓ.ffn_gate_inp_shexp) · y_s", "its gate, one scalar per token");
      }
      break;
  }
  s += a5.text();
  if (hybrid) s += delta_net_algorithm(desc, d, f);
  return s;
}

}  // namespace toy::card
