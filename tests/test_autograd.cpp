// tests/test_autograd.cpp — every primitive's backward rule against central finite differences.
//
// How a check works (check_op below, test::check_gradients in helpers.h). An op struct gives `inputs(rng)` and `forward(x)`. The
// harness draws a fixed random projection R of the output's shape and differentiates the scalar
//     L(x) = Σ_i forward(x)_i · R_i
// twice: by backprop (our rules; the seed is R, through mul + sum) and numerically, element by
// element, with the central difference (L(x + h e) − L(x − h e)) / 2h evaluated under NoGrad.
// Every F32 input is differentiated unless the op says otherwise (`differentiable(i)`).
//
// Why these tolerances (float32 throughout; L is summed in double from the f32 outputs):
//   * truncation error of the central difference is h²/6 · L''' ≈ 2e-5 for h = 1e-2 and the
//     O(1) third derivatives of inputs drawn from N(0, 1);
//   * rounding: each f32 output carries ≈ 6e-8 relative error, so L carries ≈ √n · 6e-8 for
//     n ≲ 1000 outputs of size O(1), i.e. ≲ 2e-6, which the division by 2h turns into ≲ 1e-4.
//   Together ≲ 2e-4 absolute on gradients of size O(1); we accept |analytic − numeric| ≤
//   atol + rtol·|numeric| with atol = 1e-3, rtol = 1e-2, i.e. 5× that margin. A wrong rule (a
//   missing term, a transposed index, a dropped scale) shows up as errors of order the gradient
//   itself, 100× above the bound. Ops with steeper curvature (soft-caps, the whole model) say why
//   they change h or the tolerance. Measured (GRAD_VERBOSE=1 prints it): the worst error of
//   every check stays below 0.1 of its bound, and HarnessCatchesAWrongRule shows that a rule off
//   by 2% fails.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <typeinfo>
#include <vector>

#include "helpers.h"
#include "toy/archs/model.h"
#include "toy/archs/vit.h"
#include "toy/blocks/blocks.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/indexing.h"
#include "toy/primitives/primitives.h"

using namespace toy;

namespace {

struct Rng {
  std::mt19937 gen{1234};
  Tensor normal(Shape s, float mean = 0.0f, float std = 1.0f) { return test::randn(std::move(s), gen, std, mean); }
  Tensor ids(Shape s, int32_t n) {
    std::uniform_int_distribution<int32_t> d(0, n - 1);
    std::vector<int32_t> v(size_t(numel(s)));
    for (int32_t& x : v) x = d(gen);
    return Tensor::from_ids(std::move(s), v);
  }
};

using Tolerance = test::GradTolerance;

// The checks run thousands of tiny forward passes: one thread avoids waking the pool for each.
struct OneThread {
  int prev = kernels::num_threads();
  OneThread() { kernels::set_num_threads(1); }
  ~OneThread() { kernels::set_num_threads(prev); }
};

// The op's inputs and projection R drawn from one generator, then test::check_gradients.
template <class Op>
void check_op() {
  OneThread one_thread;
  Rng rng;
  std::vector<Tensor> x = Op::inputs(rng);
  test::GradCheck c{.f = [](std::span<const Tensor> in) { return Op::forward(in); }, .name = typeid(Op).name()};
  if constexpr (requires { Op::tolerance(); }) c.tol = Op::tolerance();
  if constexpr (requires { Op::reference(x); })
    c.numeric = [](std::span<const Tensor> in) { return Op::reference(in); };
  if constexpr (requires { Op::differentiable(size_t(0)); })
    c.differentiable = [](size_t i) { return Op::differentiable(i); };
  Tensor R;
  {
    NoGrad no_grad;
    R = rng.normal(Op::forward(x).shape());
  }
  test::check_gradients(c, x, R);
}

// ------------------------------------------------------------------------------------------
// One struct per op. Shapes are small so that every element can be perturbed.

struct Add {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({3, 4}), r.normal({3, 4})}; }
  static Tensor forward(std::span<const Tensor> x) { return add(x[0], x[1]); }
};

struct AddSameInputTwice {  // x + x: both gradient contributions must add up
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({5})}; }
  static Tensor forward(std::span<const Tensor> x) { return add(x[0], x[0]); }
};

