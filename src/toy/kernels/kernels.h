// kernels/kernels.h — the numeric work behind the primitives: products, attention, norms, thread pool.
//
// Model code never calls these directly; primitives do. Kernels take plain arrays and sizes and
// know nothing of tensors or autograd: a primitive checks shapes, calls the forward kernel and
// records the backward one (the seam another backend plugs into). Every kernel is deterministic and
// independent of the thread count: work is split by output rows, and each output element is
// reduced by one thread in a fixed order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "toy/tensor/dtype.h"

namespace toy::kernels {

// y[M, N] = x[M, K] · W[N, K]ᵀ. W is row-major in any supported dtype (a GGUF weight: N rows
// of K values, K a multiple of the block size); x and y are f32.
// Like llama.cpp's CPU backend, the kernel first rounds x to activation_dtype(wt), then takes
// the dot products in integers (quantized weights) or in f32 (F16/BF16: with exact products).
// Row m of y depends only on row m of x: the same bits for any M, thread count or tiling.
void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K);

// Several products of the same x in one parallel region: y_i[M, N_i] = x[M, K] · W_iᵀ, the same
// bits as one matmul_wt call each. A decode step of a small model is dominated by the start and
// the slowest chunk of each region, so products that read the same input share one.
struct Product {
  const void* w;  // W_i [N_i, K], row-major in dtype wt
  DType wt;
  float* y;  // y_i [M, N_i]
  int64_t N;
};
void matmul_wt_many(const float* x, std::span<const Product> products, int64_t M, int64_t K);

// The format x is rounded to before the dot products with weights of type wt (llama.cpp's
// vec_dot_type): F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_K/Q5_K/Q6_K -> Q8_K;
// F32 and the other types (dequantized to f32 on the fly) -> F32, i.e. no rounding.
DType activation_dtype(DType wt);

// The kernel matmul_wt takes for weights of type wt on the SIMD path now in use (simd()):
// instruction set, dot product and prompt tile (rows of x × weight rows; decode takes 1 × 1),
// e.g. "scalar", "avx2 fma 4x3", "avx2 maddubs 4x2", "avx512vnni vpdpbusd 4x4", or
// "dequantize to f32, avx2 fma 4x3" for the types without a kernel of their own. For reports
// (`toy bench --json`); throws std::invalid_argument for a type matmul_wt does not support.
std::string matmul_kernel_name(DType wt);

// How the F32/F16/BF16 prompt tile was chosen (float_tile() in cpu_features.h), for reports:
// "avx2: the avx512vnni path is not in use", "avx2: set" or "avx512: set" (TOY_FLOAT_TILE or
// set_float_tile), or "calibrated: F32 avx512 1.52x, F16 avx2 0.97x" — each dtype timed so far
// (at its first use, or its matmul_kernel_name) with the AVX2 tile's time over the 512-bit one's.
std::string float_tile_choice();

// C[M, N] = op(A) · op(B) (+ C when accumulate), all f32 row-major.
// op(A) is A[M, K] or, with trans_a, Aᵀ for A[K, M]; op(B) is B[K, N] or, with trans_b, Bᵀ for B[N, K].
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C,
          bool accumulate);

// Thread pool. Default: hardware threads (or TOY_THREADS). set_num_threads waits for a running
// parallel_for; do not call it from inside one.
void set_num_threads(int n);
int num_threads();
// Calls fn(begin, end) on disjoint chunks covering [0, n); chunking depends only on n and grain.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

// y[i] = silu(x[i]) = x[i] / (1 + exp(−x[i])) for i < n (vectorised exp: within ~2 ulp).
void silu(const float* x, float* y, int64_t n);

void sigmoid(const float* x, float* y, int64_t n);                             // y = 1 / (1 + exp(−x))
void sigmoid_backward(const float* dy, const float* y, float* dx, int64_t n);  // dx = dy·y(1 − y), y = σ(x)
void softplus(const float* x, float* y, int64_t n);  // y = log(1 + exp(x)), or x above 20 (as ggml)

// Elementwise over n values, split over the threads (the math: primitives/elementwise.cpp).
void add(const float* a, const float* b, float* y, int64_t n);  // y = a + b
void mul(const float* a, const float* b, float* y, int64_t n);  // y = a·b
void scale(const float* x, float s, float* y, int64_t n);       // y = s·x
// dx = dy·silu'(x) = dy·σ(x)(1 + x(1 − σ(x))).
void silu_backward(const float* dy, const float* x, float* dx, int64_t n);
// y = gelu_tanh(x) as ggml's fp16 table gives it: x rounded to fp16, the result rounded to fp16,
// 0 below −10 and x above 10.
void gelu_tanh(const float* x, float* y, int64_t n);
// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in f32, without ggml's fp16 rounding: the curve
// gelu_tanh_backward differentiates (computed as x·σ(2u), activations.cpp).
void gelu_tanh_exact(const float* x, float* y, int64_t n);
// dx = dy·gelu'(x), the derivative of the exact tanh curve.
void gelu_tanh_backward(const float* dy, const float* x, float* dx, int64_t n);
void softcap(const float* x, float cap, float* y, int64_t n);  // y = cap·tanh(x/cap)
// dx = dy·(1 − (y/cap)²), from softcap's output y.
void softcap_backward(const float* dy, const float* y, float cap, float* dx, int64_t n);

