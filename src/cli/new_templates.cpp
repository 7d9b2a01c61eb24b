// cli/new_templates.cpp — the texts of the projects `toy new` creates, as raw strings.
//
// Placeholders: @NAME@ the project name, @IDENT@ the name as a C++ identifier, @VERSION@ toy's
// version, @PREFIX@ the default `toy install` prefix, @BUILD_STEPS@ the README lines that install
// toy and configure and build the project (readme_build_steps()). tests/test_new.cpp builds both templates
// against an installed toy and runs them, so these texts are compiled code, not examples.
#include "cli/new_templates.h"

#include <cstdlib>

namespace toy::cli {

namespace {

// ---------------------------------------------------------------------------------------------
// Experiment

const char* kExperimentCmake = R"(cmake_minimum_required(VERSION 3.22)
project(@NAME@ LANGUAGES CXX)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

# toy, installed with `toy install --prefix P`; configure with -DCMAKE_PREFIX_PATH=P.
find_package(toy @VERSION@ REQUIRED)

add_executable(@NAME@ main.cpp)
target_link_libraries(@NAME@ PRIVATE toy::toy)
)";

const char* kExperimentMain =
    R"(// @NAME@ — a toy experiment: a small Llama-style model trained from scratch on data/corpus.txt.
//
//   ./build/@NAME@ [config.json] [steps]
//
// Everything that decides the numbers is in config.json (sizes, learning rate, seed); the same
// config gives the same losses on every run. Prints the training loss as it goes and the loss on
// held-out text at the end, then writes the trained model to `out`: a GGUF file that
// `toy infer`, `toy describe --card` and llama.cpp read.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "toy/archs/model.h"
#include "toy/engines/train.h"
#include "toy/engines/train_data.h"
#include "toy/tokenizer/tokenizer.h"

using namespace toy;
using json = nlohmann::json;

// A Llama decoder of the configured size with random weights (N(0, 0.02) matrices, unit norms).
std::unique_ptr<Model> build_model(const json& cfg, int64_t n_vocab) {
  return random_model({.arch = "llama", .n_vocab = n_vocab, .d_model = cfg.at("d_model"), .n_layer = cfg.at("n_layer"),
                       .n_head = cfg.at("n_head"), .n_kv_head = cfg.at("n_head"), .d_ff = cfg.at("d_ff"),
                       .n_ctx = cfg.at("context"), .tied_output = true, .keys = {}},
                      cfg.at("seed"));
}

int main(int argc, char** argv) try {
  const std::string config_path = argc > 1 ? argv[1] : "config.json";
  std::ifstream config_file(config_path);
  if (!config_file) throw std::runtime_error("cannot read " + config_path);
  const json cfg = json::parse(config_file);
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : cfg.at("steps").get<int64_t>();
  const int64_t T = cfg.at("context"), B = cfg.at("batch"), log_every = cfg.at("log_every");
  const uint64_t seed = cfg.at("seed");

  // Data: one token per byte of the corpus; its last 10% is held out.
  auto tok = Tokenizer::byte_level();
  const TokenSplit data = TokenSplit::make(tok->encode(read_file(cfg.at("corpus"))), 0.1, T);

  auto model = build_model(cfg, tok->n_vocab());
  int64_t n_params = 0;
  model->for_each_param([&](Tensor& p) { n_params += p.numel(); });
  std::printf("@NAME@: %lld parameters, %zu training tokens, %lld steps of %lld x %lld tokens\n", (long long)n_params,
              data.train.size(), (long long)steps, (long long)B, (long long)T);

  TrainConfig train;
  train.schedule = {.kind = ScheduleKind::Cosine, .lr = cfg.at("lr"), .warmup = std::min<int64_t>(20, steps / 10), .total = steps};
  TrainEngine engine(*model, train);
  // Step n (from 1) is the n-th update; its loss is that of its batch before the update.
  for (int64_t n = 1; n <= steps; ++n) {
    const StepResult r = engine.step(make_batch(data.sample(n - 1, B, T, seed), B, T));
    if (n == 1 || n % log_every == 0 || n == steps) std::printf("step %lld: loss=%.4f lr=%.2e\n", (long long)n, r.loss, r.lr);
  }

  double held_out = 0;
  const auto batches = data.eval_batches(B, T, /*max_batches=*/4);
  for (const auto& ids : batches) held_out += engine.evaluate(make_batch(ids, int64_t(ids.size()) / (T + 1), T));
  std::printf("held-out loss: %.4f\n", held_out / double(batches.size()));

  const std::string out = cfg.at("out");
  write_model_gguf(*model, tok.get(), out, "@NAME@");
  std::printf("wrote %s (try: toy infer %s --prompt \"The lamp\")\n", out.c_str(), out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "@NAME@: %s\n", e.what());
  return 1;
}
)";

