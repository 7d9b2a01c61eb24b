#pragma once
// kernels/vulkan/attention.h — grouped-query attention of one sequence on a Vulkan device
// (attention.comp beside it): the twin of kernels::attention (inference: no probabilities kept).
// Deterministic; within the bound of its test of the double reference. Only in a TOY_VULKAN build.
#include <cstdint>

#include "toy/kernels/vulkan/context.h"
#include "toy/tensor/dtype.h"

namespace toy::kernels::vulkan {

struct AttentionParams {
  float scale = 1.0f;    // multiplies q·k
  float softcap = 0.0f;  // > 0: s = cap·tanh(s/cap)
  int64_t window = 0;    // > 0: query at p sees keys p − window < j ≤ p (causal only)
  bool causal = true;
};

class Attention {
 public:
  explicit Attention(Context& ctx);
  // o [T, H, Dh] = softmax(s)·v for q [T, H, Dh] (f32) and k, v [S, Hkv, Dh] of dtype kv (F32 or
  // F16), query t at position S − T + t. Offsets in elements of each buffer's dtype. Throws Error
  // for S < T, H not a multiple of Hkv, another kv dtype or a view past its buffer.
  void operator()(const Buffer& q, uint64_t q_off, const Buffer& k, uint64_t k_off, const Buffer& v, uint64_t v_off,
                  DType kv, Buffer& o, uint64_t o_off, int64_t T, int64_t S, int64_t H, int64_t Hkv, int64_t Dh,
                  AttentionParams params);

 private:
  Context& ctx_;
  Pipeline f32_, f16_;
};

}  // namespace toy::kernels::vulkan