// y[i] = the IEEE half x[i] as f32 (exact; F16C when the CPU has it).
void f16_to_f32(const uint16_t* x, float* y, int64_t n);

// Attention's decode loop: one query against n keys or values, rows of d values of type kv
// (F32 or F16) `stride` elements apart, read in place. Each result is summed in an order fixed
// by the kernel (attention_rows.cpp); s[j] does not depend on n or on the other rows.
// s[j] = scale · (q · k_j) for j < n.
void scores(const float* q, const void* k, DType kv, int64_t stride, int64_t n, int64_t d, float scale, float* s);
// The terms of a softmax over x[0, n), n ≥ 1, in place: max = max x, x[i] ← exp(x[i] − max);
// returns max and sum = Σ x[i]. Vectorized exp within 1 ulp: exp(0) = 1 and exp(−inf) = 0
// exactly, results below the smallest normal f32 are 0.
struct SoftmaxTerms {
  float max, sum;
};
SoftmaxTerms softmax_terms(float* x, int64_t n);
// Asks the caches for n such rows (into L2) ahead of their use: all their lines at once, where the
// kernels above would wait for them a few at a time.
void prefetch_rows(const void* x, DType kv, int64_t stride, int64_t n, int64_t d);
// o[e] = Σ_j p[j] · v_j[e] for e < d, summed in order of j.
void weighted_sum(const float* p, const void* v, DType kv, int64_t stride, int64_t n, int64_t d, float* o);

// --- rows of [M, D] matrices (the math: primitives/indexing.cpp, linear.cpp) -----------------
// y[m, :] = x[rows[m], :], rows in [0, N) (checked by the caller).
void gather_rows(const float* x, const int32_t* rows, int64_t M, int64_t D, float* y);
// The same from a table of any dtype xt (an embedding), each row dequantized to f32.
void gather_rows_wt(const void* x, DType xt, const int32_t* rows, int64_t M, int64_t D, float* y);
// y[rows[m], :] += src[m, :] in order of m (repeated rows add up).
void scatter_add_rows(const int32_t* rows, const float* src, int64_t M, int64_t D, float* y);
void scale_rows(const float* x, const float* s, int64_t M, int64_t D, float* y);  // y[m, :] = s[m]·x[m, :]
// out[m] = Σ_d a[m, d]·b[m, d], summed in double.
void row_dots(const float* a, const float* b, int64_t M, int64_t D, float* out);
void add_to_rows(const float* b, int64_t M, int64_t D, float* y);  // y[m, :] += b  (a bias)
void mul_rows(const float* s, int64_t M, int64_t D, float* y);     // y[m, :] ⊙= s  (per-column scales)
void sum_rows(const float* x, int64_t M, int64_t D, float* out);   // out = Σ_m x[m, :], in order of m
// Columns [x_begin, x_begin + n) of the R rows of x (x_cols wide) to columns [y_begin, y_begin + n)
// of y (y_cols wide).
void copy_columns(const float* x, int64_t x_cols, int64_t x_begin, float* y, int64_t y_cols, int64_t y_begin, int64_t R,
                  int64_t n);

// --- attention (the math: primitives/attention.cpp; how it is computed: attention.cpp) -------
// Grouped-query attention of q [B, T, H, Dh] against keys and values [B, S, Hkv, Dh]: query t
// sits at position S − T + t and sees the keys j with first_key(t) ≤ j < key_end(t): up to its own
// position when causal (a decoder), all S keys when not (an image encoder);
// query head h reads KV head h / (H / Hkv). s_j = scale·q·k_j, or cap·tanh(scale·q·k_j / cap)
// with softcap > 0; P = softmax(s); o = Σ_j P_j v_j.
struct AttentionGeometry {
  int64_t B, T, S, H, Hkv, Dh;
  float scale = 1.0f, softcap = 0.0f;
  int64_t window = 0;  // > 0: a query at p sees keys at p − window < j ≤ p (causal only)
  bool causal = true;  // false: every query sees every key (bidirectional)
  int64_t first_key(int64_t t) const {
    const int64_t p = S - T + t;
    return causal && window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
  }
  int64_t key_end(int64_t t) const { return causal ? S - T + t + 1 : S; }  // one past the last visible key
};
// o [B, T, H, Dh] from q, and k and v of type kv (F32, or F16: a KV cache). P and capped, when not
// null, receive [B, H, T, S] the probabilities and (softcap > 0) the capped scores, 0 where masked:
// what attention_backward needs. With P null (inference) row t of o has the bits it gets as the
// only query (T = 1) against the keys it sees, whatever T.
void attention(const AttentionGeometry& g, const float* q, const void* k, const void* v, DType kv, float* o, float* P,
               float* capped);
// dq [B, T, H, Dh], dk, dv [B, S, Hkv, Dh] (overwritten) from dout = dL/do, the f32 inputs and
// what attention saved (capped may be null when softcap is 0).
void attention_backward(const AttentionGeometry& g, const float* q, const float* k, const float* v, const float* P,
                        const float* capped, const float* dout, float* dq, float* dk, float* dv);

