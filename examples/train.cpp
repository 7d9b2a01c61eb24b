// examples/train.cpp — a language model learns a tiny language from scratch, in one page.
//
// What it teaches: training is the inference forward pass plus three things: a loss (how badly
// the model predicted each next token), backward (autograd fills every weight's gradient) and an
// optimizer update (AdamW). The text is byte-level tokens (one token per byte), so nothing but
// this file is needed. `toy train from-scratch` is the full recipe (run bundle, checkpoints,
// resume, evaluation); here is only the loop.
//
//   build/examples/example_train [CORPUS.txt [STEPS]]     default: sentences made up below, 200 steps
//
// Prints the training loss as it falls, the held-out loss before and after, and a greedy sample.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "toy/archs/model.h"
#include "toy/engines/generate.h"
#include "toy/engines/train.h"
#include "toy/engines/train_data.h"
#include "toy/tokenizer/tokenizer.h"

using namespace toy;

// "Lily saw a red ball. Tom liked the sun. …": a small language a small model can learn quickly.
const char* const who[] = {"Lily", "Tom", "Sue", "Ben"};
const char* const verb[] = {"saw", "liked", "found", "wanted"};
const char* const what[] = {"a red ball", "a big tree", "a little cat", "the sun"};
std::string made_up_sentences() {
  std::string text;
  uint32_t x = 1;
  auto pick = [&] { return (x = x * 1103515245u + 12345u) >> 16 & 3; };
  for (int i = 0; i < 3000; ++i) text += std::string(who[pick()]) + " " + verb[pick()] + " " + what[pick()] + ". ";
  return text;
}

int main(int argc, char** argv) {
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 200;
  try {
    // 1. Text -> token ids, split into a training part and a held-out part (the last 5%).
    const std::string text = argc > 1 ? read_file(argv[1]) : made_up_sentences();
    auto tok = Tokenizer::byte_level();
    const int64_t T = 32, B = 16;  // 16 windows of 32 tokens a step
    const TokenSplit split = TokenSplit::make(tok->encode(text, /*add_special=*/true), 0.05, T);

    // 2. A small Llama-style model with random weights (the same code `toy infer` runs).
    std::unique_ptr<Model> model = random_model({.arch = "llama",
                                                 .n_vocab = tok->n_vocab(),
                                                 .d_model = 64,
                                                 .n_layer = 2,
                                                 .n_head = 4,
                                                 .d_ff = 192,
                                                 .n_ctx = 64,
                                                 .keys = {}},
                                                /*seed=*/1);

    // 3. The engine: forward, cross-entropy over every position, backward, clipping, AdamW.
    TrainEngine engine(*model, {.schedule = {.kind = ScheduleKind::Cosine, .lr = 3e-3f, .warmup = 20, .total = steps},
                                .adamw = {},
                                .clip = 1.0f});
    const std::vector<int32_t> held = split.eval_batches(B, T, 1)[0];
    const Batch held_out = make_batch(held, int64_t(held.size()) / (T + 1), T);
    const double before = engine.evaluate(held_out);
    std::printf("held-out loss before training: %.3f nats/token (uniform over %lld tokens: %.3f)\n", before,
                (long long)tok->n_vocab(), std::log(double(tok->n_vocab())));

    // 4. The loop: step s reads its own batch of random windows, then updates the weights once.
    for (int64_t s = 0; s < steps; ++s) {
      const StepResult r = engine.step(make_batch(split.sample(s, B, T, /*seed=*/0), B, T));
      if (s % 25 == 0 || s + 1 == steps) std::printf("step %3lld: loss %.3f  lr %.2e\n", (long long)s, r.loss, r.lr);
    }
    const double after = engine.evaluate(held_out);
    std::printf("held-out loss after %lld steps: %.3f nats/token\n", (long long)steps, after);

    // 5. What it learned: continue a prompt greedily. The prompt has no BOS token: the training
    //    windows start anywhere in the text and never with BOS (it is once in the whole text), so
    //    BOS's embedding is untrained and, put first, it derails attention ("Lily saw lly lilly").
    DecodeEngine decoder(*model, 64);  // the KV cache: room for 64 positions
    Sampler greedy({.temperature = 0});
    std::string sample;
    StreamDecoder bytes(*tok);
    generate(decoder, greedy, tok->encode("Lily saw", /*add_special=*/false), 24,
             {.is_eog = [&](int32_t id) { return tok->is_eog(id); },
              .on_token =
                  [&](int32_t id) {
                    sample += bytes.push(id);
                    return true;
                  }});
    std::printf("sample: \"Lily saw%s\"\n", (sample + bytes.flush()).c_str());
    // It must have learned something: the loss fell, and "Lily saw" goes on with an object.
    bool grammatical = argc > 1;  // (only the made-up language is checked)
    for (const char* w : what) grammatical |= sample.rfind(std::string(" ") + w + ".", 0) == 0;
    return after < before - 1.0 && grammatical ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
