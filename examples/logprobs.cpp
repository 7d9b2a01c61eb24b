// examples/logprobs.cpp — how surprised is a language model by each word of a text?
//
// What it teaches: a causal LM's forward pass gives, at every position t, a distribution over
// the next token, softmax(logits[t]). The log-probability of the token that actually follows,
// log p(x[t+1] | x[0..t]), is how well the model predicted it: near 0 is "expected", very
// negative is "surprising". Their mean is the cross-entropy; exp(−mean) is the perplexity.
//
//   build/examples/example_logprobs [MODEL.gguf [TEXT]]      default: models/toy-stories.gguf
//
// Prints every token with its log-probability, the most and least surprising tokens, and checks
// that each row of probabilities sums to one.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "toy/archs/model.h"
#include "toy/engines/eval.h"
#include "toy/tokenizer/tokenizer.h"

using namespace toy;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "models/toy-stories.gguf";
  const std::string text = argc > 2 ? argv[2]
                                    : "Once upon a time there was a little girl named Lily. She loved to play "
                                      "outside in the sun with her red ball.";
  try {
    auto file = gguf::GgufFile::open(path);
    auto model = load_model(file);
    auto tokenizer = Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = tokenizer->encode(text, /*add_special=*/true);  // BOS first
    auto piece = [&](int32_t id) { return tokenizer->decode(std::vector<int32_t>{id}); };
    const int64_t T = int64_t(ids.size()), V = model->config().n_vocab;

    // One forward pass over the whole text: logits [1, T, V]; row t predicts ids[t + 1].
    NoGrad no_grad;
    const Tensor logits = model->forward(Tensor::from_ids({1, T}, ids), Ctx{});
    const std::vector<TokenScore> scores = score_logits(logits.reshape({T, V}), ids, /*top_k=*/1);

    // Each row is a probability distribution: Σ_v exp(logit_v − log Σ exp) = 1.
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      const std::span<const float> row(logits.data() + t * V, size_t(V));
      const double lse = log_sum_exp(row);
      double total = 0;
      for (float z : row) total += std::exp(double(z) - lse);
      worst = std::max(worst, std::fabs(total - 1));
    }
    std::printf("%lld tokens; every row of probabilities sums to 1 within %.1e\n\n", (long long)T, worst);

    double sum = 0;
    std::printf("  logprob  token             (the model's first guess)\n");
    for (size_t i = 0; i < scores.size(); ++i) {
      const TokenScore& s = scores[i];
      sum += s.logprob;
      std::printf("  %7.3f  %-16s  (%s)\n", s.logprob, ("'" + piece(s.id) + "'").c_str(),
                  piece(s.top[0].first).c_str());
    }
    const double mean = sum / double(scores.size());
    std::printf("\nmean log-probability %.3f nats/token, perplexity %.2f\n", mean, std::exp(-mean));

    // The most and least surprising tokens.
    std::vector<size_t> order(scores.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a].logprob < scores[b].logprob; });
    auto show = [&](const char* what, size_t i) {
      std::printf("%s '%s' after \"...%s\": p = %.4f\n", what, piece(scores[i].id).c_str(),
                  tokenizer
                      ->decode(std::vector<int32_t>(ids.begin() + std::max<int64_t>(1, int64_t(i) - 3),
                                                    ids.begin() + int64_t(i) + 1))
                      .c_str(),
                  std::exp(scores[i].logprob));
    };
    std::printf("\n");
    for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k) show("most surprising: ", order[k]);
    for (size_t k = 0; k < std::min<size_t>(3, order.size()); ++k)
      show("least surprising:", order[order.size() - 1 - k]);
    return worst < 1e-6 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