// --- Gated DeltaNet (the math: primitives/delta_rule.cpp) -----------------------------------
// One sequence of T tokens; value head h (of Hv) reads query/key head map(h) (of Hk).
struct DeltaRuleGeometry {
  int64_t T, Hk, Hv, Dk, Dv;
  bool tiled = false;  // map(h) = h % Hk (qwen35); otherwise h / (Hv / Hk) (qwen3next)
  int64_t key_head(int64_t h) const { return tiled ? h % Hk : h / (Hv / Hk); }
};
// The gated delta rule, per value head with state S [Dk, Dv], per token t:
//   S ← exp(g_t)·S;  d = β_t·(v_t − Sᵀk_t);  S ← S + k_t dᵀ;  o_t = Sᵀq_t / √Dk.
// q, k [T, Hk, Dk], v [T, Hv, Dv], g, beta [T, Hv], S [Hv, Dk, Dv] (read, then overwritten by the
// state after the last token), o [T, Hv, Dv]. Computed in chunks of `chunk` tokens (the WY / UT
// form: one triangular solve per chunk, then matrix products); chunk 1 is the plain recurrence.
// A chunk of fewer than kDeltaRuleMinMatrixChunk tokens (the last one, or a whole short feed) runs
// as the recurrence too, so its rows and state have the bits of feeding its tokens one at a time.
// Heads are split over the threads; the result does not depend on their number.
constexpr int64_t kDeltaRuleMinMatrixChunk = 8;
void gated_delta_rule(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v, const float* gate,
                      const float* beta, float* S, float* o, int64_t chunk);
// Its gradients, token by token backwards through the states (recomputed from S0, the state the
// forward started from): dq, dk [T, Hk, Dk] (summed over the value heads reading each key head),
// dv [T, Hv, Dv], dgate, dbeta [T, Hv], all overwritten, from dout [T, Hv, Dv].
void gated_delta_rule_backward(const DeltaRuleGeometry& g, const float* q, const float* k, const float* v,
                               const float* gate, const float* beta, const float* S0, const float* dout, float* dq,
                               float* dk, float* dv, float* dgate, float* dbeta);
// Causal depthwise convolution of x [T, C] with w [C, K] over the window state [K − 1, C] (the
// previous inputs, oldest first) then x: y[t, c] = Σ_j w[c, j]·window[t + j, c] (in order of j, as
// ggml's ssm_conv); state ← the last K − 1 rows of the window.
void causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T, int64_t C, int64_t K);
// y = x / max(‖x‖₂, eps) per row of D values (sum of squares in double, as ggml's l2_norm).
void l2_norm(const float* x, float eps, int64_t R, int64_t D, float* y);

// --- normalisation over rows of D values (the math: primitives/norm.cpp) --------------------
// y = x·r·w with r = 1/sqrt(mean(x²) + eps) per row (sum of squares in double, as ggml); rstd[R] ← r.
void rms_norm(const float* x, const float* w, float eps, int64_t R, int64_t D, float* y, float* rstd);
// dx [R, D], dw [D] (overwritten): with x̂ = x·r, g = dy·w: dx = r·(g − x̂·mean(g·x̂)), dw = Σ_rows dy·x̂.
void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* dy, int64_t R, int64_t D,
                       float* dx, float* dw);
// x̂ = (x − μ)·r with r = 1/sqrt(σ² + eps) per row (biased variance), y = x̂·w + b; xhat, rstd ← x̂, r.
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t R, int64_t D, float* y, float* xhat,
                float* rstd);
// dx, dw, db (overwritten): with g = dy·w: dx = r·(g − mean(g) − x̂·mean(g·x̂)), dw = Σ dy·x̂, db = Σ dy.
void layer_norm_backward(const float* w, const float* xhat, const float* rstd, const float* dy, int64_t R, int64_t D,
                         float* dx, float* dw, float* db);

// --- softmax and the loss over rows (the math: primitives/routing.cpp, loss.cpp) -----------------
// y[R, C] = softmax of each row of x (the sum in double).
void softmax(const float* x, int64_t R, int64_t C, float* y);
// dx = y ⊙ (dy − Σ dy·y) per row, from the softmax's output y.
void softmax_backward(const float* y, const float* dy, int64_t R, int64_t C, float* dx);
// Mean over the counted rows of logsumexp(z_n) − z_n[y_n] (each y_n in [0, V), checked by the
// caller; a negative y_n is an ignored row: not counted, lse[n] left as it is); 0 when none is
// counted. lse[N] ← logsumexp(z_n), for backward.
double cross_entropy(const float* z, const int32_t* y, int64_t N, int64_t V, float* lse);
// dz[N, V] = g·(softmax(z_n) − onehot(y_n)), with g = d loss / (counted rows); 0 on ignored rows.
void cross_entropy_backward(const float* z, const int32_t* y, const float* lse, float g, int64_t N, int64_t V,
                            float* dz);

}  // namespace toy::kernels
