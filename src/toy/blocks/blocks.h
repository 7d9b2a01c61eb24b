// blocks/blocks.h — L2: the pieces a transformer layer is made of, owning no state.
//
// A block reads its weights from a plain struct whose fields carry GGUF names (attn_q,
// ffn_gate, ...). Per-request state (the KV cache) comes in through Ctx, owned by the engine.
#pragma once

#include <utility>
#include <vector>

#include "toy/primitives/primitives.h"

namespace toy {

// Keys and values of every layer for one sequence: [n_ctx, Hkv, Dh] per layer, in F32 or in
// F16 (half the memory; llama.cpp's default; attention reads the halves directly).
class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_kv_head, int64_t d_head, DType dtype = DType::F32);
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
  std::vector<Tensor> k_, v_;
};

// What a forward pass needs besides the tokens: where the tokens sit, and the cache (null when
// training on whole sequences).
struct Ctx {
  int64_t pos0 = 0;
  KvCache* kv = nullptr;
};

enum class QkNorm {
  None,
  PerHead,    // qwen3: RMSNorm over each head's Dh values (weight [Dh])
  FullWidth,  // olmoe: RMSNorm over the whole projection (weight [H·Dh])
};

struct AttentionWeights {
  Tensor attn_q, attn_k, attn_v, attn_output;          // [H·Dh, D], [Hkv·Dh, D], [Hkv·Dh, D], [D, H·Dh]
  Tensor attn_q_bias, attn_k_bias, attn_v_bias;       // optional [H·Dh], [Hkv·Dh], [Hkv·Dh] (qwen2)
  Tensor attn_q_norm, attn_k_norm;                    // optional (QkNorm)
};

struct AttentionConfig {
  int64_t n_head = 0, n_kv_head = 0, d_head = 0;      // e.g. 9, 3, 64
  Rope rope;
  QkNorm qk_norm = QkNorm::None;
  float norm_eps = 1e-5f;                             // for the q/k norms
  AttentionOptions options;                           // scale, softcap, window
};

// Multi-head self-attention with RoPE and (when ctx.kv is set) the KV cache.
// x: [B, T, D] -> [B, T, D]
Tensor self_attention(const AttentionWeights& w, const AttentionConfig& c, const Tensor& x, const Ctx& ctx, int64_t layer);

struct SwigluWeights {
  Tensor ffn_gate, ffn_up, ffn_down;                  // [d_ff, D], [d_ff, D], [D, d_ff]
};
// down(silu(gate·x) ⊙ up·x).  x: [..., D] -> [..., D]
Tensor swiglu_ffn(const SwigluWeights& w, const Tensor& x);

// The Llama-family layer: two pre-norm residual lines.
struct PreNormLayer {
  Tensor attn_norm, ffn_norm;                         // [D]
  AttentionWeights attn;
  SwigluWeights ffn;
};
// x: [B, T, D] -> [B, T, D]
Tensor pre_norm_block(const PreNormLayer& L, const AttentionConfig& c, float eps, const Tensor& x, const Ctx& ctx,
                      int64_t layer);

}  // namespace toy
