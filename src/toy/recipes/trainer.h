// recipes/trainer.h — L5: a training run as three parts: setting it up, a short loop, and
// observers that report and save. A recipe is a few lines on top of it (from_scratch.cpp):
//
//   Trainer t(config, io, resume_dir, {.new_model = build_model});  // bundle, tokenizer, model, data, engine
//   add_standard_observers(t);  // stdout + progress bar, events.jsonl, loss.svg, evaluation, checkpoints
//   return t.run();
//
// The loop, for s = first step … end (s = updates done so far):
//   at(s)   every observer sees the weights after s updates: evaluation and checkpoints happen here
//   stop    when s == end (--steps, --stop-after, or Ctrl-C: then end = s)
//   update s + 1: its batch (a pure function of the step), forward, backward, clip, AdamW → on_step
// Steps count from 1, as the seeds do: step N is the N-th update, and the training loss reported
// for step N is that of its batch on the weights before it (after N − 1 updates). Checkpoint
// step-N and `eval N` are the weights after N updates, i.e. after step N.
//
// Everything that decides the numbers (settings, data, seed) is in config.json, and every batch
// is a pure function of the step, so the same command gives the same losses and checkpoint
// bytes, and a run resumed from step-N continues exactly as if never stopped.
//
// Over MPI (RunOutput::world, engines/distributed.h) every rank runs this same loop on the same
// batches and gets the same updates; rank 0 alone opens the bundle and has the observers (only
// those that keep state every rank needs, Observer::on_every_rank, run on the others).
// Not here: the settings (run_config.h), the training step (engines/train.h), the files of a
// bundle (engines/run_bundle.h, engines/events.h), what is reported (observers.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "toy/engines/run_bundle.h"
#include "toy/engines/train.h"
#include "toy/recipes/run_config.h"

namespace toy {
class Tokenizer;
}

namespace toy::recipes {

struct RunOutput {
  std::FILE* out = stdout;  // "step N: loss=…" and "eval N: val_loss=…" lines
  std::FILE* err = stderr;  // summaries and warnings
  bool progress = false;    // a progress bar on `err` (the CLI: when it is a terminal)
  // Set (by a SIGINT/SIGTERM handler) to end the run after the step in flight, with a checkpoint.
  const std::atomic<bool>* stop = nullptr;
  // The processes training together (mpirun); null: this one alone.
  ProcessGroup* world = nullptr;
};

struct RunResult {
  std::string run_dir;
  int64_t steps_done = 0;      // updates in the last checkpoint
  double last_loss = 0;        // training loss of the last step run
  double last_eval_loss = -1;  // of the last evaluation (-1: none)
  bool completed = false;      // reached `steps` (not stopped by stop_after or a signal)
  bool interrupted = false;    // ended early by RunOutput::stop
};

// Where a run's batches come from.
struct TrainingData {
  std::function<std::vector<int32_t>(int64_t step)> batch_ids;  // B·(T + 1) ids of step s
  std::vector<Batch> eval;                                      // fixed held-out batches
  nlohmann::ordered_json summary;                               // for run_start
};

// --corpus (tokenized with `tok`) or --data-ids; progress notes go to `err`. Throws DataError.
TrainingData load_training_data(const TrainRunConfig& c, const Tokenizer* tok, int64_t n_vocab, std::FILE* err);

// What a recipe contributes to the run.
struct Recipe {
  // The initial model of a new run without --init-weights, for a vocabulary of n_vocab tokens.
  std::function<std::unique_ptr<Model>(const TrainRunConfig&, int64_t n_vocab)> new_model;
  // The tensors the run trains (default: every parameter of the model, made F32 and trainable).
  std::function<std::vector<Tensor>(Model&)> trainable = make_trainable;
  // The batches and held-out data.
  std::function<TrainingData(const TrainRunConfig&, const Tokenizer*, int64_t n_vocab, std::FILE* err)> data =
      load_training_data;
  // The bundle directory of the checkpoints (run_bundle.h): weights/, or adapters/ for a LoRA run.
  const char* checkpoint_dir = kWeightsDir;
  // The model of the checkpoint a run resumes from (null: the checkpoint file, loaded).
  std::function<std::unique_ptr<Model>(const Checkpoint&)> resume_model = nullptr;
};

// What observers are told.
struct StepReport {
  int64_t step = 0;    // N ≥ 1, the N-th update: result.loss is its batch on the weights before it
  StepResult result;   // loss, gradient norm, lr, clip scale
  double seconds = 0;  // wall time of the step (batch, forward, backward, update)
};
struct EvalReport {
  int64_t step = 0;  // the held-out loss of the weights after `step` updates
  double loss = 0;
  size_t batches = 0;
  double seconds = 0;
};
struct CheckpointReport {
  Checkpoint files;  // both written
};
enum class EndReason { Completed, Stopped, Interrupted, Diverged };
const char* to_string(EndReason r);  // "completed", …
int exit_code(EndReason r);          // the process exit status the CLI gives: 0, 0, 130, 1
struct EndReport {
  EndReason reason = EndReason::Completed;
  int64_t step = 0;       // the last checkpoint (Diverged: the step whose loss diverged)
  double loss = 0;        // training loss of the last step run (NaN: none)
  double eval_loss = -1;  // of the last evaluation (-1: none)
  double seconds = 0;     // wall time of this invocation's loop
  int64_t steps_run = 0;  // steps run by this invocation
};

class Trainer;

// Sees the run; every method defaults to nothing. Observers are called in the order they were
// added, so the stdout line of an evaluation comes before its event, as a reader expects.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_start(Trainer&) {}
  virtual void at(Trainer&, int64_t s) {}  // weights after s updates, before step s or at the end
  virtual void on_step(Trainer&, const StepReport&) {}
  virtual void on_eval(Trainer&, const EvalReport&) {}
  virtual void on_checkpoint(Trainer&, const CheckpointReport&) {}
  virtual void on_end(Trainer&, const EndReport&) {}
  // True for an observer whose state every rank of a distributed run needs (not one that writes
  // or prints: those run on rank 0 only).
  virtual bool on_every_rank() const { return false; }
};