struct Mul {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({3, 4}), r.normal({3, 4})}; }
  static Tensor forward(std::span<const Tensor> x) { return mul(x[0], x[1]); }
};

struct Scale {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({2, 3, 4})}; }
  static Tensor forward(std::span<const Tensor> x) { return scale(x[0], -0.7f); }
};

struct Reshape {  // the view's gradient must come back in the input's shape
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({2, 6})}; }
  static Tensor forward(std::span<const Tensor> x) { return mul(x[0].reshape({3, 4}), x[0].reshape({3, 4})); }
};

struct Sum {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({4, 3})}; }
  static Tensor forward(std::span<const Tensor> x) { return sum(x[0]); }
};

struct Silu {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({4, 8}, 0.0f, 2.0f)}; }
  static Tensor forward(std::span<const Tensor> x) { return silu(x[0]); }
};

// gelu_tanh's forward rounds through fp16 like ggml's table (steps of ~1e-3 relative), which a
// finite difference cannot see through; its backward is documented as the derivative of the
// exact tanh curve, so the numeric side differentiates that curve, computed here in double.
struct GeluTanh {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({4, 8}, 0.0f, 2.0f)}; }
  static Tensor forward(std::span<const Tensor> x) { return gelu_tanh(x[0]); }
  static Tensor reference(std::span<const Tensor> x) {
    Tensor y = Tensor::empty(x[0].shape());
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double v = x[0].data()[i];
      y.data_mut()[i] = float(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    }
    return y;
  }
};

struct Softcap {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({4, 8}, 0.0f, 3.0f)}; }
  static Tensor forward(std::span<const Tensor> x) { return softcap(x[0], 5.0f); }
};

struct Linear {  // x: [B, T, in], W: [out, in], b: [out]
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({2, 3, 8}), r.normal({5, 8}), r.normal({5})}; }
  static Tensor forward(std::span<const Tensor> x) { return linear(x[0], x[1], x[2]); }
};

struct LinearNoBias {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({7, 6}), r.normal({4, 6})}; }
  static Tensor forward(std::span<const Tensor> x) { return linear(x[0], x[1]); }
};

struct LinearFrozenInput {  // only W trains (the first layer of a model: x is data)
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({5, 6}), r.normal({3, 6})}; }
  static bool differentiable(size_t i) { return i == 1; }
  static Tensor forward(std::span<const Tensor> x) { return linear(x[0], x[1]); }
};

struct Embedding {  // repeated ids: their rows' gradients must add up (scatter-add)
  static std::vector<Tensor> inputs(Rng& r) {
    const std::vector<int32_t> ids = {3, 1, 3, 0, 5, 3};
    return {r.normal({6, 4}), Tensor::from_ids({2, 3}, ids)};
  }
  static Tensor forward(std::span<const Tensor> x) { return embedding(x[0], x[1]); }
};

struct TiedEmbedding {  // one matrix used as lookup and as output projection
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({6, 4}), r.ids({5}, 6)}; }
  static Tensor forward(std::span<const Tensor> x) { return linear(embedding(x[0], x[1]), x[0]); }
};

// A table that is 0 + s·B·A (warm-start's lens: B the donor, A the lens), looked up and used as the
// output projection (an architecture without an output matrix): gradients reach B and A.
struct LowRankEmbedding {
  static std::vector<Tensor> inputs(Rng& r) {
    const std::vector<int32_t> ids = {3, 1, 3, 0, 5, 3};
    return {r.normal({6, 3}), r.normal({3, 4}), Tensor::from_ids({2, 3}, ids)};
  }
  static Tensor forward(std::span<const Tensor> x) {
    const Tensor E = with_low_rank(Tensor::zeros({6, 4}),
                                   {.terms = {{.A = x[1], .B = x[0], .scale = 0.7f}}, .dropout = {}, .id = 0});
    return linear(embedding(E, x[2]), E);
  }
};

struct RmsNorm {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({2, 3, 8}), r.normal({8}, 1.0f, 0.3f)}; }
  static Tensor forward(std::span<const Tensor> x) { return rms_norm(x[0], x[1], 1e-5f); }
};

struct LayerNorm {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({3, 8}), r.normal({8}, 1.0f, 0.3f), r.normal({8})}; }
  static Tensor forward(std::span<const Tensor> x) { return layer_norm(x[0], x[1], x[2], 1e-5f); }
};

