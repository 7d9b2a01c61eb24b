// recipes/trainer.cpp — setting a run up (bundle, lock, resume state, tokenizer, model, data,
// engine), its data, and the loop.
#include "toy/recipes/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "toy/engines/events.h"
#include "toy/engines/train_data.h"
#include "toy/kernels/kernels.h"
#include "toy/recipes/default_corpus.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// Data.

namespace {

// Token ids of a text, with the vocabulary's special tokens where inference puts them: a prompt
// gets BOS when the vocabulary asks for it (toy infer, llama.cpp), so every document starts with
// it too. Documents separated by "<|endoftext|>" (TinyStories) end with the vocabulary's EOS
// when the marker is not a token of its own, so a model learns where a story ends.
std::vector<int32_t> tokenize_corpus(const Tokenizer& tok, const std::string& text) {
  static const std::string kMarker = "<|endoftext|>";
  const bool marker_is_token = tok.encode(kMarker, false, true).size() == 1;
  if (marker_is_token || tok.eos() < 0 || text.find(kMarker) == std::string::npos) return tok.encode(text, true, true);
  std::vector<int32_t> ids;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find(kMarker, pos);
    const bool found = end != std::string::npos;
    if (!found) end = text.size();
    std::string_view doc(text.data() + pos, end - pos);
    if (!doc.empty() && doc.front() == '\n') doc.remove_prefix(1);
    if (!doc.empty() || found) {
      const std::vector<int32_t> d = tok.encode(doc, true, true);
      ids.insert(ids.end(), d.begin(), d.end());
      if (found && (ids.empty() || ids.back() != tok.eos())) ids.push_back(tok.eos());
    }
    pos = found ? end + kMarker.size() : end;
  }
  return ids;
}

}  // namespace

// With --grad-accum N an update reads B·N sequences: the batch of a run with --batch B·N. The
// held-out windows are those of such a run too, evaluated B sequences at a time.
TrainingData load_training_data(const TrainRunConfig& c, const Tokenizer* tok, int64_t n_vocab, std::FILE* err) {
  const int64_t B = c.batch * c.grad_accum, T = c.context;
  TrainingData d;
  auto eval_set = [&](const TokenSplit& split) {
    for (const auto& group : split.eval_batches(B, T, c.eval_batches))
      for (size_t i = 0; i < group.size(); i += size_t(c.batch * (T + 1))) {
        const std::span<const int32_t> ids(group.data() + i, std::min(group.size() - i, size_t(c.batch * (T + 1))));
        d.eval.push_back(make_batch(ids, int64_t(ids.size()) / (T + 1), T));
      }
  };
  if (!c.data_ids.empty()) {
    auto blocks = std::make_shared<IdBlocks>(IdBlocks::read(c.data_ids, n_vocab));
    d.batch_ids = [blocks, n = B * (T + 1)](int64_t s) { return blocks->block(s, n); };
    d.summary = {{"source", "data-ids"}, {"path", c.data_ids}, {"ids", blocks->size()}};
    if (!c.eval_ids.empty()) {
      TokenSplit held;
      held.held_out = IdBlocks::read(c.eval_ids, n_vocab).ids();
      if (int64_t(held.held_out.size()) < T + 1)
        throw DataError(c.eval_ids + ": " + std::to_string(held.held_out.size()) +
                        " ids, fewer than one window of context + 1");
      eval_set(held);
      d.summary["eval_ids"] = c.eval_ids;
    }
    return d;
  }
  if (!tok) throw ConfigError("a text corpus needs a tokenizer: --init-weights has none, give --tokenizer FILE");
  const bool built_in = c.corpus.empty();  // neither --corpus nor --data-ids: the default corpus
  const std::string label = built_in ? "built-in " + std::string(kDefaultCorpusName) : c.corpus;
  const std::string text = built_in ? std::string(default_corpus_text()) : read_file(c.corpus);
  if (text.empty()) throw DataError(c.corpus + ": the corpus is empty");
  const auto t0 = Clock::now();
  std::vector<int32_t> tokens = tokenize_corpus(*tok, text);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const size_t n_tokens = tokens.size();
  auto split = std::make_shared<TokenSplit>();
  try {
    *split = TokenSplit::make(std::move(tokens), c.eval_fraction, T);
  } catch (const DataError& e) {
    throw DataError(label + ": " + e.what());
  }
  std::fprintf(err, "corpus %s: %zu bytes -> %zu tokens in %.1fs (train %zu, held out %zu)\n", label.c_str(),
               text.size(), n_tokens, secs, split->train.size(), split->held_out.size());
  d.batch_ids = [split, B, T, seed = c.seed](int64_t s) { return split->sample(s, B, T, seed); };
  eval_set(*split);
  d.summary = {{"source", built_in ? "built-in" : "corpus"},
               {"path", built_in ? std::string(kDefaultCorpusName) : c.corpus},
               {"bytes", text.size()},
               {"tokens", n_tokens},
               {"train_tokens", split->train.size()},
               {"held_out_tokens", split->held_out.size()}};
  return d;
}

