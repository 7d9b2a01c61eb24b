// blocks/blocks.cpp — KV cache, self-attention, SwiGLU FFN and the pre-norm block.
#include "toy/blocks/blocks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "toy/primitives/device.h"
#include "toy/primitives/indexing.h"
#include "toy/tensor/quant.h"

namespace toy {

KvCache::KvCache(const std::vector<bool>& attends, int64_t n_ctx, int64_t n_kv_head, int64_t d_head, DType dtype,
                 Device device)
    : n_ctx_(n_ctx), dtype_(dtype), k_(attends.size()), v_(attends.size()) {
  if (dtype != DType::F32 && dtype != DType::F16)
    throw std::invalid_argument("kv cache: dtype " + std::string(name(dtype)) + " (F32 or F16)");
  DeviceOps* d = device_ops(device);
  auto rows = [&] {
    const Shape shape{n_ctx, n_kv_head, d_head};
    return d ? d->empty(shape, dtype) : Tensor::empty(shape, dtype);
  };
  for (size_t l = 0; l < attends.size(); ++l)
    if (attends[l]) {
      k_[l] = rows();
      v_[l] = rows();
    }
}

size_t KvCache::bytes() const {
  size_t n = 0;
  for (const Tensor& t : k_)
    if (t.defined()) n += 2 * t.nbytes();
  return n;
}

std::pair<Tensor, Tensor> KvCache::store(int64_t layer, int64_t pos0, const Tensor& k, const Tensor& v) {
  auto [B, T, Hkv, Dh] = k.dims<4>("kv cache: k");
  if (layer < 0 || size_t(layer) >= k_.size() || !k_[size_t(layer)].defined())
    throw std::logic_error("kv cache: layer " + std::to_string(layer) + " keeps no keys and values");
  Tensor& K = k_[size_t(layer)];
  Tensor& V = v_[size_t(layer)];
  if (B != 1 || K.size(1) != Hkv || K.size(2) != Dh || v.shape() != k.shape())
    throw ShapeError("kv cache: k " + to_string(k.shape()) + " for cache " + to_string(K.shape()));
  if (pos0 + T > n_ctx_)
    throw ShapeError("kv cache: positions up to " + std::to_string(pos0 + T) + " exceed the context of " +
                     std::to_string(n_ctx_));
  if (DeviceOps* d = device_ops(K)) {
    d->store_rows(K, pos0, k.reshape({T, Hkv, Dh}));
    d->store_rows(V, pos0, v.reshape({T, Hkv, Dh}));
  } else {
    const int64_t n = T * Hkv * Dh;
    const size_t at = size_t(row_bytes(dtype_, pos0 * Hkv * Dh));
    quantize(dtype_, k.data(), static_cast<char*>(K.raw_mut()) + at, n);  // a copy, or rounding to halves
    quantize(dtype_, v.data(), static_cast<char*>(V.raw_mut()) + at, n);
  }
  const int64_t S = pos0 + T;
  return {K.row_slice(0, S).reshape({1, S, Hkv, Dh}), V.row_slice(0, S).reshape({1, S, Hkv, Dh})};
}

RecurrentState::Layer& RecurrentState::layer(int64_t l) {
  if (size_t(l) >= layers_.size()) layers_.resize(size_t(l) + 1);
  return layers_[size_t(l)];
}

RecurrentState RecurrentState::copy() const {
  auto copy_of = [](const Tensor& x) {
    if (!x.defined()) return x;
    return x.device() == Device::cpu() ? x.clone() : to_device(to_host(x), x.device());
  };
  RecurrentState c;
  for (const Layer& l : layers_)
    c.layers_.push_back({.conv = copy_of(l.conv), .delta = copy_of(l.delta), .seen = l.seen});
  return c;
}

size_t RecurrentState::bytes() const {
  size_t n = 0;
  for (const Layer& l : layers_)
    n += (l.conv.defined() ? l.conv.nbytes() : 0) + (l.delta.defined() ? l.delta.nbytes() : 0);
  return n;
}

Tensor Ctx::positions(int64_t B, int64_t T) const {
  if (seqs.size() != 1 && int64_t(seqs.size()) != B)
    throw ShapeError("ctx: " + std::to_string(seqs.size()) + " sequences for a batch of " + std::to_string(B) +
                     " rows");
  std::vector<int32_t> pos(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) pos[size_t(b * T + t)] = int32_t(seq(b).pos0 + t);
  return Tensor::from_ids({B, T}, pos);
}

Tensor Ctx::positions(const Tensor& tokens) const {
  auto [B, T] = tokens.dims<2>("ctx: tokens");
  return positions(B, T);
}

Tensor sequence_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, const Ctx& ctx,
                          int64_t layer) {
  auto [B, T, H, Dh] = q.dims<4>("sequence_attention: q");
  const int64_t Hkv = k.size(2);
  if (!ctx.seq(0).kv) return attention(q, k, v, o);
  if (ctx.seqs.size() != size_t(B))
    throw ShapeError("sequence_attention: a KV cache holds one sequence, not a batch of " + std::to_string(B));
  std::vector<Tensor> rows;  // row b: [T·H, Dh]
  for (int64_t b = 0; b < B; ++b) {
    const Seq& s = ctx.seq(b);
    auto [K, V] = s.kv->store(layer, s.pos0, slab(k, b).reshape({1, T, Hkv, Dh}),
                              slab(v, b).reshape({1, T, Hkv, Dh}));  // [1, S_b, Hkv, Dh]
    rows.push_back(attention(slab(q, b).reshape({1, T, H, Dh}), K, V, o).reshape({T * H, Dh}));
  }
  return concat_rows(rows).reshape({B, T, H, Dh});  // [B, T, H, Dh]
}