struct RopeNorm {  // adjacent pairs, every dimension rotated; row 0 at positions 0…3, row 1 at 5…8
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({2, 4, 3, 8})}; }
  static Tensor forward(std::span<const Tensor> x) {
    const Tensor pos = Tensor::from_ids({2, 4}, std::vector<int32_t>{0, 1, 2, 3, 5, 6, 7, 8});
    return rope(x[0], rope_angles(pos, {.mode = RopeMode::Norm, .n_rot = 8, .base = 10000.0f, .freq_factors = {}}));
  }
};

struct RopeNeoxPartial {  // half-split pairs, 4 of 8 dimensions rotated, positions from 7, freq factors
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({1, 3, 2, 8})}; }
  static Tensor forward(std::span<const Tensor> x) {
    const std::vector<float> f = {1.0f, 4.0f};
    return rope(
        x[0], rope_angles(Tensor::from_ids({1, 3}, std::vector<int32_t>{7, 8, 9}),
                          {.mode = RopeMode::Neox, .n_rot = 4, .base = 500.0f, .freq_factors = Tensor::from({2}, f)}));
  }
};

// Attention: q [B, T, H, Dh], k, v [B, S, Hkv, Dh]. Scores are O(1) with scale 1/√Dh, so the
// softmax's third derivatives stay O(1) and the default tolerance holds.
struct AttentionCausal {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({2, 4, 2, 4}), r.normal({2, 4, 2, 4}), r.normal({2, 4, 2, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.5f}); }
};

struct AttentionGqa {  // 4 query heads over 2 KV heads: dk, dv sum over the group
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 5, 4, 4}), r.normal({1, 5, 2, 4}), r.normal({1, 5, 2, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.5f}); }
};

struct AttentionCachedPrefix {  // S > T: queries sit at positions S − T … S − 1
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 3, 2, 4}), r.normal({1, 6, 1, 4}), r.normal({1, 6, 1, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.5f}); }
};

struct AttentionWindow {  // each query sees only the last 2 positions
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 6, 2, 4}), r.normal({1, 6, 1, 4}), r.normal({1, 6, 1, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.5f, .window = 2}); }
};

// Bidirectional (an encoder, ViT): every query sees every key, on both forward paths (the
// decode chunks below 8 queries, the gemm blocks from 8 on).
struct AttentionBidirectional {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({2, 5, 2, 4}), r.normal({2, 5, 2, 4}), r.normal({2, 5, 2, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return attention(x[0], x[1], x[2], {.scale = 0.5f, .causal = false});
  }
};
struct AttentionBidirectionalBlocks {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 12, 2, 4}), r.normal({1, 12, 2, 4}), r.normal({1, 12, 2, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return attention(x[0], x[1], x[2], {.scale = 0.5f, .causal = false});
  }
};

// Soft-capped scores: inputs ×2 so that the cap (2.0) bends the scores; tanh adds curvature,
// so h is halved (truncation error /4) to keep the same margin.
struct AttentionSoftcap {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 4, 2, 4}, 0.0f, 2.0f), r.normal({1, 4, 2, 4}, 0.0f, 2.0f), r.normal({1, 4, 2, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return attention(x[0], x[1], x[2], {.scale = 0.5f, .softcap = 2.0f});
  }
  static Tolerance tolerance() { return {.h = 5e-3}; }
};

// Decoding-sized inputs (T < 8) run as loops over chunks of 64 keys whose partial softmaxes are
// combined: 70 keys make two chunks; d_head 8 takes the AVX2 kernels. With a window of 8 the
// queries start inside the first chunk; the cap bends the scores.
struct AttentionDecodeChunks {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 2, 2, 8}), r.normal({1, 70, 1, 8}), r.normal({1, 70, 1, 8})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.35f}); }
};

struct AttentionDecodeWindowSoftcap {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 3, 2, 8}, 0.0f, 2.0f), r.normal({1, 70, 1, 8}, 0.0f, 2.0f), r.normal({1, 70, 1, 8})};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return attention(x[0], x[1], x[2], {.scale = 0.35f, .softcap = 2.0f, .window = 8});
  }
  static Tolerance tolerance() { return {.h = 5e-3}; }
};