const char* kExperimentConfig = R"({
  "corpus": "data/corpus.txt",
  "d_model": 64,
  "n_layer": 2,
  "n_head": 4,
  "d_ff": 192,
  "context": 64,
  "batch": 8,
  "steps": 300,
  "lr": 0.003,
  "seed": 1,
  "log_every": 25,
  "out": "@NAME@.gguf"
}
)";

const char* kCorpus =
    R"(The lighthouse keeper wrote the same line in his book every night: the lamp is lit, the sea is calm.
Some nights the sea was not calm, and he wrote that too, but he always wrote that the lamp was lit.
One winter a small boat came in from the fog. A girl sat in it with a basket of apples and a map.
"Is this the island with the lamp?" she asked. "It is," said the keeper. "The lamp is lit."
She stayed for one night. She counted the steps of the tower: one hundred and twelve.
In the morning she gave him three apples and went back to the boat. He wrote: a girl came, the lamp is lit.
Spring came. The birds came back to the rocks and sat in long rows, counting the waves.
The keeper painted the door blue. He mended the net. He read the old book from the first page.
Every page said the lamp is lit, the sea is calm, and some pages said the sea is not calm.
In summer the girl came again with a bigger boat and a bigger map. "I drew your island," she said.
On her map the island was a small round shape with a star on it. "The star is the lamp," she said.
The keeper laughed. He had never seen his island from above. It looked smaller and brighter.
They climbed the one hundred and twelve steps and looked at the sea. It was calm.
"Who writes the book when you sleep?" she asked. "Nobody," he said. "The lamp does not sleep."
She took a pencil and wrote on a new page: the lamp is lit, the sea is calm, the keeper is asleep.
In autumn the storms came. The waves were as tall as the tower and the birds hid in the rocks.
The keeper did not sleep for three nights. He wrote: the sea is not calm, the lamp is lit.
On the fourth night a ship saw the light and turned away from the rocks. Nobody on the ship knew his name.
In the morning the sea was calm again. The keeper slept all day, and the lamp waited for the night.
When the girl came back, she brought a book of her own. On every page she had drawn the lamp.
)";

const char* kExperimentReadme = R"(# @NAME@

A toy experiment: `main.cpp` builds a small Llama-style model with the
toy library, trains it from random weights on
`data/corpus.txt` (one token per byte) and writes the trained model as a GGUF file.

## Build and run

