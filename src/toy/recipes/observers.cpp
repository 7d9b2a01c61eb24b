// recipes/observers.cpp — stdout and the progress bar, events.jsonl, loss.svg, evaluation and
// checkpoints, as observers of the training loop.
#include "toy/recipes/observers.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "toy/engines/events.h"
#include "toy/engines/train_data.h"
#include "toy/io/file_type.h"
#include "toy/io/progress.h"
#include "toy/kernels/kernels.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

// Mean loss over the eval batches, weighted by their sizes.
double evaluate(const TrainEngine& e, const std::vector<Batch>& batches) {
  double total = 0, rows = 0;
  for (const Batch& b : batches) {
    const double n = double(b.tokens.size(0));
    total += e.evaluate(b) * n;
    rows += n;
  }
  return total / rows;
}

// Writes checkpoint `step` of a run: the optimizer state first, then the model (a checkpoint
// counts for --resume once both exist); drops the optimizer state of the previous checkpoint;
// links weights/final.gguf to the last one.
// When the model file does not hold the exact trained tensors (a --save-dtype other than F32, or
// tensors that are not the model's own: warm-start's lens, folded into token_embd), the optimizer
// state carries them, so --resume continues bit for bit.
Checkpoint write_checkpoint(Trainer& t, int64_t step, int64_t prev_step, bool final) {
  const TrainRunConfig& c = t.config();
  const std::string& run_dir = t.run_dir();
  const Checkpoint k{step, checkpoint_model_path(run_dir, step), checkpoint_optimizer_path(run_dir, step)};
  std::set<std::string> in_model;
  t.engine().model().for_each_param([&](Tensor& p) { in_model.insert(p.name()); });
  bool exact = gguf::file_type(c.save_dtype)->base == DType::F32;
  for (const Tensor& p : t.engine().params()) exact = exact && in_model.count(p.name());
  write_optimizer_gguf(
      t.engine().optimizer(), k.optimizer,
      {{"toy.train.step", gguf::Value::of_u64(uint64_t(step))}, {"toy.train.seed", gguf::Value::of_u64(c.seed)}},
      /*weights=*/!exact);
  write_model_gguf(t.engine().model(), t.tokenizer(), k.model, t.model_name(),
                   {.file_type = c.save_dtype, .metadata = t.lineage()});
  std::error_code ec;
  if (prev_step > 0 && prev_step != step) fs::remove(checkpoint_optimizer_path(run_dir, prev_step), ec);
  if (final) link_final(run_dir, k.model);
  return k;
}

// ------------------------------------------------------------------------------------------
// The observers.

