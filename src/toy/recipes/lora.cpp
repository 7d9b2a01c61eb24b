// recipes/lora.cpp — the lora recipe: a frozen base with trainable adapters, on the Trainer.
#include "toy/recipes/lora.h"

#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "toy/archs/lora.h"
#include "toy/engines/events.h"
#include "toy/engines/train_data.h"
#include "toy/recipes/jsonl_data.h"
#include "toy/recipes/observers.h"

namespace toy::recipes {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> items;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

// What the run trains: the adapter (owned F32 tensors that require grad) and the dropout state
// every adapted weight reads.
struct LoraRun {
  LoraAdapter adapter;
  std::shared_ptr<LowRankDropout> dropout = std::make_shared<LowRankDropout>();
};

// A new adapter on `targets` of `m`: A ~ U(−1/√n_in, 1/√n_in), B = 0, from one seeded generator in
// tensor order.
LoraAdapter new_adapter(Model& m, const TrainRunConfig& c) {
  std::vector<std::string> names;
  try {
    names = lora_target_names(m, split_list(c.targets));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("--targets: ") + e.what());
  }
  LoraAdapter a;
  a.path = "(new adapter)";
  a.arch = m.config().arch;
  a.alpha = c.alpha;
  a.rank = c.rank;
  std::mt19937_64 rng(c.seed);
  m.for_each_param([&](Tensor& W) {
    if (std::find(names.begin(), names.end(), W.name()) == names.end()) return;
    const int64_t n_out = W.size(0), n_in = W.size(1);
    std::uniform_real_distribution<float> uniform(-1.0f / std::sqrt(float(n_in)), 1.0f / std::sqrt(float(n_in)));
    Tensor A = Tensor::empty({c.rank, n_in});  // [r, n_in]
    for (int64_t i = 0; i < A.numel(); ++i) A.data_mut()[i] = uniform(rng);
    a.pairs[W.name()] = {A, Tensor::zeros({n_out, c.rank})};  // B [n_out, r]
  });
  return a;
}

// The adapter of a file (--init-adapter, or the checkpoint resumed from), copied into owned F32
// tensors (the file's may be F16 or mapped).
LoraAdapter adapter_from_file(const std::string& path, const std::string& what) {
  if (!fs::exists(path)) throw DataError(what + " " + path + ": no such file");
  LoraAdapter a = read_lora(path);
  for (auto& [name, p] : a.pairs) p = {p.A.clone(), p.B.clone()};
  a.file.reset();
  return a;
}

// Writes adapters/step-N.gguf (after its optimizer state, for a later resume; the previous
// checkpoint's state is dropped) at the Checkpointer's steps, adapters/final.gguf at the last;
// advances the dropout masks' step.
class AdapterCheckpointer : public Observer {
 public:
  explicit AdapterCheckpointer(std::shared_ptr<LoraRun> run) : run_(std::move(run)) {}
  void on_start(Trainer& t) override {
    std::error_code ec;
    fs::remove(fs::path(t.run_dir()) / kWeightsDir, ec);  // empty: a LoRA run writes adapters only
    fs::create_directories(fs::path(t.run_dir()) / kAdaptersDir);
    last_ = t.start();
  }
  void at(Trainer& t, int64_t s) override {
    const TrainRunConfig& c = t.config();
    if (s <= t.start() || (s != t.end() && (c.checkpoint_every == 0 || s % c.checkpoint_every != 0))) return;
    const std::string& run_dir = t.run_dir();
    const Checkpoint k{s, checkpoint_model_path(run_dir, s, kAdaptersDir),
                       checkpoint_optimizer_path(run_dir, s, kAdaptersDir)};
    write_optimizer_gguf(
        t.engine().optimizer(), k.optimizer,
        {{"toy.train.step", gguf::Value::of_u64(uint64_t(s))}, {"toy.train.seed", gguf::Value::of_u64(c.seed)}});
    write_lora(run_->adapter, k.model);
    std::error_code ec;
    if (last_ > 0 && last_ != s) fs::remove(checkpoint_optimizer_path(run_dir, last_, kAdaptersDir), ec);
    last_ = s;
    if (s == c.steps) link_final(run_dir, k.model, kAdaptersDir);
    t.report(CheckpointReport{k});
  }

 private:
  std::shared_ptr<LoraRun> run_;
  int64_t last_ = 0;  // the previous checkpoint's step (0: none)
};

// Gives the dropout masks the step in flight, on every rank (each draws its masks itself).
class DropoutStep : public Observer {
 public:
  explicit DropoutStep(std::shared_ptr<LoraRun> run) : run_(std::move(run)) {}
  void at(Trainer&, int64_t s) override { run_->dropout->step = s; }
  bool on_every_rank() const override { return true; }

 private:
  std::shared_ptr<LoraRun> run_;
};

}  // namespace

RunResult train_lora(const TrainRunConfig& c0, const RunOutput& io, const std::string& resume_dir) {
  TrainRunConfig c = c0;
  validate(c);
  if (!fs::exists(c.base)) throw DataError("--base " + c.base + ": no such file");
  std::shared_ptr<const gguf::GgufFile> base = gguf::GgufFile::open(c.base);
  if (c.tokenizer.empty() && base->has("tokenizer.ggml.tokens")) c.tokenizer = c.base;  // the base's vocabulary

  auto run = std::make_shared<LoraRun>();
  run->dropout->p = c.dropout;
  run->dropout->seed = c.seed;
  // The base with the run's adapter attached: a new one, --init-adapter's, or a checkpoint's.
  auto adapted_base = [&](const std::function<LoraAdapter(Model&)>& adapter) {
    std::unique_ptr<Model> m = load_model(base);
    run->adapter = adapter(*m);
    apply_loras(*m, {{std::shared_ptr<const LoraAdapter>(run, &run->adapter), 1.0f}}, run->dropout);
    return m;
  };
  Recipe recipe{.new_model =
                    [&](const TrainRunConfig&, int64_t) {
                      return adapted_base([&](Model& m) {
                        return c.init_adapter.empty() ? new_adapter(m, c)
                                                      : adapter_from_file(c.init_adapter, "--init-adapter");
                      });
                    },
                .trainable =
                    [&](Model&) {
                      std::vector<Tensor> params;
                      for (auto& [name, p] : run->adapter.pairs) {
                        p.A.set_name(name + ".lora_a").requires_grad_();
                        p.B.set_name(name + ".lora_b").requires_grad_();
                        params.push_back(p.A);
                        params.push_back(p.B);
                      }
                      return params;
                    },
                .data = load_any_training_data,
                .checkpoint_dir = kAdaptersDir,
                .resume_model =
                    [&](const Checkpoint& k) {
                      return adapted_base([&](Model&) { return adapter_from_file(k.model, "checkpoint"); });
                    }};
  Trainer trainer(c, io, resume_dir, recipe);
  trainer.add_observer(console_observer());
  trainer.add_observer(event_file_observer());
  trainer.add_observer(loss_plot_observer());
  trainer.add_observer(evaluator());
  trainer.add_observer(std::make_unique<AdapterCheckpointer>(run));
  trainer.add_observer(std::make_unique<DropoutStep>(run));
  return trainer.run();
}

}  // namespace toy::recipes