@BUILD_STEPS@
./build/@NAME@ config.json          # or: ./build/@NAME@ config.json 20   (20 steps)
```

It prints the training loss every `log_every` steps, the held-out loss at the end, and
writes `@NAME@.gguf`. Look at it and sample from it:

```sh
toy describe @NAME@.gguf --card
toy infer @NAME@.gguf --prompt "The lamp"
```

## Change it

* `config.json`: model size (`d_model`, `n_layer`, `n_head`, `d_ff`), `context`, `batch`,
  `steps`, `lr`, `seed`. The same config gives the same numbers on every run.
* `data/corpus.txt`: any UTF-8 text.
* `main.cpp`: the model (`build_model`), the schedule, the loop.
)";

const char* kExperimentGitignore = "build/\nruns/\n*.gguf\n";

// ---------------------------------------------------------------------------------------------
// Library

const char* kLibraryCmake = R"(cmake_minimum_required(VERSION 3.22)
project(@NAME@ VERSION 0.1.0 LANGUAGES CXX)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

# toy, installed with `toy install --prefix P`; configure with -DCMAKE_PREFIX_PATH=P.
find_package(toy @VERSION@ REQUIRED)

add_library(@NAME@ src/@NAME@.cpp)
target_include_directories(@NAME@ PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                         $<INSTALL_INTERFACE:include>)
target_link_libraries(@NAME@ PUBLIC toy::toy)

enable_testing()
add_executable(@NAME@_check tests/check.cpp)
target_link_libraries(@NAME@_check PRIVATE @NAME@)
add_test(NAME @NAME@_check COMMAND @NAME@_check)

install(TARGETS @NAME@ ARCHIVE DESTINATION lib)
install(DIRECTORY include/ DESTINATION include)
)";

const char* kLibraryHeader =
    R"(// @NAME@/@NAME@.h — a library built on toy: a new primitive with its gradient, written the
// way toy's own primitives are (forward and backward rule in one place).
#pragma once

#include "toy/tensor/tensor.h"

namespace @IDENT@ {

// relu(x)², the activation of Primer (So et al., 2021):  y = max(x, 0)²,  dy/dx = 2·max(x, 0).
// x: F32, any shape -> same shape. Records itself for autograd when x requires grad.
toy::Tensor squared_relu(const toy::Tensor& x);

}  // namespace @IDENT@
)";

const char* kLibrarySource = R"(// src/@NAME@.cpp — see include/@NAME@/@NAME@.h.
#include "@NAME@/@NAME@.h"

#include <vector>

namespace @IDENT@ {

toy::Tensor squared_relu(const toy::Tensor& x) {
  toy::Tensor y = toy::Tensor::empty(x.shape());
  const float* a = x.data();
  float* out = y.data_mut();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = a[i] > 0 ? a[i] * a[i] : 0.0f;
  if (toy::needs_grad({&x}))
    toy::record(y, "squared_relu", {x}, [x](const toy::Tensor& dy) {
      // forward: y = max(x, 0)², so dx = dy · 2·max(x, 0)
      toy::Tensor dx = toy::Tensor::empty(x.shape());
      const float* a = x.data();
      const float* g = dy.data();
      float* d = dx.data_mut();
      for (int64_t i = 0; i < x.numel(); ++i) d[i] = a[i] > 0 ? 2.0f * a[i] * g[i] : 0.0f;
      return std::vector<toy::Tensor>{dx};
    });
  return y;
}

}  // namespace @IDENT@
)";

const char* kLibraryCheck =
    R"(// tests/check.cpp — squared_relu against its definition, and its gradient against a finite difference.
#include <cmath>
#include <cstdio>
#include <vector>

#include "@NAME@/@NAME@.h"
#include "toy/primitives/primitives.h"

int main() {
  const std::vector<float> xs = {-2.0f, -0.5f, 0.25f, 1.0f, 3.0f};
  toy::Tensor x = toy::Tensor::from({5}, xs);
  x.requires_grad_();
  toy::Tensor y = @IDENT@::squared_relu(x);
  toy::sum(y).backward();  // d(sum y)/dx = 2·max(x, 0)

  int failures = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = xs[i] > 0 ? xs[i] * xs[i] : 0.0f;
    const float h = 1e-2f, xp = xs[i] + h, xm = xs[i] - h;
    const float numeric = ((xp > 0 ? xp * xp : 0.0f) - (xm > 0 ? xm * xm : 0.0f)) / (2 * h);
    const float got = y.to_vector()[i], grad = x.grad().to_vector()[i];
    const bool ok = std::fabs(got - want) < 1e-6f && std::fabs(grad - numeric) < 1e-3f;
    std::printf("x=%6.2f  y=%8.4f (want %8.4f)  dy/dx=%8.4f (numeric %8.4f)  %s\n", xs[i], got, want, grad, numeric,
                ok ? "ok" : "FAIL");
    failures += !ok;
  }
  std::printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
)";

const char* kLibraryReadme = R"(# @NAME@

A library built on toy: it adds `@IDENT@::squared_relu`, a primitive
with its gradient, written the way toy's own primitives are. Use it as the starting point for
new operations, blocks or architectures that live outside toy's tree.

## Build and test

@BUILD_STEPS@
ctest --test-dir build --output-on-failure      # or: ./build/@NAME@_check
```

## Use it from another project

```cmake
add_subdirectory(@NAME@)                 # or install it and find it with your own package file
target_link_libraries(my_app PRIVATE @NAME@)
```

```cpp
#include "@NAME@/@NAME@.h"
toy::Tensor y = @IDENT@::squared_relu(x);   // gradients flow through it
```
)";

const char* kLibraryGitignore = "build/\n";

// ---------------------------------------------------------------------------------------------
// Architecture

