// primitives/attention.cpp — grouped-query attention, causal (optional sliding window) or
// bidirectional, with optional soft-cap and its hand-written gradient.
//
// For query head h (KV head g = h / (H/Hkv)) and query t at position p = S − T + t:
//   s_j = cap·tanh(scale·q·k_j / cap)  (or scale·q·k_j)   for visible keys j (j ≤ p when causal)
//   P   = softmax(s),  o = Σ_j P_j v_j
// Backward (dO given):  dv_j += P_j dO;  dP_j = dO·v_j;  ds_j = P_j (dP_j − Σ P dP);
//   through the cap: ds_j *= 1 − (s_j/cap)²;  dq = scale Σ ds_j k_j;  dk_j += scale ds_j q.
//
// The loops (a gemm path for long inputs, flash-decoding chunks for short ones, both independent
// of the thread count) are kernels::attention and kernels::attention_backward (kernels/attention.cpp).
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"
#include "toy/primitives/primitives.h"

namespace toy {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  auto [B, T, H, Dh] = q.dims<4>("attention: q");
  auto [Bk, S, Hkv, Dk] = k.dims<4>("attention: k");
  if (k.shape() != v.shape() || Bk != B || Dk != Dh || S < T || Hkv <= 0 || H % Hkv)
    throw ShapeError("attention: q " + to_string(q.shape()) + ", k " + to_string(k.shape()) + ", v " +
                     to_string(v.shape()));
  const bool half = k.dtype() == DType::F16;
  if (k.dtype() != v.dtype() || (!half && k.dtype() != DType::F32))
    throw ShapeError("attention: k and v must both be F32 or both F16, got " + std::string(name(k.dtype())) + " and " +
                     std::string(name(v.dtype())));
  if (DeviceOps* d = device_ops(q)) return d->attention(q, k, v, o);
  const kernels::AttentionGeometry g{.B = B,
                                     .T = T,
                                     .S = S,
                                     .H = H,
                                     .Hkv = Hkv,
                                     .Dh = Dh,
                                     .scale = o.scale,
                                     .softcap = o.softcap,
                                     .window = o.window,
                                     .causal = o.causal};
  const bool saving = needs_grad({&q, &k, &v});
  if (saving && half) throw ShapeError("attention: no gradient through F16 keys and values (a KV cache)");
  Tensor out = Tensor::empty(q.shape());
  Tensor P = saving ? Tensor::empty({B, H, T, S}) : Tensor();  // probabilities (0 where masked), for backward
  Tensor capped = saving && o.softcap > 0 ? Tensor::empty({B, H, T, S}) : Tensor();
  kernels::attention(g, q.data(), k.raw(), v.raw(), k.dtype(), out.data_mut(), saving ? P.data_mut() : nullptr,
                     capped.defined() ? capped.data_mut() : nullptr);
  if (saving)
    record(out, "attention", {q, k, v}, [q, k, v, P, capped, g](const Tensor& dout) {
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(v.shape());
      kernels::attention_backward(g, q.data(), k.data(), v.data(), P.data(), capped.defined() ? capped.data() : nullptr,
                                  dout.data(), dq.data_mut(), dk.data_mut(), dv.data_mut());
      return std::vector<Tensor>{dq, dk, dv};
    });
  return out;
}

}  // namespace toy