// From 8 queries on, attention runs as blocked gemm products (32 queries a block): two blocks,
// keys before the queries (S > T), then a window with a soft-cap inside one block.
struct AttentionBlocks {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({1, 36, 2, 4}), r.normal({1, 40, 1, 4}), r.normal({1, 40, 1, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) { return attention(x[0], x[1], x[2], {.scale = 0.5f}); }
};

struct AttentionBlocksWindowSoftcap {
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({2, 12, 2, 4}, 0.0f, 2.0f), r.normal({2, 12, 1, 4}, 0.0f, 2.0f), r.normal({2, 12, 1, 4})};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return attention(x[0], x[1], x[2], {.scale = 0.5f, .softcap = 2.0f, .window = 5});
  }
  static Tolerance tolerance() { return {.h = 5e-3}; }
};

struct CrossEntropy {  // logits [N, V], targets I32 [N]
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({6, 7}, 0.0f, 2.0f), r.ids({6}, 7)}; }
  static Tensor forward(std::span<const Tensor> x) { return cross_entropy(x[0], x[1]); }
};

struct SwigluFfn {  // composed: linear, silu, mul — no rule of its own
  static std::vector<Tensor> inputs(Rng& r) {
    return {r.normal({2, 3, 4}), r.normal({6, 4}, 0.0f, 0.5f), r.normal({6, 4}, 0.0f, 0.5f),
            r.normal({4, 6}, 0.0f, 0.5f)};
  }
  static Tensor forward(std::span<const Tensor> x) {
    return swiglu_ffn({.ffn_gate = x[1], .ffn_up = x[2], .ffn_down = x[3]}, x[0]);
  }
};

// The whole training loss of a tiny model: every parameter, through the forward pass, a mean
// cross-entropy over 10 targets of a [2, 5] batch. Weights are drawn with std 0.3 (not the 0.02 of
// training) so that every layer contributes gradients of a measurable size; norms and other 1-D
// gains near 1, a Gated DeltaNet's ssm_a near −1 (a decay). The loss of a 2-layer network has a
// larger curvature than a single op's, so atol is 2e-3 with h = 1e-2.
template <class Shape>
struct ModelLoss {
  static std::vector<Tensor> inputs(Rng& r) {
    std::vector<Tensor> x;
    random_model(Shape::shape(), 7)->for_each_param([&](Tensor& t) {
      const bool decay = t.name().ends_with("ssm_a");
      x.push_back(t.dim() == 2 ? r.normal(t.shape(), 0.0f, 0.3f) : r.normal(t.shape(), decay ? -1.0f : 1.0f, 0.2f));
    });
    x.push_back(r.ids({2, 5}, 11));  // tokens
    x.push_back(r.ids({10}, 11));    // targets
    return x;
  }
  static Tensor forward(std::span<const Tensor> x) {
    std::unique_ptr<Model> m = random_model(Shape::shape(), 7);
    size_t i = 0;
    m->for_each_param([&](Tensor& t) { t = x[i++]; });
    Tensor logits = m->forward(x[i], Ctx{});
    return cross_entropy(logits.reshape({10, 11}), x[i + 1]);
  }
  static Tolerance tolerance() {
    if constexpr (requires { Shape::h; }) return {.h = Shape::h, .atol = 2e-3};
    return {.atol = 2e-3};
  }
};

// A tied Llama: 2 layers, GQA 4/2, head size 2, NORM rope over both components; the tied
// embedding is looked up and used as the output projection.
struct LlamaShape {
  static ModelShape shape() {
    return {.arch = "llama",
            .n_vocab = 11,
            .d_model = 8,
            .n_layer = 2,
            .n_head = 4,
            .n_kv_head = 2,
            .d_ff = 12,
            .n_ctx = 16,
            .tied_output = true,
            .keys = {}};
  }
};
using LlamaLoss = ModelLoss<LlamaShape>;