const char* kArchCmake = R"TOY(cmake_minimum_required(VERSION 3.24)
project(@NAME@ LANGUAGES CXX)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

# toy, installed with `toy install --prefix P`; configure with -DCMAKE_PREFIX_PATH=P.
find_package(toy @VERSION@ REQUIRED)

# Your own `toy`: every toy command, with the architecture in arch.cpp registered.
add_executable(@NAME@ main.cpp arch.cpp)
target_link_libraries(@NAME@ PRIVATE toy::cli)
)TOY";

const char* kArchMain = R"TOY(// @NAME@ — the `toy` command line with one more architecture (arch.cpp).
//
//   ./build/@NAME@ init --card example.card.md -o example.gguf     # a model of it, random weights
//   ./build/@NAME@ describe example.gguf --card                     # its algorithm card
//   ./build/@NAME@ infer example.gguf --ids 1,2,3 -n 8              # and every other toy command
#include "toy/cli.h"

int main(int argc, char** argv) { return toy::cli::main(argc, argv); }
)TOY";

const char* kArchSource =
    R"TOY(// arch.cpp — the "@IDENT@" architecture: a decoder whose feed-forward network is an ungated GELU
// MLP (as GPT-2's) after RMSNorm, with RoPE attention (as Qwen's). GGUF arch "@IDENT@".
//
//   x = token_embd[tokens]                                                   [B, T, D]
//   for each layer:  h = x + attention(rms_norm(x))        RoPE NEOX, GQA
//                    x = h + ffn_down(gelu(ffn_up · rms_norm(h) + b)) + b
//   logits = token_embd · rms_norm(x)                                        [B, T, V]
//
// Everything toy knows about it is below: the GGUF keys, the tensors, the card's facts, the
// forward pass. The last line registers it; every toy command then reads and writes it.
#include "toy/archs/arch.h"
#include "toy/blocks/gpt2.h"  // GeluMlpWeights, gelu_mlp

namespace {

using namespace toy;

struct Example {
  static constexpr const char* name = "@IDENT@";
  static constexpr Variant variant = {.hf_class = "(none)",
           .positions = Positions::RopeNeox, .ffn = FfnKind::GeluMlp
};

struct Hparams : ModelConfig {
  float eps = 1e-5f;           // attention.layer_norm_rms_epsilon
  float rope_base = 10000.0f;  // rope.freq_base
  int64_t n_rot = 0;           // rope.dimension_count
};
template <class V>
static void keys(V& v, Hparams& h) {
  decoder_keys(v, h);
  v.key("attention.layer_norm_rms_epsilon", h.eps, Required{1e-5f});
  rope_keys(v, h);
}

struct Layer {
  Tensor attn_norm, ffn_norm;  // [D]
  AttentionWeights attn;
  GeluMlpWeights ffn;
};
struct Weights {
  Tensor token_embd;  // [V, D], also the output projection
  std::vector<Layer> blk;
  Tensor output_norm;  // [D]
};
template <class V>
static void tensors(V& v, Weights& w, const Hparams& h) {
  const Dims d(h);
  v.tensor("token_embd.weight", w.token_embd, {d.V, d.D}, Init::Normal);
  v.layers(w.blk, h.n_layer, [&](Layer& L) {
    v.tensor("attn_norm.weight", L.attn_norm, {d.D}, Init::Ones);
    v.tensor("attn_q.weight", L.attn.attn_q, {d.Q, d.D}, Init::Normal);
    v.tensor("attn_k.weight", L.attn.attn_k, {d.KV, d.D}, Init::Normal);
    v.tensor("attn_v.weight", L.attn.attn_v, {d.KV, d.D}, Init::Normal);
    v.tensor("attn_output.weight", L.attn.attn_output, {d.D, d.Q}, Init::Normal);
    v.tensor("ffn_norm.weight", L.ffn_norm, {d.D}, Init::Ones);
    v.tensor("ffn_up.weight", L.ffn.ffn_up, {d.F, d.D}, Init::Normal);
    v.tensor("ffn_up.bias", L.ffn.ffn_up_bias, {d.F}, Init::Zeros);
    v.tensor("ffn_down.weight", L.ffn.ffn_down, {d.D, d.F}, Init::Normal);
    v.tensor("ffn_down.bias", L.ffn.ffn_down_bias, {d.D}, Init::Zeros);
  });
  v.tensor("output_norm.weight", w.output_norm, {d.D}, Init::Ones);
}

static Tensor forward(const Weights& w, const Hparams& h, const Tensor& tokens, const Ctx& ctx) {
  const AttentionConfig a = rope_attention(h, variant);
  const RopeTable angles = rope_angles(ctx.positions(tokens), a.rope);  // once per forward
  Tensor x = embedding(w.token_embd, tokens);                           // [B, T, D]
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const Layer& L = w.blk[size_t(l)];
    x = x + self_attention(L.attn, a, rms_norm(x, L.attn_norm, h.eps), angles, ctx, l);  // [B, T, D]
    x = x + gelu_mlp(L.ffn, rms_norm(x, L.ffn_norm, h.eps));                             // [B, T, D]
  }
  x = rms_norm(logit_positions(x, ctx), w.output_norm, h.eps);  // [B, T, D]
  return linear(x, w.token_embd);                               // [B, T, V]
}
};