Tensor logit_positions(const Tensor& x, const Ctx& ctx) {
  auto [B, T, D] = x.dims<3>("logit_positions: x");
  if (!ctx.last_logits || T == 1) return x;
  std::vector<int32_t> last(static_cast<size_t>(B));  // row b·T + T − 1 of x's B·T rows
  for (int64_t b = 0; b < B; ++b) last[size_t(b)] = int32_t(b * T + T - 1);
  return gather_rows(x.reshape({B * T, D}), Tensor::from_ids({B}, last)).reshape({B, 1, D});
}

Tensor self_attention(const AttentionWeights& w, const AttentionConfig& c, const Tensor& x, const RopeTable& angles,
                      const Ctx& ctx, int64_t layer) {
  auto [B, T, D] = x.dims<3>("self_attention: x");
  const int64_t H = c.n_head, Hkv = c.n_kv_head, Dh = c.d_head;
  auto qkv = linears(x, {w.attn_q, w.attn_k, w.attn_v}, {w.attn_q_bias, w.attn_k_bias, w.attn_v_bias});
  Tensor q = qkv[0];  // [B, T, H·Dh]
  Tensor k = qkv[1];  // [B, T, Hkv·Dh]
  Tensor v = qkv[2];  // [B, T, Hkv·Dh]
  if (c.qk_norm == QkNorm::FullWidth) {
    q = rms_norm(q, w.attn_q_norm, c.norm_eps);
    k = rms_norm(k, w.attn_k_norm, c.norm_eps);
  }
  q = q.reshape({B, T, H, Dh});
  k = k.reshape({B, T, Hkv, Dh});
  v = v.reshape({B, T, Hkv, Dh});
  if (c.qk_norm == QkNorm::PerHead) {
    q = rms_norm(q, w.attn_q_norm, c.norm_eps);
    k = rms_norm(k, w.attn_k_norm, c.norm_eps);
  }
  q = rope(q, angles);                                            // [B, T, H, Dh]
  k = rope(k, angles);                                            // [B, T, Hkv, Dh]
  Tensor o = sequence_attention(q, k, v, c.options, ctx, layer);  // [B, T, H, Dh]
  return linear(o.reshape({B, T, H * Dh}), w.attn_output);        // [B, T, D]
}

Tensor swiglu_ffn(const SwigluWeights& w, const Tensor& x) {
  auto gu = linears(x, {w.ffn_gate, w.ffn_up});    // [..., d_ff] each
  return linear(silu(gu[0]) * gu[1], w.ffn_down);  // [..., D]
}

Tensor pre_norm_block(const PreNormLayer& L, const AttentionConfig& c, float eps, const Tensor& x,
                      const RopeTable& angles, const Ctx& ctx, int64_t layer) {
  Tensor h = x + self_attention(L.attn, c, rms_norm(x, L.attn_norm, eps), angles, ctx, layer);  // [B, T, D]
  return h + swiglu_ffn(L.ffn, rms_norm(h, L.ffn_norm, eps));                                   // [B, T, D]
}

}  // namespace toy