// Qwen3.5 and Qwen3-Next (2 experts of 4 chosen, renormalised): a Gated DeltaNet layer (1 key
// head, 2 value heads of 4, convolution width 4) then a gated attention layer: the convolution,
// the L2 norms, the log-decay, the delta rule, the gated output norm and the gated attention.
// The L2 norms of q and k (small vectors of 4 values here) curve steeply: at h = 1e-2 the central
// difference's truncation error alone reached 3.8× the bound on the convolution's weights; at
// h = 2.5e-3 the worst error of any input is 0.34 of it (measured, GRAD_VERBOSE=1), shrinking ~h².
template <const char* Arch>
struct HybridShape {
  static constexpr double h = 2.5e-3;
  static ModelShape shape() {
    auto u32 = [](int64_t v) { return gguf::Value::of_u32(uint32_t(v)); };
    Metadata keys = {{"ssm.state_size", u32(4)},   {"ssm.group_count", u32(1)},         {"ssm.time_step_rank", u32(2)},
                     {"ssm.inner_size", u32(8)},   {"full_attention_interval", u32(2)}, {"expert_count", u32(4)},
                     {"expert_used_count", u32(2)}};
    if (std::string_view(Arch) != "qwen3next") keys.erase(keys.end() - 2, keys.end());
    return {.arch = Arch,
            .n_vocab = 11,
            .d_model = 8,
            .n_layer = 2,
            .n_head = 2,
            .n_kv_head = 1,
            .d_ff = 12,
            .n_ctx = 16,
            .tied_output = true,
            .keys = keys};
  }
};
// Dragon: the same Gated DeltaNet layer, then a differential attention layer with Scalable-Softmax
// (head size 4: halves of 2, RoPE on each; λ from its four vectors; the sub-norm; s per head).
constexpr char kQwen35[] = "qwen35", kQwen3Next[] = "qwen3next", kDragon[] = "dragon";
using Qwen35Loss = ModelLoss<HybridShape<kQwen35>>;
using Qwen3NextLoss = ModelLoss<HybridShape<kQwen3Next>>;
using DragonLoss = ModelLoss<HybridShape<kDragon>>;

// The whole training loss of a tiny ViT (4×4 images of 2 channels in 2×2 patches, 2 layers, 2
// heads): every parameter, through the patch embedding, the class token, the learned positions,
// the bidirectional encoder and the head. Weights as in LlamaLoss (std 0.3), for the same reason;
// the default tolerance (measured: worst error 0.035 of the bound). gelu_tanh's forward rounds through fp16 (see GeluTanh), which a finite
// difference of the whole model cannot see through (measured: errors of 2× the bound at h = 1e-2,
// 7× at h = 2.5e-3, growing as 1/h), so the numeric side is the same ViT written out here with
// plain loops and an exact tanh GELU. The images take no gradient.
struct VitLoss {
  static constexpr int64_t kParams = 4 + 2 * 12 + 4;  // tensors: embeddings, 12 per layer, head
  static constexpr int64_t B = 3, C = 2, S = 4, P = 2, N = 4, T = N + 1, D = 8, H = 2;
  static std::unique_ptr<VitModel> model() {
    return VitModel::random({.image_size = S,
                             .patch_size = P,
                             .n_channel = C,
                             .d_model = D,
                             .n_layer = 2,
                             .n_head = H,
                             .d_ff = 12,
                             .n_class = 3,
                             .eps = 1e-5f},
                            7);
  }
  static std::vector<Tensor> inputs(Rng& r) {
    std::vector<Tensor> x;
    model()->for_each_param([&](Tensor& t) {
      x.push_back(t.dim() == 2 ? r.normal(t.shape(), 0.0f, 0.3f) : r.normal(t.shape(), 1.0f, 0.2f));
    });
    x.push_back(r.normal({B, C, S, S}));  // images
    x.push_back(r.ids({B}, 3));           // classes
    return x;
  }
  static bool differentiable(size_t i) { return i < kParams; }
  static Tensor forward(std::span<const Tensor> x) {
    std::unique_ptr<VitModel> m = model();
    size_t i = 0;
    m->for_each_param([&](Tensor& t) { t = x[i++]; });
    return cross_entropy(m->forward(x[i]), x[i + 1]);
  }
  static Tensor reference(std::span<const Tensor> x) {
    const float* img = x[kParams].data();
    Tensor h = Tensor::empty({B, T, D});  // [class_embd; patch_embd·patch + b] + position_embd
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          double v = x[3].data()[t * D + d];
          if (t == 0) v += x[2].data()[d];
          const int64_t gy = (t - 1) / (S / P), gx = (t - 1) % (S / P);
          if (t > 0) v += x[1].data()[d];
          for (int64_t c = 0; t > 0 && c < C; ++c)
            for (int64_t py = 0; py < P; ++py)
              for (int64_t px = 0; px < P; ++px)
                v += double(x[0].data()[d * C * P * P + (c * P + py) * P + px]) *
                     img[((b * C + c) * S + gy * P + py) * S + gx * P + px];
          h.data_mut()[(b * T + t) * D + d] = float(v);
        }
    for (size_t l = 0; l < 2; ++l) {
      const Tensor* w = &x[4 + 12 * l];
      Tensor qkv = linear(layer_norm(h, w[0], w[1], 1e-5f), w[2], w[3]);  // [B, T, 3D]
      auto heads = [&](int64_t at) { return narrow(qkv, at, D).reshape({B, T, H, D / H}); };
      Tensor o = attention(heads(0), heads(D), heads(2 * D), {.scale = 0.5f, .causal = false});
      h = h + linear(o.reshape({B, T, D}), w[4], w[5]);
      Tensor u = linear(layer_norm(h, w[6], w[7], 1e-5f), w[8], w[9]);  // [B, T, d_ff]
      for (int64_t e = 0; e < u.numel(); ++e) {
        const double v = u.data()[e];
        u.data_mut()[e] = float(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
      }
      h = h + linear(u, w[10], w[11]);
    }
    Tensor cls = Tensor::empty({B, D});  // the class token's row
    for (int64_t b = 0; b < B; ++b) std::copy_n(h.data() + b * T * D, D, cls.data_mut() + b * D);
    return cross_entropy(linear(layer_norm(cls, x[28], x[29], 1e-5f), x[30], x[31]), x[kParams + 1]);
  }
};

