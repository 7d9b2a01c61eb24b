// engines/train.cpp — the training step and checkpoint writing.
#include "toy/engines/train.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "toy/archs/lora.h"
#include "toy/io/file_type.h"
#include "toy/primitives/primitives.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy {

Batch make_batch(std::span<const int32_t> ids, int64_t B, int64_t T) {
  if (B <= 0 || T <= 0 || int64_t(ids.size()) != B * (T + 1))
    throw ShapeError("make_batch: " + std::to_string(ids.size()) + " ids for B = " + std::to_string(B) +
                     " sequences of T + 1 = " + std::to_string(T + 1));
  std::vector<int32_t> in(size_t(B * T)), out(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t next = ids[size_t(b * (T + 1) + t + 1)];
      in[size_t(b * T + t)] = unmasked_id(ids[size_t(b * (T + 1) + t)]);
      out[size_t(b * T + t)] = next < 0 ? kIgnoreTarget : next;
    }
  return {Tensor::from_ids({B, T}, in), Tensor::from_ids({B * T}, out)};
}

std::vector<Tensor> make_trainable(Model& m) {
  std::vector<Tensor> params;
  m.for_each_param([&](Tensor& t) {
    const std::string name = t.name();
    t = t.clone().set_name(name);  // owned F32, dequantized if needed
    t.requires_grad_();
    params.push_back(t);
  });
  return params;
}

TrainEngine::TrainEngine(Model& m, TrainConfig c) : TrainEngine(m, c, make_trainable(m)) {}

TrainEngine::TrainEngine(Model& m, TrainConfig c, std::vector<Tensor> params)
    : m_(m), c_(c), params_(std::move(params)), opt_(params_, c.adamw) {}

Tensor TrainEngine::loss_of(const Batch& b) const {
  auto [B, T] = b.tokens.dims<2>("train: tokens");
  if (b.targets.shape() != Shape{B * T})
    throw ShapeError("train: targets " + to_string(b.targets.shape()) + " for tokens " + to_string(b.tokens.shape()));
  const int64_t V = m_.config().n_vocab;
  Tensor logits = m_.forward(b.tokens, Ctx{});                  // [B, T, V]
  return cross_entropy(logits.reshape({B * T, V}), b.targets);  // scalar
}

namespace {

// The parameters' gradients laid end to end ([P], in params order; a missing one as zeros).
void copy_grads(std::span<const Tensor> params, float* out) {
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined())
      std::memcpy(out, g.data(), size_t(p.numel()) * sizeof(float));
    else
      std::fill(out, out + p.numel(), 0.0f);
    out += p.numel();
  }
}

void add_grads(std::span<const Tensor> params, float* sum) {
  for (const Tensor& p : params) {
    if (const Tensor g = p.grad(); g.defined()) {
      const float* pg = g.data();
      for (int64_t i = 0; i < p.numel(); ++i) sum[i] += pg[i];
    } else {
      for (int64_t i = 0; i < p.numel(); ++i) sum[i] += 0.0f;  // as the zeros a process would send
    }
    sum += p.numel();
  }
}

void set_grads(std::span<Tensor> params, const float* sum) {
  for (Tensor& p : params) {
    if (!p.grad().defined()) p.impl()->grad = Tensor::empty(p.shape()).impl_ptr();
    std::memcpy(p.grad().data_mut(), sum, size_t(p.numel()) * sizeof(float));
    sum += p.numel();
  }
}

// The backward pass of this rank's last micro-batch, during the group's sum (start_sum …
// finish_sum): each parameter's gradient is copied into `row` [P] (params end to end) and handed
// to the group the moment the walk has finished it, so that its bucket can be on the wire while
// the walk goes on through the layers below.
void backward_exchanging(const Tensor& loss, std::span<const Tensor> params, float* row, ProcessGroup& group) {
  std::unordered_map<const TensorImpl*, size_t> index;  // a parameter's place in params
  std::vector<int64_t> offset(params.size() + 1);       // its first element in row
  for (size_t i = 0; i < params.size(); ++i) {
    index[params[i].impl()] = i;
    offset[i + 1] = offset[i] + params[i].numel();
  }
  std::vector<bool> handed(params.size());
  auto hand_over = [&](size_t i) {
    copy_grads(params.subspan(i, 1), row + offset[i]);
    group.ready(offset[i], params[i].numel());
    handed[i] = true;
  };
  loss.backward([&](const Tensor& leaf) {
    if (const auto it = index.find(leaf.impl()); it != index.end()) hand_over(it->second);
  });
  for (size_t i = 0; i < params.size(); ++i)
    if (!handed[i]) hand_over(i);  // a parameter the loss does not reach: its zeros
}

}  // namespace