// ------------------------------------------------------------------------------------------
// Setup.

namespace {

std::shared_ptr<const gguf::GgufFile> open_input(const std::string& path, const char* flag) {
  if (!fs::exists(path)) throw DataError(std::string(flag) + " " + path + ": no such file");
  return gguf::GgufFile::open(path);
}

// The training loss of the last `step` event of step `step` in the log (NaN: none).
double logged_loss(const std::string& events_path, int64_t step) {
  double loss = NAN;
  std::istringstream in(fs::exists(events_path) ? read_file(events_path) : std::string());
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("kind", "") == "step" && j.value("step", int64_t(-1)) == step && j.contains("loss") &&
        j["loss"].is_number())
      loss = j["loss"];
  }
  return loss;
}

// What rank 0 broadcasts to the others when resuming, besides a checkpoint's step.
constexpr int64_t kSealed = -1;        // it only sealed the run: nothing to train
constexpr int64_t kFromStepZero = -2;  // no checkpoint yet: the run starts again

ConfigError run_dir_exists(const std::string& run_dir) {
  return ConfigError("run directory " + run_dir + " exists: continue it with --resume " + run_dir +
                     ", or pick another --run-id");
}

// True when the last event of the log ends an invocation.
bool ends_with_run_end(const std::string& events_path) {
  std::istringstream in(fs::exists(events_path) ? read_file(events_path) : std::string());
  std::string last;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) last = line;
  const auto j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("kind", "") == "run_end";
}

}  // namespace

const char* to_string(EndReason r) {
  switch (r) {
    case EndReason::Completed:
      return "completed";
    case EndReason::Stopped:
      return "stopped";
    case EndReason::Interrupted:
      return "interrupted";
    case EndReason::Diverged:
      return "diverged";
  }
  return "?";
}

int exit_code(EndReason r) { return r == EndReason::Interrupted ? 130 : r == EndReason::Diverged ? 1 : 0; }

std::string Trainer::events_path() const { return (fs::path(run_dir_) / "events.jsonl").string(); }

int64_t Trainer::n_params() const {
  int64_t n = 0;
  for (const Tensor& p : engine_->params()) n += p.numel();
  return n;
}

Trainer::Trainer(const TrainRunConfig& c, const RunOutput& io, const std::string& resume_dir, const Recipe& recipe)
    : c_(c),
      io_(io),
      group_(io.world ? *io.world : one_process()),
      resuming_(!resume_dir.empty()),
      run_dir_(resume_dir),
      checkpoint_dir_(recipe.checkpoint_dir) {
  validate(c_);
  if (c_.grad_accum % group_.size() != 0)
    throw ConfigError("--grad-accum " + std::to_string(c_.grad_accum) + " does not split over " +
                      std::to_string(group_.size()) + " processes: each trains whole micro-batches, give a multiple (" +
                      std::to_string(group_.size()) + ", " + std::to_string(2 * group_.size()) + ", ...)");
  if (c_.threads > 0)
    kernels::set_num_threads(c_.threads);
  else if (group_.local_size() > 1 && !std::getenv("TOY_THREADS"))  // ranks sharing a host share its cores
    kernels::set_num_threads(std::max(1, int(std::thread::hardware_concurrency()) / group_.local_size()));
  const bool writer = group_.rank() == 0;  // the other ranks of an mpirun job write nothing
  if (resuming_ && writer) {
    lock_ = BundleLock(run_dir_);  // before reading what another process could be writing
    resume_from_checkpoint();
    group_.broadcast(sealed_ ? kSealed : ckpt_ ? ckpt_->step : kFromStepZero);  // what the other ranks load
  } else if (resuming_) {
    follow_resume(group_.broadcast(0));  // after rank 0 has repaired the bundle
  } else if (writer) {
    if (c_.run_id.empty()) c_.run_id = new_run_id(c_.recipe);
    run_dir_ = (fs::path(c_.runs_dir) / c_.run_id).string();
    if (fs::exists(run_dir_)) throw run_dir_exists(run_dir_);  // early: before the data is loaded
  }
  if (sealed_) return;
  load_model_and_data(recipe);
  if (writer) {
    if (!resuming_) open_new_bundle();  // only now: a run that fails to set up leaves no directory
    write_file_atomic((fs::path(run_dir_) / "config.json").string(), to_json(c_).dump(2) + "\n");
  }
  start_ = ckpt_ ? ckpt_->step : 0;
  end_ = c_.stop_after > 0 ? std::min(c_.steps, c_.stop_after) : c_.steps;
  result_ = {.run_dir = run_dir_, .steps_done = start_};
}