const Registration reg(architecture<Example>());  // the one line that adds it to every toy command

}  // namespace
)TOY";

const char* kArchCard = R"TOY(# A small @IDENT@ model

`./build/@NAME@ init --card example.card.md -o example.gguf` builds it with random weights.

```toy-card
general.architecture: string = "@IDENT@"
general.name: string = "@NAME@ example"
@IDENT@.context_length: u32 = 64
@IDENT@.embedding_length: u32 = 64
@IDENT@.block_count: u32 = 2
@IDENT@.feed_forward_length: u32 = 128
@IDENT@.attention.head_count: u32 = 4
@IDENT@.attention.head_count_kv: u32 = 2
@IDENT@.attention.layer_norm_rms_epsilon: f32 = 1e-05
card.n_vocab: u32 = 512
card.tied_output: bool = true
```
)TOY";

const char* kArchReadme = R"TOY(# @NAME@

A new architecture, "@IDENT@", written the way toy's own are (`arch.cpp`: its GGUF keys, its
tensors, its card's facts and its forward pass), and a program, `build/@NAME@`, that is the whole
`toy` command line with that architecture registered.

## Build and run

@BUILD_STEPS@
./build/@NAME@ init --card example.card.md -o example.gguf
./build/@NAME@ describe example.gguf --card
./build/@NAME@ infer example.gguf --ids 1,2,3 -n 8 --temp 0
```

Train it: `./build/@NAME@ train from-scratch --init-weights example.gguf --corpus some.txt`;
serve it: `./build/@NAME@ serve example.gguf`. The files it writes are ordinary GGUF files.

## Change it

* `arch.cpp`: the hyper-parameters (`keys`), the tensors (`tensors`), the forward pass.
* `example.card.md`: the size of the example model.
)TOY";

}  // namespace

const std::vector<TemplateFile>& experiment_template() {
  static const std::vector<TemplateFile> t = {
      {"CMakeLists.txt", kExperimentCmake}, {"main.cpp", kExperimentMain},    {"config.json", kExperimentConfig},
      {"data/corpus.txt", kCorpus},         {"README.md", kExperimentReadme}, {".gitignore", kExperimentGitignore},
  };
  return t;
}

const std::vector<TemplateFile>& library_template() {
  static const std::vector<TemplateFile> t = {
      {"CMakeLists.txt", kLibraryCmake},  {"include/@NAME@/@NAME@.h", kLibraryHeader},
      {"src/@NAME@.cpp", kLibrarySource}, {"tests/check.cpp", kLibraryCheck},
      {"README.md", kLibraryReadme},      {".gitignore", kLibraryGitignore},
  };
  return t;
}

const std::vector<TemplateFile>& arch_template() {
  static const std::vector<TemplateFile> t = {
      {"CMakeLists.txt", kArchCmake}, {"main.cpp", kArchMain},    {"arch.cpp", kArchSource},
      {"example.card.md", kArchCard}, {"README.md", kArchReadme}, {".gitignore", kExperimentGitignore},
  };
  return t;
}

std::string default_install_prefix() {
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/usr/local") + (home && *home ? "/.local" : "");
}

const char* readme_build_steps() {
  return R"(toy must be installed first (once):

```sh
toy install --prefix @PREFIX@
```

Then, in this directory:

```sh
cmake -S . -B build -DCMAKE_PREFIX_PATH=@PREFIX@
cmake --build build)";
}

}  // namespace toy::cli
