// blocks/blocks.h — L2: the pieces a transformer layer is made of, owning no state.
//
// A block reads its weights from a plain struct whose fields carry GGUF names (attn_q,
// ffn_gate, ...). Per-request state (the KV cache) comes in through Ctx, owned by the engine.
#pragma once

#include <utility>
#include <vector>

#include "toy/primitives/primitives.h"

namespace toy {

// Keys and values of every attention layer for one sequence: [n_ctx, Hkv, Dh] per layer, in F32
// or in F16 (half the memory; llama.cpp's default; attention reads the halves directly).
class KvCache {
 public:
  // Rows for the layers ℓ with attends[ℓ] (a hybrid's recurrent layers keep a RecurrentState
  // instead, so they get none); store() into another layer throws std::logic_error.
  // On `device` (its memory; the CPU's by default).
  KvCache(const std::vector<bool>& attends, int64_t n_ctx, int64_t n_kv_head, int64_t d_head, DType dtype = DType::F32,
          Device device = Device::cpu());
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_kv_head, int64_t d_head, DType dtype = DType::F32)
      : KvCache(std::vector<bool>(size_t(n_layer), true), n_ctx, n_kv_head, d_head, dtype) {}
  // Writes k, v ([1, T, Hkv, Dh], f32; rounded to the cache's dtype) at positions
  // [pos0, pos0 + T) of `layer` and returns views of positions [0, pos0 + T): ([1, S, Hkv, Dh],
  // [1, S, Hkv, Dh]) in the cache's dtype.
  std::pair<Tensor, Tensor> store(int64_t layer, int64_t pos0, const Tensor& k, const Tensor& v);
  int64_t n_ctx() const { return n_ctx_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const;

 private:
  int64_t n_ctx_;
  DType dtype_;
  std::vector<Tensor> k_, v_;  // per layer; undefined for a layer that does not attend
};

// What the recurrent layers (Gated DeltaNet) of one sequence carry from one forward pass to the
// next: per layer, the convolution window and the delta-rule state. A layer makes its own on its
// first token (the engine need not know its sizes); `seen` counts the tokens folded in, so a
// layer asked to continue at another position refuses instead of computing garbage.
class RecurrentState {
 public:
  struct Layer {
    Tensor conv;       // [d_conv − 1, C] the last inputs of the convolution, oldest first
    Tensor delta;      // [Hv, Dk, Dv] the delta-rule state
    int64_t seen = 0;  // tokens folded in
  };
  Layer& layer(int64_t l);      // grows the list as needed
  RecurrentState copy() const;  // deep: the copy's tensors (on the same device) are its own
  void clear() { layers_.clear(); }
  bool empty() const { return layers_.empty(); }
  size_t bytes() const;

 private:
  std::vector<Layer> layers_;
};

// Where one sequence's new tokens sit, and the caches that hold its past.
struct Seq {
  int64_t pos0 = 0;                 // position of the first token of this forward pass
  KvCache* kv = nullptr;            // null: no cache (training on whole sequences)
  RecurrentState* state = nullptr;  // the recurrent layers' state; null: start from zero, keep nothing
};

// What a forward pass needs besides the tokens. Usually every row of the batch sits at the same
// place (one Seq: training, a prompt); a batched decode step gives one Seq per row, so that row b
// continues its own sequence, at its own position, in its own cache.
struct Ctx {
  std::vector<Seq> seqs = {Seq{}};  // 1 (shared by every row) or B
  // Only the last position's logits are wanted (a prompt fed for generation): the output
  // projection, ~20% of a small model's work, then runs on one row instead of T.
  bool last_logits = false;
  // Return the final hidden states [B, T, D] (after the output norm, before the output
  // projection) instead of logits: what an embedding is pooled from (llama.cpp's t_embd).
  bool hidden_states = false;
  const Seq& seq(int64_t b) const { return seqs.size() == 1 ? seqs[0] : seqs[size_t(b)]; }
  // I32 [B, T]: seq(b).pos0 + t. Throws ShapeError when there are neither 1 nor B sequences.
  Tensor positions(int64_t B, int64_t T) const;
  Tensor positions(const Tensor& tokens) const;  // for tokens I32 [B, T]
};

// The positions whose logits a forward pass computes: x [B, T, D] itself, or [B, 1, D] holding
// position T − 1 when ctx.last_logits. Architectures apply it before the output norm.
Tensor logit_positions(const Tensor& x, const Ctx& ctx);

enum class QkNorm {
  None,
  PerHead,    // qwen3: RMSNorm over each head's Dh values (weight [Dh])
  FullWidth,  // olmoe: RMSNorm over the whole projection (weight [H·Dh])
};

struct AttentionWeights {
  Tensor attn_q, attn_k, attn_v, attn_output;    // [H·Dh, D], [Hkv·Dh, D], [Hkv·Dh, D], [D, H·Dh]
  Tensor attn_q_bias, attn_k_bias, attn_v_bias;  // optional [H·Dh], [Hkv·Dh], [Hkv·Dh] (qwen2)
  Tensor attn_q_norm, attn_k_norm;               // optional (QkNorm)
};

struct AttentionConfig {
  int64_t n_head = 0, n_kv_head = 0, d_head = 0;  // e.g. 9, 3, 64
  Rope rope;
  QkNorm qk_norm = QkNorm::None;
  float norm_eps = 1e-5f;    // for the q/k norms
  AttentionOptions options;  // scale, softcap, window
};

// Causal attention of each row over its own sequence. Without a cache: over the row's k, v. With
// one: the row's k, v are written to its sequence's cache first and its queries see the whole
// cache (a row alone or in a batch gets the same bits).
// q: [B, T, H, Dh], k, v: [B, T, Hkv, Dh] -> [B, T, H, Dh]
Tensor sequence_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, const Ctx& ctx,
                          int64_t layer);

// Multi-head self-attention with RoPE (the angles of this forward pass, built once by the
// architecture) and, when the context has one, the KV cache.  x: [B, T, D] -> [B, T, D]
Tensor self_attention(const AttentionWeights& w, const AttentionConfig& c, const Tensor& x, const RopeTable& angles,
                      const Ctx& ctx, int64_t layer);

struct SwigluWeights {
  Tensor ffn_gate, ffn_up, ffn_down;  // [d_ff, D], [d_ff, D], [D, d_ff]
};
// down(silu(gate·x) ⊙ up·x).  x: [..., D] -> [..., D]
Tensor swiglu_ffn(const SwigluWeights& w, const Tensor& x);

// The Llama-family layer: two pre-norm residual lines.
struct PreNormLayer {
  Tensor attn_norm, ffn_norm;  // [D]
  AttentionWeights attn;
  SwigluWeights ffn;
};
// x: [B, T, D] -> [B, T, D]
Tensor pre_norm_block(const PreNormLayer& L, const AttentionConfig& c, float eps, const Tensor& x,
                      const RopeTable& angles, const Ctx& ctx, int64_t layer);

}  // namespace toy