class Trainer {
 public:
  // Sets the run up: validates `c` (ConfigError), creates the bundle `<runs_dir>/<run_id>` or
  // opens `resume_dir` (locked against other processes for the life of the Trainer; its
  // temporaries and a torn last event removed), the tokenizer, the model (the newest checkpoint
  // when resuming, else --init-weights, else recipe.new_model), the data and the engine.
  // Resuming a run that reached `steps` but was killed before sealing it (final.gguf and
  // run_end) seals it; run() then does nothing else. Throws ConfigError (usage), toy::DataError,
  // gguf::GgufError or TokenizerError (bad input files) and std::runtime_error (I/O).
  Trainer(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir, const Recipe& recipe);

  // On a rank other than 0, only an observer on_every_rank() is kept.
  void add_observer(std::unique_ptr<Observer> o) {
    if (group_.rank() == 0 || o->on_every_rank()) observers_.push_back(std::move(o));
  }
  // The loop. Throws std::runtime_error when the loss diverges (after telling the observers).
  RunResult run();

  // For observers: fan a report out to every observer.
  void report(const EvalReport& r);
  void report(const CheckpointReport& r);

  const TrainRunConfig& config() const { return c_; }
  const RunOutput& io() const { return io_; }
  ProcessGroup& world() const { return group_; }
  const std::string& run_dir() const { return run_dir_; }
  std::string events_path() const;
  const char* checkpoint_dir() const { return checkpoint_dir_; }  // Recipe::checkpoint_dir
  bool resuming() const { return resuming_; }
  int64_t start() const { return start_; }  // first step of this invocation (the checkpoint resumed from)
  int64_t end() const { return end_; }      // the step this invocation ends at
  TrainEngine& engine() { return *engine_; }
  const Tokenizer* tokenizer() const { return tok_.get(); }
  const TrainingData& data() const { return data_; }
  int64_t n_params() const;
  // general.name of the checkpoints: that of --init-weights when it has one (a fine-tune keeps its
  // base's name), else "toy-<recipe>"; lineage(): general.base_model.* naming the base, if any.
  const std::string& model_name() const { return model_name_; }
  const std::vector<std::pair<std::string, gguf::Value>>& lineage() const { return lineage_; }

 private:
  void open_new_bundle();
  void resume_from_checkpoint();
  void load_model_and_data(const Recipe& recipe);
  void seal();
  void follow_resume(int64_t step);
  void finish(EndReport e);

  TrainRunConfig c_;
  RunOutput io_;
  ProcessGroup& group_;
  bool resuming_ = false;
  std::string run_dir_;
  const char* checkpoint_dir_ = kWeightsDir;
  BundleLock lock_;
  std::optional<Checkpoint> ckpt_;  // resumed from
  bool sealed_ = false;             // this invocation only sealed a finished run
  std::shared_ptr<const Tokenizer> tok_;
  std::unique_ptr<Model> model_;
  std::string model_name_;
  std::vector<std::pair<std::string, gguf::Value>> lineage_;
  TrainingData data_;
  std::unique_ptr<TrainEngine> engine_;
  int64_t start_ = 0, end_ = 0;
  std::vector<std::unique_ptr<Observer>> observers_;
  RunResult result_;
};

}  // namespace toy::recipes
