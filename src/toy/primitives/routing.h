// primitives/routing.h — L1: softmax, top-k and mixture-of-experts routing.
//
// Glossary as in primitives.h; N tokens (rows), E n_expert, k experts used per token.
#pragma once

#include "toy/primitives/primitives.h"

namespace toy {

// y = exp(x − max) / Σ exp(x − max) over the last dimension (sum in double, as ggml).
// Gradient: dx = y ⊙ (dy − Σ dy·y).  x: [..., C] -> [..., C]
Tensor softmax(const Tensor& x);

// Indices of the k largest values of each row, largest first; ties go to the lower index.
// Indices are not differentiable.  x: [..., C] -> I32 [..., k]
Tensor top_k(const Tensor& x, int64_t k);

struct MoeRoute {
  Tensor weight;  // [N, k] router probabilities of the chosen experts (differentiable)
  Tensor expert;  // I32 [N, k] the chosen experts, most probable first
};
// Softmax routing without renormalisation (OLMoE, llama.cpp `norm_w = false`):
// p = softmax(logits) over all E experts, expert = top_k(p, k), weight = p[expert].
// The k weights of a token therefore sum to less than 1.  logits: [N, E]
MoeRoute moe_route(const Tensor& logits, int64_t k);
// The same with each token's k weights divided by their sum, clamped below at 2⁻¹⁴ (Qwen3-Next,
// llama.cpp `norm_w = true`), with the gradient through the division.
MoeRoute moe_route_renormalized(const Tensor& logits, int64_t k);

}  // namespace toy
