// examples/vit.cpp — a Vision Transformer learns to tell clothes apart, in one page.
//
// What it teaches: the same primitives and autograd that train toy's language models (linear,
// layer_norm, attention, gelu, cross_entropy, AdamW) train an image classifier. Images are cut
// into patches, each patch becomes a token, a class token gathers what the patches say, and a
// linear head turns it into 10 class scores. No run bundle here: just the loop (`toy train vit`
// is the full recipe, with checkpoints, events and resume).
//
//   build/examples/example_vit [DATA_DIR [STEPS]]     default: /usr/share/datasets/fashion-mnist, 150
//
// Prints the test accuracy before and after training (chance: 10%) and one classified image.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "toy/archs/vit.h"
#include "toy/engines/optimizer.h"
#include "toy/io/idx.h"
#include "toy/primitives/primitives.h"
#include "toy/recipes/vit.h"

using namespace toy;

int main(int argc, char** argv) {
  const std::string data = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 150;
  if (!std::filesystem::exists(data + "/train-images-idx3-ubyte.gz")) {
    std::fprintf(stderr, "%s: no Fashion-MNIST here (Debian: apt-get install dataset-fashion-mnist)\n", data.c_str());
    return 77;  // what CTest counts as skipped
  }
  try {
    // 1. Data: 28×28 grey images with a label 0…9 each (Fashion-MNIST, from a Debian package).
    const ImageSet train = read_image_set(data, "train", 10);
    ImageSet test = read_image_set(data, "t10k", 10);
    std::printf("%lld training images, %lld test images of %lldx%lld pixels\n", (long long)train.n, (long long)test.n,
                (long long)train.rows, (long long)train.cols);

    // 2. A tiny ViT: 7×7-pixel patches (16 tokens + the class token), 2 layers of width 32.
    std::unique_ptr<VitModel> model = VitModel::random({.image_size = 28,
                                                        .patch_size = 7,
                                                        .n_channel = 1,
                                                        .d_model = 32,
                                                        .n_layer = 2,
                                                        .n_head = 2,
                                                        .d_ff = 64,
                                                        .n_class = 10,
                                                        .eps = 1e-5f},
                                                       /*seed=*/1);

    // 3. Make every weight trainable: an owned F32 copy that records gradients.
    std::vector<Tensor> params;
    model->for_each_param([&](Tensor& w) {
      const std::string name = w.name();
      w = w.clone().set_name(name);
      w.requires_grad_();
      params.push_back(w);
    });
    AdamW opt(params, {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.05f});
    const Schedule schedule{.kind = ScheduleKind::Cosine, .lr = 3e-3f, .warmup = 10, .total = steps};

    const int64_t n_test = 1000;  // the first 1000 test images keep this quick
    auto accuracy = [&] { return recipes::evaluate_vit(*model, test, n_test).accuracy; };
    std::printf("before training: test accuracy %.1f%% (chance: 10%%)\n", 100 * accuracy());

    // 4. The loop: a random batch, forward, loss, backward, one AdamW update.
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int64_t> pick(0, train.n - 1);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> items(64);
      for (int64_t& i : items) i = pick(rng);
      std::vector<int32_t> labels;
      for (int64_t i : items) labels.push_back(train.labels[size_t(i)]);

      Tensor logits = model->forward(recipes::image_batch(train, items));   // [64, 10]
      Tensor loss = cross_entropy(logits, Tensor::from_ids({64}, labels));  // a scalar
      loss.backward();                                                      // fills every w.grad()
      opt.step(lr_at(schedule, s));
      for (Tensor& w : params) w.zero_grad();
      if (s % 25 == 0 || s + 1 == steps) std::printf("step %3lld: loss %.3f\n", (long long)s, loss.item());
    }
    const double after = accuracy();
    std::printf("after %lld steps: test accuracy %.1f%%\n", (long long)steps, 100 * after);

    // 5. One test image, as the model sees it.
    NoGrad no_grad;
    const std::vector<float> z = model->forward(recipes::image_batch(test, {0})).to_vector();  // 10 scores
    const int64_t best = std::max_element(z.begin(), z.end()) - z.begin();
    const auto& names = recipes::fashion_mnist_classes();
    std::printf("test image 0 is labelled %s; the model says %s\n", names[test.labels[0]].c_str(),
                names[size_t(best)].c_str());
    return after > 0.5 ? 0 : 1;  // well above chance, or something is wrong
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
