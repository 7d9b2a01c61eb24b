// examples/warm_start.cpp — a small model starts from a bigger model's token embedding.
//
// What it teaches: a trained model's token embedding already knows which tokens are alike. A new,
// narrower model can start from it: the donor's table E [n_vocab, donor_d] stays frozen and a
// learned lens [donor_d, d_model] maps it into the new width, so token id enters the model as
// c·E[id]·lens (c a fixed scale). Two twins (same shape, same random weights, same batches) train side by side: one
// warm-started, one from scratch. At the end the lens is folded into an ordinary token_embd
// (c·E·lens) and the file is a plain model. `toy train warm-start --donor` is the full recipe.
//
//   build/examples/example_warm_start DONOR.gguf [STEPS]      e.g. models/toy-stories.gguf, 60 steps
//
// Prints both held-out losses as they train, and the folded file's loss (the same as the model's).
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "toy/archs/model.h"
#include "toy/engines/train.h"
#include "toy/engines/train_data.h"
#include "toy/tokenizer/tokenizer.h"

using namespace toy;

// Simple sentences in words the donor (trained on children's stories) has seen.
std::string sentences() {
  const char* who[] = {"Lily", "Tom", "Sue", "Ben"};
  const char* verb[] = {"saw", "liked", "found", "wanted"};
  const char* what[] = {"a red ball", "a big tree", "a little cat", "the sun"};
  std::string text;
  uint32_t x = 1;
  auto pick = [&] { return (x = x * 1103515245u + 12345u) >> 16 & 3; };
  for (int i = 0; i < 2000; ++i) text += std::string(who[pick()]) + " " + verb[pick()] + " " + what[pick()] + ". ";
  return text;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DONOR.gguf [STEPS]\n", argv[0]);
    return 2;
  }
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 60;
  try {
    // 1. The donor: its vocabulary (which the new model takes over) and its embedding table, mapped.
    auto donor = gguf::GgufFile::open(argv[1]);
    auto tok = Tokenizer::from_gguf(*donor);
    const Tensor E = donor->tensor(*donor->find_tensor("token_embd.weight"));  // [n_vocab, donor_d]
    const int64_t donor_d = E.size(1), d_model = 32, T = 32, B = 8;
    std::printf("donor: %lld tokens x %lld wide; the new models are %lld wide\n", (long long)E.size(0),
                (long long)donor_d, (long long)d_model);

    // 2. Two twins: the same shape and the same random weights, with their own output matrix.
    const ModelShape shape{.arch = "llama",
                           .n_vocab = tok->n_vocab(),
                           .d_model = d_model,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_kv_head = 4,
                           .d_ff = 96,
                           .n_ctx = 64,
                           .tied_output = false,
                           .keys = {}};
    auto scratch = random_model(shape, /*seed=*/1);
    auto warm = random_model(shape, /*seed=*/1);

    // 3. The lens, and the scale c of the term c·E·lens: c·E has rows of norm 32 on average and
    //    the lens starts 32 times smaller than a random weight (std 0.02 / 32), so c·E·lens starts
    //    as small as a random embedding. Adam's steps ignore the gradient's scale, so this is a
    //    lens learning 32 times faster than the rest: one matrix shared by every token.
    const Tensor Ef = E.clone();  // F32, whatever the donor's dtype
    double sum_sq = 0;
    for (int64_t i = 0; i < Ef.numel(); ++i) sum_sq += double(Ef.data()[i]) * Ef.data()[i];
    const float c = float(32 / std::sqrt(sum_sq / double(Ef.numel()) * double(donor_d)));
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f / 32);
    Tensor lens = Tensor::empty({donor_d, d_model});  // [donor_d, d_model]
    for (int64_t i = 0; i < lens.numel(); ++i) lens.data_mut()[i] = normal(rng);
    lens.set_name("token_embd.lens").requires_grad_();

    // 4. The warm twin's token_embd: an all-zero table that carries the low-rank term c·E·lens, so
    //    that embedding() returns c·E[id]·lens without ever forming E·lens. What trains: the lens
    //    and every weight but token_embd; E is frozen (not a parameter at all).
    std::vector<Tensor> trained{lens};
    for (const Tensor& p : make_trainable(*warm))
      if (p.name() != "token_embd.weight") trained.push_back(p);
    warm->for_each_param([&](Tensor& t) {
      if (t.name() != "token_embd.weight") return;
      Tensor zero = Tensor::zeros(t.shape()).set_name(t.name());
      t = with_low_rank(zero, {.terms = {{.A = lens, .B = E, .scale = c}}, .dropout = {}, .id = 0});
    });

    // 5. Train both on the same batches and compare their held-out losses.
    const TrainConfig config{.schedule = {.kind = ScheduleKind::Constant, .lr = 3e-3f}, .adamw = {}, .clip = 1.0f};
    TrainEngine scratch_engine(*scratch, config), warm_engine(*warm, config, trained);
    const TokenSplit split = TokenSplit::make(tok->encode(sentences(), /*add_special=*/true), 0.05, T);
    const std::vector<int32_t> held = split.eval_batches(B, T, 1)[0];
    const Batch held_out = make_batch(held, int64_t(held.size()) / (T + 1), T);
    std::printf("step   from scratch   warm-started   (held-out loss, nats/token)\n");
    for (int64_t s = 0; s <= steps; ++s) {
      if (s % 10 == 0 || s == steps)
        std::printf("%4lld   %12.3f   %12.3f\n", (long long)s, scratch_engine.evaluate(held_out),
                    warm_engine.evaluate(held_out));
      if (s == steps) break;
      const Batch batch = make_batch(split.sample(s, B, T, /*seed=*/0), B, T);
      scratch_engine.step(batch);
      warm_engine.step(batch);
    }

    // 6. Fold: write_model_gguf writes token_embd as c·E·lens, an ordinary file. Read back, it gives
    //    the model's loss: nothing of the lens is needed any more.
    const std::string path =
        (std::filesystem::temp_directory_path() / ("toy_warm_start_" + std::to_string(::getpid()) + ".gguf")).string();
    write_model_gguf(*warm, tok.get(), path, "warm-start-example");
    auto folded = load_model(gguf::GgufFile::open(path));
    TrainEngine check(*folded, {}, {});
    const double warm_loss = warm_engine.evaluate(held_out), folded_loss = check.evaluate(held_out);
    const double scratch_loss = scratch_engine.evaluate(held_out);
    std::printf("folded into %s: held-out loss %.5f (the warm model's: %.5f)\n", path.c_str(), folded_loss, warm_loss);
    std::filesystem::remove(path);
    // The lesson must have happened: the warm start is ahead, and the fold changed nothing.
    return warm_loss < scratch_loss && std::abs(folded_loss - warm_loss) < 1e-4 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