// Not an op: x² recorded with a rule that is 2% off, to show that the harness catches it.
struct WrongRule {
  static std::vector<Tensor> inputs(Rng& r) { return {r.normal({6})}; }
  static Tensor forward(std::span<const Tensor> x) {
    Tensor y = Tensor::empty(x[0].shape());
    for (int64_t i = 0; i < y.numel(); ++i) y.data_mut()[i] = x[0].data()[i] * x[0].data()[i];
    if (needs_grad({&x[0]}))
      record(y, "wrong", {x[0]},
             [x0 = x[0]](const Tensor& d) { return std::vector<Tensor>{scale(mul(d, x0), 2.04f)}; });
    return y;
  }
};

}  // namespace

// Registration: one line per op.
TEST(GradCheck, Add) { check_op<Add>(); }
TEST(GradCheck, AddSameInputTwice) { check_op<AddSameInputTwice>(); }
TEST(GradCheck, Mul) { check_op<Mul>(); }
TEST(GradCheck, Scale) { check_op<Scale>(); }
TEST(GradCheck, Reshape) { check_op<Reshape>(); }
TEST(GradCheck, Sum) { check_op<Sum>(); }
TEST(GradCheck, Silu) { check_op<Silu>(); }
TEST(GradCheck, GeluTanh) { check_op<GeluTanh>(); }
TEST(GradCheck, Softcap) { check_op<Softcap>(); }
TEST(GradCheck, Linear) { check_op<Linear>(); }
TEST(GradCheck, LinearNoBias) { check_op<LinearNoBias>(); }
TEST(GradCheck, LinearFrozenInput) { check_op<LinearFrozenInput>(); }
TEST(GradCheck, Embedding) { check_op<Embedding>(); }
TEST(GradCheck, TiedEmbedding) { check_op<TiedEmbedding>(); }
TEST(GradCheck, LowRankEmbedding) { check_op<LowRankEmbedding>(); }
TEST(GradCheck, RmsNorm) { check_op<RmsNorm>(); }
TEST(GradCheck, LayerNorm) { check_op<LayerNorm>(); }
TEST(GradCheck, RopeNorm) { check_op<RopeNorm>(); }
TEST(GradCheck, RopeNeoxPartial) { check_op<RopeNeoxPartial>(); }
TEST(GradCheck, AttentionCausal) { check_op<AttentionCausal>(); }
TEST(GradCheck, AttentionGqa) { check_op<AttentionGqa>(); }
TEST(GradCheck, AttentionCachedPrefix) { check_op<AttentionCachedPrefix>(); }
TEST(GradCheck, AttentionWindow) { check_op<AttentionWindow>(); }
TEST(GradCheck, AttentionSoftcap) { check_op<AttentionSoftcap>(); }
TEST(GradCheck, AttentionBidirectional) { check_op<AttentionBidirectional>(); }
TEST(GradCheck, AttentionBidirectionalBlocks) { check_op<AttentionBidirectionalBlocks>(); }
TEST(GradCheck, AttentionDecodeChunks) { check_op<AttentionDecodeChunks>(); }
TEST(GradCheck, AttentionDecodeWindowSoftcap) { check_op<AttentionDecodeWindowSoftcap>(); }
TEST(GradCheck, AttentionBlocks) { check_op<AttentionBlocks>(); }
TEST(GradCheck, AttentionBlocksWindowSoftcap) { check_op<AttentionBlocksWindowSoftcap>(); }
TEST(GradCheck, CrossEntropy) { check_op<CrossEntropy>(); }
TEST(GradCheck, SwigluFfn) { check_op<SwigluFfn>(); }
TEST(GradCheck, LlamaLoss) { check_op<LlamaLoss>(); }
TEST(GradCheck, Qwen35Loss) { check_op<Qwen35Loss>(); }
TEST(GradCheck, Qwen3NextLoss) { check_op<Qwen3NextLoss>(); }
TEST(GradCheck, DragonLoss) { check_op<DragonLoss>(); }
TEST(GradCheck, VitLoss) { check_op<VitLoss>(); }

