// engines/run_bundle.h — the directory a training run writes, and its loss plot.
//
//   runs/<id>/config.json           the exact settings (what --resume reads back)
//   runs/<id>/events.jsonl          the event log (events.h, docs/events.md)
//   runs/<id>/weights/step-N.gguf   model checkpoints after N updates (standard GGUF)
//   runs/<id>/weights/step-N.optim.gguf   the optimizer state beside the latest one
//   runs/<id>/weights/final.gguf    the last checkpoint of a completed run (a hard link)
//   runs/<id>/loss.svg              training and eval loss curves
//   runs/<id>/.lock                 flock()ed by the process training the run
// Every file is written to a temporary name and renamed into place, so a killed run never
// leaves a torn file, and the previous checkpoint survives a crash during the next one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace toy {

// "20261130-034501-from-scratch": UTC date and time, then the recipe name.
std::string new_run_id(std::string_view recipe);

// Writes `text` to `path` by write_output_file's rules (io/output_file.h): a temporary
// `<path>.tmp.<pid>.<n>` renamed into place. Throws std::runtime_error.
void write_file_atomic(const std::string& path, std::string_view text);

// The exclusive lock of a run bundle: flock() on `<run_dir>/.lock`, held until destruction (the
// kernel releases it when the process dies, so a killed run leaves no stale lock). Throws
// DataError when another process holds it, std::runtime_error when the file cannot be opened.
class BundleLock {
 public:
  BundleLock() = default;
  explicit BundleLock(const std::string& run_dir);
  ~BundleLock();
  BundleLock(BundleLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  BundleLock& operator=(BundleLock&& o) noexcept;
  BundleLock(const BundleLock&) = delete;
  BundleLock& operator=(const BundleLock&) = delete;

 private:
  int fd_ = -1;
};

// True for a temporary file toy writes in a bundle: `<file>.tmp.<pid>` (optionally followed by a
// suffix of letters, digits, '.', '-', '_') where <file> is config.json or loss.svg in the run
// directory, or step-N.gguf / step-N.optim.gguf in a checkpoint directory (weights/, adapters/).
bool is_bundle_temporary(std::string_view name, bool in_weights);
// Removes the temporaries a killed run left in `run_dir` and its checkpoint directories (and
// nothing else). Call it only with the bundle locked, so that no live writer owns them.
void remove_bundle_temporaries(const std::string& run_dir);

// Checkpoints live in one directory of the bundle: weights/ (whole models), or adapters/ (a LoRA
// run's adapters), named as below.
constexpr const char* kWeightsDir = "weights";
constexpr const char* kAdaptersDir = "adapters";
struct Checkpoint {
  int64_t step = 0;       // updates done
  std::string model;      // weights/step-N.gguf (or adapters/step-N.gguf)
  std::string optimizer;  // weights/step-N.optim.gguf (may not exist for old checkpoints)
};
std::string checkpoint_model_path(const std::string& run_dir, int64_t step, const char* dir = kWeightsDir);
std::string checkpoint_optimizer_path(const std::string& run_dir, int64_t step, const char* dir = kWeightsDir);
// The newest checkpoint in `run_dir/dir` that has both files, if any.
std::optional<Checkpoint> latest_resumable_checkpoint(const std::string& run_dir, const char* dir = kWeightsDir);
// `run_dir/dir/final.gguf` = the model file `model` (a hard link, else a copy).
void link_final(const std::string& run_dir, const std::string& model, const char* dir = kWeightsDir);

struct CurvePoint {
  double step = 0, loss = 0;
};
// What a chart's y axis and its two curves are called (loss by default; a classifier's accuracy).
struct CurveLabels {
  std::string_view y_axis = "loss (cross-entropy, nats/token)";
  std::string_view train = "train loss";
  std::string_view eval = "eval loss (held out)";
};
// A self-contained SVG line chart: the per-step training loss (thin) with its moving average,
// eval losses as a line with markers, axes with ticks, axis labels, a title and a legend.
std::string loss_svg(std::span<const CurvePoint> train, std::span<const CurvePoint> eval, std::string_view title,
                     const CurveLabels& labels = {});
// A self-contained SVG of a classifier's confusion matrix: confusion[t·K + p] images of true class
// t predicted as p, one cell each (shaded by the share of its row), rows and columns named by
// `class_names` (the class number where it has none), each row's accuracy at its end.
std::string confusion_svg(std::span<const int64_t> confusion, const std::vector<std::string>& class_names,
                          std::string_view title);

// The curves of one run, for a chart of several (`toy runs compare`).
struct LossCurves {
  std::string name;  // legend prefix, e.g. the run id ("" for a single run)
  std::vector<CurvePoint> train, eval;
};
// The same chart with every run's curves on common axes, each run in its own colours (eval
// lines dashed when there are several runs).
std::string loss_svg(std::span<const LossCurves> runs, std::string_view title, const CurveLabels& labels = {});

// What a bundle's events.jsonl says about a run (docs/events.md): every invocation's events, a
// step logged twice (after a kill and --resume) counted once, its later record winning.
struct RunLog {
  std::string run_id;                   // of the first run_start (else the directory name)
  std::string model;                    // "llama, 1003648 parameters" ("" when unknown)
  std::vector<CurvePoint> train, eval;  // by step
  int64_t tokens = 0;                   // training tokens of the last step (its `tokens`)
  double train_seconds = 0;             // Σ the steps' wall_us, in seconds
  std::string end_reason;               // of the last run_end; "" when the last invocation wrote none
};
// Reads `<run_dir>/events.jsonl`. Lines that are not JSON objects (a torn last line) are
// skipped. Throws DataError when run_dir is not a directory or has no events.jsonl.
RunLog read_run_log(const std::string& run_dir);

}  // namespace toy
