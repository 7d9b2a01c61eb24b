// primitives/primitives.h — L1: pure functions named after the math, each with its gradient.
//
// Glossary: B batch, T tokens in a sequence (queries), S keys (past + T), D or d_model model
// width, H n_head, Hkv n_kv_head, Dh d_head, V n_vocab. Shapes are outermost first.
//
// Every primitive computes its forward with the kernels layer and, when any input requires a
// gradient and grad mode is on, records its backward rule beside it (see tensor.h). Under
// NoGrad (inference) nothing is recorded.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "toy/tensor/tensor.h"

namespace toy {

// --- elementwise ------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);  // same shape
Tensor mul(const Tensor& a, const Tensor& b);  // same shape
Tensor scale(const Tensor& x, float s);        // s·x
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }

Tensor silu(const Tensor& x);                // x·σ(x)
Tensor gelu_tanh(const Tensor& x);           // 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))), ggml's fp16 table
Tensor softcap(const Tensor& x, float cap);  // cap·tanh(x/cap)
Tensor sigmoid(const Tensor& x);             // σ(x) = 1/(1 + exp(−x))

// --- projections ------------------------------------------------------------------------
// y = x·Wᵀ (+ b).  x: [..., in], W: [out, in] (any dtype; trainable when F32), b: [out] -> [..., out]
Tensor linear(const Tensor& x, const Tensor& W, const Tensor& b = {});
// Projections of the same x: y_i = linear(x, W_i, b_i), bit for bit (bs may be shorter: no bias).
// Without gradients they share one pass over the thread pool (kernels::matmul_wt_many).
std::vector<Tensor> linears(const Tensor& x, const std::vector<Tensor>& Ws, const std::vector<Tensor>& bs = {});

// --- low-rank adaptation (LoRA) -------------------------------------------------------
// A weight W [N, K] may carry low-rank terms (TensorImpl::low_rank); linear(x, W) then computes
//   y = x·Wᵀ + Σ_i scale_i · (drop(x)·A_iᵀ)·B_iᵀ          A_i: [r, K], B_i: [N, r]
// without ever forming W + scale·B·A (the base stays mapped, in its own dtype). drop is inverted
// dropout with probability `dropout->p`, applied only while A or B is being trained; its mask is a
// pure function of (seed, step, id, element), so a resumed run draws the same masks.
struct LowRankDropout {
  float p = 0;        // probability of zeroing an input element, e.g. 0.05
  uint64_t seed = 0;  // the run's seed
  int64_t step = 0;   // the training step in flight (the recipe advances it)
};
struct LowRankTerm {
  Tensor A, B;      // [r, K], [N, r] (any dtype; trainable when F32)
  float scale = 1;  // alpha / r times the user's scale
};
struct LowRank {
  std::vector<LowRankTerm> terms;
  std::shared_ptr<const LowRankDropout> dropout;  // null: none
  uint64_t id = 0;                                // tells the dropout masks of different weights apart
};
// A handle on W's storage (same shape, dtype, name) that carries `lr`; W itself is unchanged.
Tensor with_low_rank(const Tensor& W, LowRank lr);
// Inverted dropout: x ⊙ m / (1 − p) with m[i] ~ Bernoulli(1 − p) drawn from hash(seed, i).
Tensor dropout(const Tensor& x, float p, uint64_t seed);

// Rows of an embedding table. W: [V, D] (any dtype), ids: I32 [...] -> [..., D]
// With low-rank terms on W, row id of W + Σ scale·B·A: W[id] + Σ scale·B[id]·A (B: [V, r], A: [r, D];
// no dropout), without forming B·A: warm-start's donor table B seen through its lens A.
Tensor embedding(const Tensor& W, const Tensor& ids);

// --- normalisation ----------------------------------------------------------------------
// y = x / sqrt(mean(x²) + eps) · w over the last dimension.  x: [..., D], w: [D]
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps);
// y = (x − mean) / sqrt(var + eps) · w + b over the last dimension (biased variance).
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps);

// --- positions --------------------------------------------------------------------------
enum class RopeMode {
  Norm,  // rotate adjacent pairs (2i, 2i+1): GGUF llama weights (rows permuted by the converter)
  Neox,  // rotate pairs (i, i + n_rot/2): qwen2, qwen3, gemma2, olmoe (HF rotate_half)
};
struct Rope {
  RopeMode mode = RopeMode::Norm;
  int64_t n_rot = 0;      // rotated dimensions (≤ Dh), e.g. 64
  float base = 10000.0f;  // θ_i = p · base^(−2i/n_rot) / freq_factors[i]
  Tensor freq_factors;    // optional [n_rot/2] (Llama-3 scaling, `rope_freqs.weight`)
};
// cos θ and sin θ of every rotated pair at the positions of one forward pass. Built once per
// forward (like llama.cpp's inp_pos) and shared by every layer's q and k.
struct RopeAngles {
  Rope rope;                    // the rotation these angles are for
  std::vector<int32_t> pos;     // [B·T]: the position of row b, token t
  std::vector<int32_t> at;      // the distinct positions, sorted
  std::vector<float> cos, sin;  // [at.size(), n_rot/2]
};
// pos: I32 [B, T] (rows of a batch may sit at different positions: a batched decode step).
using RopeTable = std::shared_ptr<const RopeAngles>;
RopeTable rope_angles(const Tensor& pos, const Rope& r);
// Rotates each head of x[b, t] by the angles of its position.  x: [B, T, H, Dh] -> [B, T, H, Dh]
Tensor rope(const Tensor& x, const RopeTable& angles);

// --- attention --------------------------------------------------------------------------
struct AttentionOptions {
  float scale = 1.0f;    // multiplies q·k, usually 1/sqrt(Dh)
  float softcap = 0.0f;  // > 0: scores = cap·tanh(scores/cap) before the mask (gemma2)
  int64_t window = 0;    // > 0: a query at p sees keys at p−window < pk ≤ p (sliding window)
  bool causal = true;    // false: every query sees all S keys (an encoder: ViT)
};
// Grouped-query attention. Query t sits at position S − T + t and, when causal, sees keys ≤ its
// position (else all keys); query head h reads KV head h / (H / Hkv).
// k and v are F32, or both F16 (an F16 KV cache; no gradient then).
// q: [B, T, H, Dh], k, v: [B, S, Hkv, Dh] -> [B, T, H, Dh]
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);

// --- loss -------------------------------------------------------------------------------
// A target that is not counted (PyTorch's ignore_index): a prompt or padding position.
inline constexpr int32_t kIgnoreTarget = -100;
// Mean over the counted rows (target ≠ kIgnoreTarget) of −log softmax(logits)[target]; 0, with
// a zero gradient, when no row is counted.  logits: [N, V], targets: I32 [N] -> scalar
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

// --- reductions used by recipes ---------------------------------------------------------
Tensor sum(const Tensor& x);  // -> scalar

}  // namespace toy