double TrainEngine::forward_backward(const Batch& b) {
  for (Tensor& p : params_) p.zero_grad();
  const int64_t K = c_.grad_accum, N = group_->size();
  if (K == 1 && N == 1) {
    Tensor loss = loss_of(b);
    loss.backward();
    return loss.item();
  }
  auto [B, T] = b.tokens.dims<2>("train: tokens");
  if (K < 1 || B % K != 0)
    throw ShapeError("train: " + std::to_string(B) + " sequences do not split into grad_accum = " + std::to_string(K) +
                     " micro-batches");
  if (K % N != 0)
    throw ShapeError("train: grad_accum = " + std::to_string(K) + " micro-batches do not split over " +
                     std::to_string(N) + " processes");
  const int64_t Bm = B / K, m = K / N, first = group_->rank() * m;  // this process: micro-batches first … first + m − 1
  int64_t P = 0;
  for (const Tensor& p : params_) P += p.numel();
  std::vector<float> sum(static_cast<size_t>(P));                    // [P] Σ_k g_k
  std::vector<float> mine(N > 1 ? static_cast<size_t>(m * P) : 0u);  // [m, P] this process's g_k, for the group
  std::vector<double> losses(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const int64_t k = first + j;
    const Batch micro{b.tokens.row_slice(k * Bm, (k + 1) * Bm),            // [Bm, T]
                      b.targets.row_slice(k * Bm * T, (k + 1) * Bm * T)};  // [Bm·T]
    for (Tensor& p : params_) p.zero_grad();
    Tensor loss = loss_of(micro);
    // g_k alone: a tied weight's two uses add up within it, before the sum over k
    if (N == 1) {
      loss.backward();
      if (j == 0)
        copy_grads(params_, sum.data());
      else
        add_grads(params_, sum.data());  // one running sum: ((g_0 + g_1) + g_2) + …
    } else if (j < m - 1) {
      loss.backward();
      copy_grads(params_, mine.data() + j * P);
    } else {  // this rank's last micro-batch: the exchange of the step's sum overlaps its backward pass
      group_->start_sum(mine, m, sum);
      backward_exchanging(loss, params_, mine.data() + j * P, *group_);
    }
    losses[size_t(j)] = loss.item();
  }
  if (N > 1) group_->finish_sum();  // waits for the buckets still in flight
  set_grads(params_, sum.data());
  scale_grads(params_, float(1.0 / double(K)));  // Σ_k ∇mean_k / K = ∇ of the mean over all B·T targets
  double total = 0;
  for (double l : group_->all_gather(losses)) total += l;  // in micro-batch order
  return total / double(K);
}

StepResult TrainEngine::step(const Batch& b) {
  StepResult r;
  const double waited = group_->sum_stats().wait_seconds;
  r.loss = forward_backward(b);
  r.exchange_wait = group_->sum_stats().wait_seconds - waited;
  r.grad_norm = global_grad_norm(params_);
  r.clip_scale = clip_grad_norm(params_, c_.clip, r.grad_norm);
  r.lr = lr_at(c_.schedule, opt_.steps());
  opt_.step(r.lr);
  for (Tensor& p : params_) p.zero_grad();  // free the gradients between steps
  return r;
}

double TrainEngine::evaluate(const Batch& b) const {
  NoGrad no_grad;
  return loss_of(b).item();
}

void write_model_gguf(Model& m, const Tokenizer* tok, const std::string& path, const std::string& name,
                      const ModelFileOptions& o) {
  const auto ft = gguf::file_type(o.file_type);
  if (!ft)
    throw std::invalid_argument("file type " + std::string(o.file_type) + " cannot be written (" +
                                std::string(gguf::file_type_names()) + ")");
  gguf::GgufWriter w;
  m.write_metadata(w);  // general.architecture first, then <arch>.*
  w.set("general.name", gguf::Value::of_string(name));
  w.set("general.file_type", gguf::Value::of_u32(ft->general_file_type));  // 0: LLAMA_FTYPE_ALL_F32
  for (const auto& [k, v] : o.metadata) w.set(k, v);
  if (tok) tok->write_gguf(w);
  std::vector<Tensor> written;  // converted copies live until the write
  bool quantized = false;
  const ModelConfig& mc = m.config();
  int n_expert = 0;  // llama-quantize's rules differ for 8 experts: the stacks are the 3-D parameters
  m.for_each_param([&](Tensor& t) { n_expert = t.shape().size() == 3 ? int(t.size(0)) : n_expert; });
  m.for_each_param([&](Tensor& t) {
    // A weight with low-rank terms is written folded, W + Σ scale·B·A: what a reader of the file computes.
    const Tensor folded = t.impl()->low_rank ? merged_weight(t) : t;
    written.push_back(gguf::to_file_dtype(*ft, folded, int(mc.n_layer), mc.tied_output, n_expert));
    quantized = quantized || info(written.back().dtype()).quantized;
    w.add_tensor(t.name(), written.back());
  });
  if (quantized) w.set("general.quantization_version", gguf::Value::of_u32(2));  // as llama-quantize writes
  w.write(path);
}

void write_optimizer_gguf(const AdamW& opt, const std::string& path,
                          const std::vector<std::pair<std::string, gguf::Value>>& extra, bool weights) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string("toy.optimizer"));
  w.set("toy.optim.name", gguf::Value::of_string("adamw"));
  w.set("toy.optim.beta1", gguf::Value::of_f32(opt.config().beta1));
  w.set("toy.optim.beta2", gguf::Value::of_f32(opt.config().beta2));
  w.set("toy.optim.eps", gguf::Value::of_f32(opt.config().eps));
  w.set("toy.optim.weight_decay", gguf::Value::of_f32(opt.config().weight_decay));
  for (const auto& [k, v] : extra) w.set(k, v);
  opt.save(w, weights);
  w.write(path);
}

}  // namespace toy