// A rank other than 0 resumes from rank 0's checkpoint `step`, or seals or starts again with it.
void Trainer::follow_resume(int64_t step) {
  if (step == kSealed) {
    sealed_ = true;
    return;
  }
  if (step == kFromStepZero) return;
  ckpt_ = Checkpoint{step, checkpoint_model_path(run_dir_, step, checkpoint_dir_),
                     checkpoint_optimizer_path(run_dir_, step, checkpoint_dir_)};
}

// The newest complete checkpoint; a dead run's temporaries and torn last event are removed.
void Trainer::resume_from_checkpoint() {
  remove_bundle_temporaries(run_dir_);
  if (const size_t torn = repair_event_log(events_path()))
    std::fprintf(io_.err, "%s: removed a torn last line (%zu bytes) left by a killed run\n", events_path().c_str(),
                 torn);
  ckpt_ = latest_resumable_checkpoint(run_dir_, checkpoint_dir_);
  if (!ckpt_) {  // killed before its first checkpoint: the same run again, from its config.json
    std::fprintf(io_.err,
                 "%s has no checkpoint yet (%s/step-N.gguf with its step-N.optim.gguf): training it again "
                 "from step 0 with its config.json\n",
                 run_dir_.c_str(), checkpoint_dir_);
    fs::create_directories(fs::path(run_dir_) / checkpoint_dir_);
    return;
  }
  const bool unsealed =
      !fs::exists(fs::path(run_dir_) / checkpoint_dir_ / "final.gguf") || !ends_with_run_end(events_path());
  if (ckpt_->step == c_.steps && unsealed) return seal();
  if (ckpt_->step >= c_.steps)
    throw ConfigError(run_dir_ + " already has " + std::to_string(ckpt_->step) +
                      " steps; pass --steps greater than that to train further");
  if (c_.stop_after > 0 && c_.stop_after <= ckpt_->step)
    throw ConfigError("--stop-after " + std::to_string(c_.stop_after) + " is not after the checkpoint at step " +
                      std::to_string(ckpt_->step));
}

// A run killed after its last checkpoint but before final.gguf and run_end: finish those.
void Trainer::seal() {
  sealed_ = true;
  link_final(run_dir_, ckpt_->model, checkpoint_dir_);
  const double loss = logged_loss(events_path(), ckpt_->step);
  EventLog(events_path())
      .emit("run_end", {{"ended_at", utc_timestamp()},
                        {"reason", to_string(EndReason::Completed)},
                        {"final_step", ckpt_->step},
                        {"final_loss", loss},
                        {"exit_code", exit_code(EndReason::Completed)},
                        {"sealed", true},
                        {"checkpoint", fs::relative(ckpt_->model, run_dir_).string()}});
  std::fprintf(io_.err, "%s had reached step %lld: sealed it (%s/final.gguf, run_end)\n", run_dir_.c_str(),
               (long long)ckpt_->step, checkpoint_dir_);
  result_ = {.run_dir = run_dir_, .steps_done = ckpt_->step, .last_loss = loss, .completed = true};
}