TEST(GradCheck, HarnessCatchesAWrongRule) { EXPECT_NONFATAL_FAILURE(check_op<WrongRule>(), "analytic"); }

// ------------------------------------------------------------------------------------------
// The tape itself.

TEST(Autograd, NoGradRecordsNothing) {
  Tensor w = Tensor::full({3}, 2.0f);
  w.requires_grad_();
  {
    NoGrad ng;
    Tensor y = mul(w, w);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.impl()->grad_fn, nullptr);
  }
  Tensor y = mul(w, w);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_NE(y.impl()->grad_fn, nullptr);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = Tensor::from({2}, std::vector<float>{1.0f, -3.0f});
  w.requires_grad_();
  sum(mul(w, w)).backward();
  sum(mul(w, w)).backward();
  EXPECT_FLOAT_EQ(w.grad().data()[0], 4.0f);  // 2 · 2w
  EXPECT_FLOAT_EQ(w.grad().data()[1], -12.0f);
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, BackwardNeedsAScalar) {
  Tensor w = Tensor::full({2}, 1.0f);
  w.requires_grad_();
  EXPECT_THROW(mul(w, w).backward(), ShapeError);
}

// Data-parallel training sends a parameter's gradient as soon as backward's hook says it is final.
TEST(Autograd, GradFinalHookFiresOnceRightAfterTheLastUse) {
  Tensor a = Tensor::from({2}, std::vector<float>{1.0f, 2.0f});
  Tensor b = Tensor::from({2}, std::vector<float>{3.0f, 4.0f});
  Tensor c = Tensor::from({2}, std::vector<float>{5.0f, 6.0f});
  Tensor unused = Tensor::full({2}, 1.0f);
  for (Tensor* t : {&a, &b, &c, &unused}) t->requires_grad_();
  // loss = Σ (a·b + a) · c²: the walk runs sum, the outer mul, c·c (c final), the add, a·b (a, b final).
  const Tensor loss = sum(mul(add(mul(a, b), a), mul(c, c)));
  std::vector<const TensorImpl*> fired;
  std::vector<std::vector<float>> grad_then;
  loss.backward([&](const Tensor& leaf) {
    fired.push_back(leaf.impl());
    grad_then.emplace_back(leaf.grad().data(), leaf.grad().data() + leaf.numel());
  });
  ASSERT_EQ(fired, (std::vector<const TensorImpl*>{c.impl(), a.impl(), b.impl()}));  // once each, c (used twice) too
  const Tensor* leaves[] = {&c, &a, &b};
  for (size_t i = 0; i < 3; ++i)  // final when the hook ran: nothing was added after
    EXPECT_EQ(grad_then[i], std::vector<float>(leaves[i]->grad().data(), leaves[i]->grad().data() + 2)) << i;
  EXPECT_FLOAT_EQ(a.grad().data()[1], (4.0f + 1.0f) * 36.0f);  // (b + 1) · c²
  EXPECT_FALSE(unused.grad().defined());
}