class Console : public Observer {
 public:
  void on_start(Trainer& t) override {
    const RunOutput& io = t.io();
    bar_ = std::make_unique<Progress>("train", t.end(), Progress::Unit::Count, "steps", io.progress, io.err);
    shares_terminal_ = ::isatty(fileno(io.out)) && ::isatty(fileno(io.err));
    bar_->starting_at(t.start());
    const TrainRunConfig& c = t.config();
    const ModelConfig& mc = t.engine().model().config();
    std::fprintf(io.err,
                 "%s %s: %lld parameters (d_model %lld, %lld layers, %lld/%lld heads, d_ff %lld, vocab %lld), B %lld x "
                 "T %lld%s, steps %lld..%lld\n",
                 t.resuming() ? "resuming" : "run", t.run_dir().c_str(), (long long)t.n_params(), (long long)mc.d_model,
                 (long long)mc.n_layer, (long long)mc.n_head, (long long)mc.n_kv_head, (long long)mc.d_ff,
                 (long long)mc.n_vocab, (long long)c.batch, (long long)c.context,
                 c.grad_accum > 1 ? (" x " + std::to_string(c.grad_accum) + " accumulated").c_str() : "",
                 (long long)t.start(), (long long)t.end());
    t_start_ = Clock::now();
  }
  // The `step N` line at multiples of --log-every and at the end of the invocation (where a
  // stop request, seen only before the next step, ends it: at()/on_end() print what is held back).
  void at(Trainer& t, int64_t s) override {
    if (s >= t.end()) print_held_step(t);
  }
  void on_step(Trainer& t, const StepReport& r) override {
    held_.reset();
    if (r.step % t.config().log_every == 0 || r.step == t.end())
      print_line(t, "step %lld: loss=%.9g\n", r.step, r.result.loss);
    else
      held_ = r;
    const int64_t s = r.step, step_tokens = tokens_per_step(t.config());
    const double elapsed = std::chrono::duration<double>(Clock::now() - t_start_).count();
    const double done = double(s - t.start());
    char extra[64];
    std::snprintf(extra, sizeof extra, "loss %.4f  %.1fk tok/s", r.result.loss,
                  done * double(step_tokens) / elapsed / 1000);
    bar_->update(s, extra);
  }
  void on_eval(Trainer& t, const EvalReport& r) override {
    print_line(t, "eval %lld: val_loss=%.9g\n", r.step, r.loss);
  }
  void on_end(Trainer& t, const EndReport& e) override {
    print_held_step(t);  // a diverged step not on a --log-every multiple
    bar_->finish();
    if (e.reason == EndReason::Diverged) return;  // the caller reports the exception
    const int64_t tokens = e.steps_run * tokens_per_step(t.config());
    std::fprintf(t.io().err, "%s %lld steps (%lld tokens) in %s, %.0f tok/s; last loss %.4f%s; bundle %s\n",
                 e.reason == EndReason::Completed     ? "trained"
                 : e.reason == EndReason::Interrupted ? "interrupted after"
                                                      : "stopped after",
                 (long long)e.steps_run, (long long)tokens, Progress::duration(e.seconds).c_str(),
                 double(tokens) / e.seconds, e.loss,
                 e.eval_loss >= 0 ? (", eval " + std::to_string(e.eval_loss)).c_str() : "", t.run_dir().c_str());
    if (const ProcessGroup& w = t.world(); w.size() > 1 && e.steps_run > 0) {  // docs/distributed.md: the volume
      std::fprintf(t.io().err, "%d processes: rank 0 sent %.3f MB a step to the others (%lld bytes in %lld steps)\n",
                   w.size(), double(w.bytes_sent()) / double(e.steps_run) / 1e6, (long long)w.bytes_sent(),
                   (long long)e.steps_run);
      if (const ProcessGroup::SumStats& s = w.sum_stats(); s.sums > 0)  // and the overlap
        std::fprintf(t.io().err,
                     "gradient exchange: %lld of %lld buckets in %lld steps started during the backward pass; "
                     "rank 0 waited %.2f ms a step for the rest after it\n",
                     (long long)s.started_early, (long long)s.buckets, (long long)s.sums,
                     s.wait_seconds / double(s.sums) * 1e3);
    }
    if (e.reason == EndReason::Interrupted && e.step == 0)
      std::fprintf(t.io().err, "no step finished: nothing to resume (%s has no checkpoint)\n", t.run_dir().c_str());
    else if (e.reason == EndReason::Interrupted)
      std::fprintf(t.io().err, "checkpoint %s/step-%lld.gguf; continue with: toy train --resume %s\n",
                   t.checkpoint_dir(), (long long)e.step, t.run_dir().c_str());
  }

 private:
  void print_line(Trainer& t, const char* fmt, int64_t s, double v) {
    if (shares_terminal_) bar_->clear();
    std::fprintf(t.io().out, fmt, (long long)s, v);
    std::fflush(t.io().out);
  }
  void print_held_step(Trainer& t) {
    if (held_) print_line(t, "step %lld: loss=%.9g\n", held_->step, held_->result.loss);
    held_.reset();
  }
  std::unique_ptr<Progress> bar_;
  bool shares_terminal_ = false;
  Clock::time_point t_start_{};
  std::optional<StepReport> held_;  // the last step, when its line was not printed
};