// Tokenizer: --tokenizer, else the one in --init-weights, else bytes (from scratch).
// Model: the checkpoint when resuming, else --init-weights, else the recipe's new model.
void Trainer::load_model_and_data(const Recipe& recipe) {
  std::shared_ptr<const gguf::GgufFile> init_file;
  if (!c_.init_weights.empty()) init_file = open_input(c_.init_weights, "--init-weights");
  if (!c_.tokenizer.empty())
    tok_ = Tokenizer::from_gguf(*open_input(c_.tokenizer, "--tokenizer"));
  else if (init_file && init_file->has("tokenizer.ggml.tokens"))
    tok_ = Tokenizer::from_gguf(*init_file);
  else if (!init_file)
    tok_ = Tokenizer::byte_level();
  if (!tok_)
    std::fprintf(io_.err, "warning: no tokenizer (--init-weights has none): checkpoints will have no vocabulary\n");
  model_name_ = "toy-" + c_.recipe;
  if (const auto base = init_file ? init_file->opt_string("general.name") : std::nullopt; base && !base->empty()) {
    model_name_ = *base;
    lineage_ = {{"general.base_model.count", gguf::Value::of_u32(1)},
                {"general.base_model.0.name", gguf::Value::of_string(*base)}};
  }

  if (ckpt_)
    model_ = recipe.resume_model ? recipe.resume_model(*ckpt_) : load_model(gguf::GgufFile::open(ckpt_->model));
  else if (init_file)
    model_ = load_model(init_file);
  else
    model_ = recipe.new_model(c_, tok_->n_vocab());
  init_file.reset();
  if (const Architecture* a = find_architecture(model_->config().arch); a && !a->untrainable.empty())
    throw ConfigError(model_->config().arch + " models cannot be trained yet: " + a->untrainable);
  const int64_t V = model_->config().n_vocab;
  if (tok_ && tok_->n_vocab() != V)
    throw DataError("the tokenizer has " + std::to_string(tok_->n_vocab()) + " tokens but the model's vocabulary has " +
                    std::to_string(V));

  data_ = recipe.data(c_, tok_.get(), V, io_.err);

  TrainConfig tc{.schedule = {.kind = c_.schedule == "constant" ? ScheduleKind::Constant : ScheduleKind::Cosine,
                              .lr = c_.lr,
                              .warmup = c_.warmup,
                              .total = c_.steps,
                              .min_lr_ratio = c_.min_lr_ratio},
                 .adamw = {.beta1 = c_.beta1, .beta2 = c_.beta2, .eps = c_.eps, .weight_decay = c_.weight_decay},
                 .clip = c_.clip,
                 .grad_accum = c_.grad_accum};
  engine_ = std::make_unique<TrainEngine>(*model_, tc, recipe.trainable(*model_));
  engine_->distribute(group_);
  if (ckpt_) {
    engine_->optimizer().load(*gguf::GgufFile::open(ckpt_->optimizer));
    if (engine_->steps() != ckpt_->step)
      throw DataError(ckpt_->optimizer + ": optimizer state has " + std::to_string(engine_->steps()) +
                      " steps, the checkpoint name says " + std::to_string(ckpt_->step));
  }
}

// Creates and locks `<runs_dir>/<run_id>` (create_directory is atomic: of two runs given the
// same --run-id at once, one gets the directory and the other a usage error).
void Trainer::open_new_bundle() {
  fs::create_directories(c_.runs_dir);
  if (!fs::create_directory(run_dir_)) throw run_dir_exists(run_dir_);
  lock_ = BundleLock(run_dir_);
  fs::create_directories(fs::path(run_dir_) / "weights");
}

// ------------------------------------------------------------------------------------------
// The loop.

void Trainer::report(const EvalReport& r) {
  result_.last_eval_loss = r.loss;
  for (auto& o : observers_) o->on_eval(*this, r);
}

void Trainer::report(const CheckpointReport& r) {
  result_.steps_done = r.files.step;
  for (auto& o : observers_) o->on_checkpoint(*this, r);
}

void Trainer::finish(EndReport e) {
  e.eval_loss = result_.last_eval_loss;
  for (auto& o : observers_) o->on_end(*this, e);
  result_.completed = e.reason == EndReason::Completed;
  result_.interrupted = e.reason == EndReason::Interrupted;
}

RunResult Trainer::run() {
  if (sealed_) return result_;
  for (auto& o : observers_) o->on_start(*this);
  const auto t_start = Clock::now();
  double last_loss = NAN;
  bool interrupted = false;
  for (int64_t s = start_;; ++s) {
    if (group_.any(io_.stop && io_.stop->load()) && s < end_) end_ = s, interrupted = true;  // all ranks, same step
    for (auto& o : observers_) o->at(*this, s);
    if (s >= end_) break;

    const auto t0 = Clock::now();
    const StepResult r = engine_->step(make_batch(data_.batch_ids(s), c_.batch * c_.grad_accum, c_.context));
    const StepReport step{
        .step = s + 1, .result = r, .seconds = std::chrono::duration<double>(Clock::now() - t0).count()};
    for (auto& o : observers_) o->on_step(*this, step);
    if (!std::isfinite(r.loss)) {
      finish({.reason = EndReason::Diverged, .step = s + 1, .loss = r.loss, .steps_run = s - start_});
      throw std::runtime_error("the loss is " + std::to_string(r.loss) + " at step " + std::to_string(s + 1) +
                               " (try a lower --lr)");
    }
    last_loss = r.loss;
  }
  result_.last_loss = last_loss;
  const EndReason why = interrupted        ? EndReason::Interrupted
                        : end_ == c_.steps ? EndReason::Completed
                                           : EndReason::Stopped;
  finish({.reason = why,
          .step = end_,
          .loss = last_loss,
          .seconds = std::chrono::duration<double>(Clock::now() - t_start).count(),
          .steps_run = end_ - start_});
  return result_;
}

}  // namespace toy::recipes
