// examples/lora.cpp — LoRA with the library: a frozen base, rank-4 adapters on the attention
// projections, a few AdamW steps on one sentence, the adapter written in llama.cpp's format and
// loaded back onto a fresh copy of the base.
//
//   build/examples/example_lora model.gguf "The cat sat on the mat." adapter.gguf
#include <cmath>
#include <cstdio>
#include <random>

#include "toy/archs/lora.h"
#include "toy/engines/train.h"
#include "toy/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TEXT ADAPTER_OUT.gguf\n", argv[0]);
    return 2;
  }
  try {
    auto file = toy::gguf::GgufFile::open(argv[1]);
    auto model = toy::load_model(file);  // the base: views of the mapping, never copied
    auto tokenizer = toy::Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = tokenizer->encode(argv[2], /*add_special=*/true);
    const int64_t T = int64_t(ids.size()) - 1;
    if (T < 1) throw std::runtime_error("the text needs at least two tokens");

    // An adapter: A random, B zero, on every attention projection (PEFT's initialisation).
    const int64_t rank = 4;
    toy::LoraAdapter adapter;
    adapter.arch = model->config().arch;
    adapter.alpha = 8;
    adapter.rank = rank;
    std::mt19937_64 rng(0);
    for (const std::string& name : toy::lora_target_names(*model, {"attn_q", "attn_k", "attn_v", "attn_output"})) {
      model->for_each_param([&](toy::Tensor& W) {
        if (W.name() != name) return;
        std::uniform_real_distribution<float> u(-1 / std::sqrt(float(W.size(1))), 1 / std::sqrt(float(W.size(1))));
        toy::Tensor A = toy::Tensor::empty({rank, W.size(1)}), B = toy::Tensor::zeros({W.size(0), rank});
        for (int64_t i = 0; i < A.numel(); ++i) A.data_mut()[i] = u(rng);
        A.set_name(name + ".lora_a").requires_grad_();
        B.set_name(name + ".lora_b").requires_grad_();
        adapter.pairs[name] = {A, B};
      });
    }
    auto shared = std::make_shared<const toy::LoraAdapter>(adapter);  // same tensors: training updates them
    toy::apply_loras(*model, {{shared, 1.0f}});

    // Train only A and B: the engine gets them as its parameters.
    std::vector<toy::Tensor> params;
    for (auto& [name, p] : adapter.pairs) params.insert(params.end(), {p.A, p.B});
    toy::TrainConfig config;
    config.schedule = {.kind = toy::ScheduleKind::Constant, .lr = 1e-2f};
    toy::TrainEngine engine(*model, config, params);
    const toy::Batch batch = toy::make_batch(ids, 1, T);
    const double base_loss = engine.evaluate(batch);  // B = 0: the base's own loss
    for (int step = 0; step < 20; ++step) {
      const toy::StepResult r = engine.step(batch);
      if (step % 5 == 0) std::printf("step %d: loss=%.4f\n", step, r.loss);
    }
    toy::write_lora(adapter, argv[3]);

    // Loaded back onto a fresh base: the same loss as the trained one.
    auto fresh = toy::load_model(file);
    toy::apply_loras(*fresh, {{std::make_shared<const toy::LoraAdapter>(toy::read_lora(argv[3])), 1.0f}});
    toy::TrainEngine check(*fresh, {}, {});
    const double trained = engine.evaluate(batch), reloaded = check.evaluate(batch);
    std::printf("base: %.4f  trained: %.4f  reloaded: %.4f  (wrote %s)\n", base_loss, trained, reloaded, argv[3]);
    // The adapter learned the sentence, and the file holds what was learned.
    return trained < base_loss && std::abs(reloaded - trained) < 1e-4 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
