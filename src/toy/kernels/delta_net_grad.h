// kernels/delta_net_grad.h — the backward loops of the pieces around the gated delta rule (its
// short causal convolution and the L2 norm of its queries and keys; forwards in kernels.h), with
// naive references of the forwards in T (the finite-difference checks differentiate those).
#pragma once

#include <cstdint>

namespace toy::kernels {

// Gradients of causal_conv1d (kernels.h): with window = [state; x] ([K − 1 + T, C], the state the
// forward started from), y[t, c] = Σ_j w[c, j]·window[t + j, c], so
//   dx[s, c] = Σ_j dy[s + K − 1 − j, c]·w[c, j]  (over the j with 0 ≤ s + K − 1 − j < T),
//   dw[c, j] = Σ_t dy[t, c]·window[t + j, c].
// dx [T, C], dw [C, K] overwritten; no gradient for the starting state (it is a cache, not an input).
void causal_conv1d_backward(const float* x, const float* w, const float* state0, const float* dy, int64_t T, int64_t C,
                            int64_t K, float* dx, float* dw);

// Gradient of l2_norm (kernels.h): y = x·r with r = 1/max(‖x‖, eps) per row of D values;
// dx = r·(dy − y·(dy·y)) where ‖x‖ > eps, dx = r·dy where eps clamps (r is a constant there).
void l2_norm_backward(const float* x, const float* dy, float eps, int64_t R, int64_t D, float* dx);

namespace reference {
// The forwards of kernels.h, plainly, in T: causal_conv1d (state updated) and l2_norm.
template <class T>
void causal_conv1d(const float* x, const float* w, float* state, float* y, int64_t T_, int64_t C, int64_t K);
template <class T>
void l2_norm(const float* x, float eps, int64_t R, int64_t D, float* y);
}  // namespace reference

}  // namespace toy::kernels