// The seeds' toy/v1 names first (docs/events.md), then toy's additions.
class EventFile : public Observer {
 public:
  void on_start(Trainer& t) override {
    log_ = EventLog(t.events_path());
    const TrainRunConfig& c = t.config();
    const ModelConfig& mc = t.engine().model().config();
    ordered_json e = {{"schema", kEventSchema},
                      {"started_at", utc_timestamp()},
                      {"run_id", fs::path(t.run_dir()).filename().string()},
                      {"phase", c.recipe}};
    e.update(provenance());
    e["world_size"] = t.world().size();  // processes training together (mpirun -np)
    e["hosts"] = t.world().hosts();      // their host names, by rank
    e["model"] = {{"arch", mc.arch},       {"name", t.model_name()}, {"vocab", mc.n_vocab},
                  {"d_model", mc.d_model}, {"n_layers", mc.n_layer}, {"n_heads", mc.n_head},
                  {"n_kv", mc.n_kv_head},  {"d_head", mc.d_head},    {"d_ff", mc.d_ff}};
    e["config"] = to_json(c);
    e["recipe"] = c.recipe;
    e["toy_version"] = TOY_VERSION;
    e["resumed_from_step"] = t.resuming() ? ordered_json(t.start()) : ordered_json(nullptr);
    e["threads"] = kernels::num_threads();
    e["parameters"] = t.n_params();
    e["data"] = t.data().summary;
    log_.emit("run_start", e);
  }
  void on_step(Trainer& t, const StepReport& r) override {
    if (!std::isfinite(r.result.loss)) return;  // run_end says "diverged"
    const int64_t step_tokens = tokens_per_step(t.config());
    ordered_json e = {{"phase", t.config().recipe},
                      {"step", r.step},
                      {"loss", r.result.loss},
                      {"lr", r.result.lr},
                      {"tokens", r.step * step_tokens},
                      {"wall_us", micros(r.seconds)},
                      {"grad_norm", r.result.grad_norm},
                      {"clip_scale", r.result.clip_scale},
                      {"tokens_per_s", double(step_tokens) / r.seconds}};
    if (t.world().size() > 1) e["exchange_wait_us"] = micros(r.result.exchange_wait);
    log_.emit("step", e);
  }
  void on_eval(Trainer&, const EvalReport& r) override {
    log_.emit("eval", {{"step", r.step}, {"loss", r.loss}, {"batches", r.batches}, {"wall_us", micros(r.seconds)}});
  }
  void on_checkpoint(Trainer& t, const CheckpointReport& r) override {
    log_.emit("checkpoint", {{"step", r.files.step},
                             {"path", fs::relative(r.files.model, t.run_dir()).string()},
                             {"optimizer", fs::relative(r.files.optimizer, t.run_dir()).string()},
                             {"bytes", fs::file_size(r.files.model)}});
  }
  void on_end(Trainer& t, const EndReport& e) override {
    ordered_json end = {{"ended_at", utc_timestamp()},
                        {"reason", to_string(e.reason)},
                        {"final_step", e.step},
                        {"final_loss", e.loss},  // NaN (no step run, diverged) is written as null
                        {"exit_code", exit_code(e.reason)}};
    if (e.reason != EndReason::Diverged) {
      const int64_t tokens = e.steps_run * tokens_per_step(t.config());
      end["eval_loss"] = e.eval_loss >= 0 ? ordered_json(e.eval_loss) : ordered_json(nullptr);
      end["wall_us"] = micros(e.seconds);
      end["tokens_per_s"] = double(tokens) / e.seconds;
      end["checkpoint"] =
          fs::relative(checkpoint_model_path(t.run_dir(), e.step, t.checkpoint_dir()), t.run_dir()).string();
    }
    if (const ProcessGroup& w = t.world(); w.size() > 1) {  // rank 0's side of it (docs/distributed.md)
      const ProcessGroup::SumStats& s = w.sum_stats();
      end["gradient_exchange"] = {{"bytes_sent", w.bytes_sent()},
                                  {"sums", s.sums},
                                  {"buckets", s.buckets},
                                  {"buckets_started_in_backward", s.started_early},
                                  {"wait_us", micros(s.wait_seconds)}};
    }
    log_.emit("run_end", end);
  }

