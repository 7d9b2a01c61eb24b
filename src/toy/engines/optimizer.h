// engines/optimizer.h — AdamW, the learning-rate schedule and global-norm gradient clipping.
//
// AdamW follows torch.optim.AdamW (decoupled weight decay, bias correction, eps after the square
// root). For each parameter θ with gradient g at update t = 1, 2, … (m = v = 0 at t = 0):
//   θ ← θ·(1 − lr·wd)                 only for 2-D weights (matrices); norms and biases: wd = 0
//   m ← β1·m + (1 − β1)·g
//   v ← β2·v + (1 − β2)·g²
//   θ ← θ − lr/(1 − β1ᵗ) · m / (sqrt(v)/sqrt(1 − β2ᵗ) + eps)
// All of it is elementwise, so results do not depend on how the work is split over threads.
// Not here: the training step itself (train.h), data (train_data.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "toy/io/gguf.h"
#include "toy/tensor/tensor.h"

namespace toy {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // decoupled; applied to 2-D parameters only
};

class AdamW {
 public:
  // `params` are the trainable leaves (F32, named), e.g. from make_trainable().
  AdamW(std::vector<Tensor> params, AdamWConfig c);

  // One update with learning rate `lr` from each parameter's grad(). A parameter without a
  // gradient (unused by the loss) is updated as if its gradient were zero (PyTorch would skip
  // it), so that every state advances with the one step count t.
  void step(float lr);
  int64_t steps() const { return t_; }  // updates done so far (t)
  const AdamWConfig& config() const { return c_; }

  // The state as GGUF tensors `optim.m.<param>` and `optim.v.<param>` plus `toy.optim.t`; with
  // `weights`, also the F32 parameters themselves as `optim.w.<param>` (for a checkpoint whose
  // model file is quantized: resuming needs the exact weights).
  void save(gguf::GgufWriter& w, bool weights = false) const;
  // Restores the state written by save(), and the parameters when the file has `optim.w.*`;
  // throws gguf::GgufError on a missing or mis-shaped tensor.
  void load(const gguf::GgufFile& f);

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& m() const { return m_; }
  const std::vector<Tensor>& v() const { return v_; }

 private:
  AdamWConfig c_;
  std::vector<Tensor> params_, m_, v_;
  int64_t t_ = 0;
};

// Learning rate at step s (0-based): linear warm-up over `warmup` steps from lr/warmup to lr,
// then constant, or a cosine from lr at the end of warm-up down to min_lr = min_lr_ratio·lr
// at step `total`.
enum class ScheduleKind { Constant, Cosine };
struct Schedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  float lr = 1e-3f;           // peak learning rate
  int64_t warmup = 0;         // steps of linear warm-up
  int64_t total = 1;          // steps of the run (the cosine reaches min_lr here)
  float min_lr_ratio = 0.1f;  // cosine floor as a fraction of lr
};
float lr_at(const Schedule& s, int64_t step);

// sqrt(Σ g²) over every element of every gradient (missing gradients count as zero), summed in
// double in a fixed order: independent of the thread count.
double global_grad_norm(std::span<const Tensor> params);

// Multiplies every gradient by f (elementwise: independent of the thread count).
void scale_grads(std::span<const Tensor> params, float f);

// torch.nn.utils.clip_grad_norm_: when norm > max_norm, scales every gradient by
// max_norm / (norm + 1e-6). Returns the factor applied (1 when none). max_norm ≤ 0: no clipping.
float clip_grad_norm(std::span<const Tensor> params, float max_norm, double norm);

}  // namespace toy
