// blocks/moe.cpp — mixture-of-experts FFN and block.
#include "toy/blocks/moe.h"

#include "toy/primitives/indexing.h"
#include "toy/primitives/routing.h"

namespace toy {

SwigluWeights expert(const MoeFfnWeights& w, int64_t e) {
  return {.ffn_gate = slab(w.ffn_gate_exps, e), .ffn_up = slab(w.ffn_up_exps, e), .ffn_down = slab(w.ffn_down_exps, e)};
}

namespace {

// Which tokens each expert serves. rows[e]: the tokens routed to expert e; all_rows / all_slots:
// every (token n, slot n·k + j) pair, in expert order (the order the expert outputs come in).
struct ExpertGroups {
  std::vector<std::vector<int32_t>> rows;
  std::vector<int32_t> all_rows, all_slots;
};

ExpertGroups group_by_expert(const Tensor& expert, int64_t n_expert) {
  auto [N, k] = expert.dims<2>("moe: experts");
  std::vector<std::vector<int32_t>> slots(static_cast<size_t>(n_expert));
  ExpertGroups g;
  g.rows.resize(static_cast<size_t>(n_expert));
  for (int64_t i = 0; i < N * k; ++i) {
    const size_t e = size_t(expert.ids()[i]);
    g.rows[e].push_back(int32_t(i / k));
    slots[e].push_back(int32_t(i));
  }
  for (size_t e = 0; e < size_t(n_expert); ++e) {
    g.all_rows.insert(g.all_rows.end(), g.rows[e].begin(), g.rows[e].end());
    g.all_slots.insert(g.all_slots.end(), slots[e].begin(), slots[e].end());
  }
  return g;
}

Tensor ids(const std::vector<int32_t>& v) { return Tensor::from_ids({int64_t(v.size())}, v); }

}  // namespace

Tensor moe_ffn(const MoeFfnWeights& w, const MoeConfig& c, const Tensor& x) {
  const int64_t D = x.size(-1), N = x.numel() / D, k = c.n_expert_used;
  Tensor xs = x.reshape({N, D});                     // [N, D]
  const Tensor logits = linear(xs, w.ffn_gate_inp);  // [N, E]
  MoeRoute r =
      c.renormalize ? moe_route_renormalized(logits, k) : moe_route(logits, k);  // weight [N, k], expert [N, k]
  const ExpertGroups g = group_by_expert(r.expert, c.n_expert);
  std::vector<Tensor> outs;  // expert e: [M_e, D]
  for (int64_t e = 0; e < c.n_expert; ++e)
    if (!g.rows[size_t(e)].empty()) outs.push_back(swiglu_ffn(expert(w, e), gather_rows(xs, ids(g.rows[size_t(e)]))));
  Tensor p = gather_rows(r.weight.reshape({N * k, 1}), ids(g.all_slots)).reshape({N * k});  // [N·k], expert order
  Tensor y = scale_rows(concat_rows(outs), p);                                              // [N·k, D]
  return scatter_add_rows(Tensor::zeros({N, D}), ids(g.all_rows), y).reshape(x.shape());    // [..., D]
}

Tensor shared_expert_ffn(const SharedExpertWeights& w, const Tensor& x) {
  const int64_t D = x.size(-1), N = x.numel() / D;
  const SwigluWeights e = {.ffn_gate = w.ffn_gate_shexp, .ffn_up = w.ffn_up_shexp, .ffn_down = w.ffn_down_shexp};
  Tensor gate = sigmoid(linear(x, w.ffn_gate_inp_shexp.reshape({1, D})));                     // [..., 1]
  return scale_rows(swiglu_ffn(e, x).reshape({N, D}), gate.reshape({N})).reshape(x.shape());  // [..., D]
}

Tensor moe_block(const MoeLayer& L, const AttentionConfig& c, const MoeConfig& m, float eps, const Tensor& x,
                 const RopeTable& angles, const Ctx& ctx, int64_t layer) {
  Tensor h = x + self_attention(L.attn, c, rms_norm(x, L.attn_norm, eps), angles, ctx, layer);  // [B, T, D]
  return h + moe_ffn(L.ffn, m, rms_norm(h, L.ffn_norm, eps));                                   // [B, T, D]
}

}  // namespace toy