 private:
  static int64_t micros(double seconds) { return std::llround(seconds * 1e6); }
  EventLog log_;
};

class LossPlot : public Observer {
 public:
  void on_start(Trainer& t) override {
    if (t.resuming() && fs::exists(t.events_path())) {  // the curves up to the checkpoint resumed from
      const RunLog log = read_run_log(t.run_dir());
      for (const CurvePoint& c : log.train)
        if (c.step <= double(t.start())) train_.push_back(c);
      for (const CurvePoint& c : log.eval)
        if (c.step <= double(t.start())) eval_.push_back(c);
    }
    title_ = fs::path(t.run_dir()).filename().string() + ": " + std::to_string(t.n_params()) + " parameters";
  }
  void on_step(Trainer&, const StepReport& r) override { train_.push_back({double(r.step), r.result.loss}); }
  void on_eval(Trainer& t, const EvalReport& r) override {
    eval_.push_back({double(r.step), r.loss});
    write(t);
  }
  void on_checkpoint(Trainer& t, const CheckpointReport&) override { write(t); }
  void on_end(Trainer& t, const EndReport& e) override {
    if (e.reason != EndReason::Diverged) write(t);
  }

 private:
  void write(Trainer& t) {
    write_file_atomic((fs::path(t.run_dir()) / "loss.svg").string(), loss_svg(train_, eval_, title_));
  }
  std::vector<CurvePoint> train_, eval_;
  std::string title_;
};

// At s = steps and every multiple of eval_every, except the step a resumed run starts at (the
// run before it evaluated there).
class Evaluator : public Observer {
 public:
  void at(Trainer& t, int64_t s) override {
    const TrainRunConfig& c = t.config();
    if (t.data().eval.empty() || (t.resuming() && s == t.start())) return;
    if (s != c.steps && (c.eval_every == 0 || s % c.eval_every != 0)) return;
    const auto t0 = Clock::now();
    const double loss = evaluate(t.engine(), t.data().eval);
    t.report(EvalReport{.step = s,
                        .loss = loss,
                        .batches = t.data().eval.size(),
                        .seconds = std::chrono::duration<double>(Clock::now() - t0).count()});
  }
};

// At the end and every multiple of checkpoint_every after the first step; final.gguf at `steps`.
class Checkpointer : public Observer {
 public:
  void on_start(Trainer& t) override { prev_ = t.start(); }
  void at(Trainer& t, int64_t s) override {
    const TrainRunConfig& c = t.config();
    if (s <= t.start() || (s != t.end() && (c.checkpoint_every == 0 || s % c.checkpoint_every != 0))) return;
    const Checkpoint saved = write_checkpoint(t, s, prev_, s == c.steps);
    prev_ = s;
    t.report(CheckpointReport{saved});
  }

 private:
  int64_t prev_ = 0;
};

}  // namespace

std::unique_ptr<Observer> console_observer() { return std::make_unique<Console>(); }
std::unique_ptr<Observer> event_file_observer() { return std::make_unique<EventFile>(); }
std::unique_ptr<Observer> loss_plot_observer() { return std::make_unique<LossPlot>(); }
std::unique_ptr<Observer> evaluator() { return std::make_unique<Evaluator>(); }
std::unique_ptr<Observer> checkpointer() { return std::make_unique<Checkpointer>(); }

void add_standard_observers(Trainer& t) {
  t.add_observer(console_observer());
  t.add_observer(event_file_observer());
  t.add_observer(loss_plot_observer());
  t.add_observer(evaluator());
  t.add_observer(checkpointer());
}

}  // namespace toy::recipes
