// recipes/vit.cpp — the ViT recipe: settings, data, evaluation and the training loop.
#include "toy/recipes/vit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>

#include "toy/engines/events.h"
#include "toy/engines/optimizer.h"
#include "toy/engines/train_data.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// Settings.

// One table of every setting: its JSON key (= the CLI flag without dashes) and its field.
template <class F>
void for_each_setting(VitRunConfig& c, F&& f) {
  f("recipe", c.recipe);
  f("patch", c.patch), f("d-model", c.d_model), f("layers", c.n_layer), f("heads", c.n_head), f("ff", c.d_ff);
  f("data", c.data), f("train-images", c.train_images), f("test-images", c.test_images);
  f("epochs", c.epochs), f("steps", c.steps), f("batch", c.batch), f("lr", c.lr), f("schedule", c.schedule);
  f("warmup", c.warmup), f("min-lr-ratio", c.min_lr_ratio), f("beta1", c.beta1), f("beta2", c.beta2), f("eps", c.eps);
  f("weight-decay", c.weight_decay), f("clip", c.clip), f("flip", c.flip), f("shift", c.shift);
  f("seed", c.seed);
  f("eval-every", c.eval_every), f("checkpoint-every", c.checkpoint_every), f("stop-after", c.stop_after);
  f("log-every", c.log_every), f("threads", c.threads), f("runs-dir", c.runs_dir), f("run-id", c.run_id);
}

ordered_json to_json(const VitRunConfig& c0) {
  VitRunConfig c = c0;
  ordered_json j;
  for_each_setting(c, [&](const char* key, auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, float>)
      j[key] = json_number(v);
    else
      j[key] = v;
  });
  return j;
}

VitRunConfig vit_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("expected a JSON object of settings");
  VitRunConfig c;
  for_each_setting(c, [&](const char* key, auto& v) {
    if (j.contains(key)) read_setting(j.at(key), key, v);
  });
  return c;
}

VitRunConfig load_vit_run_config(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "config.json").string();
  if (!fs::exists(path)) throw DataError(run_dir + ": not a run directory (no config.json)");
  try {
    VitRunConfig c = vit_config_from_json(nlohmann::json::parse(read_file(path)));
    if (c.recipe != "vit") throw ConfigError("\"recipe\" is '" + c.recipe + "', not vit");
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": " + e.what());
  } catch (const ConfigError& e) {
    throw DataError(path + ": " + e.what());
  }
}

VitHparams vit_hparams(const VitRunConfig& c) {
  return {.image_size = 28,
          .patch_size = c.patch,
          .n_channel = 1,
          .d_model = c.d_model,
          .n_layer = c.n_layer,
          .n_head = c.n_head,
          .d_ff = c.d_ff,
          .n_class = 10,
          .eps = 1e-5f};
}

void validate(const VitRunConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(what);
  };
  constexpr int64_t kBig = int64_t(1) << 16;
  need(c.patch >= 1 && 28 % c.patch == 0, "--patch must divide the image side 28, got " + std::to_string(c.patch));
  need(c.d_model >= 1 && c.d_model <= kBig, "--d-model must be in [1, 65536], got " + std::to_string(c.d_model));
  need(c.n_layer >= 1 && c.n_layer <= 256, "--layers must be in [1, 256], got " + std::to_string(c.n_layer));
  need(c.n_head >= 1 && c.d_model % c.n_head == 0, "--heads must divide --d-model, got " + std::to_string(c.n_head));
  need(c.d_ff >= 1 && c.d_ff <= kBig, "--ff must be in [1, 65536], got " + std::to_string(c.d_ff));
  need(c.train_images >= 0 && c.test_images >= 0, "--train-images and --test-images must be ≥ 0");
  need(c.epochs >= 1 || c.steps >= 1, "give --epochs ≥ 1 or --steps ≥ 1");
  need(c.steps >= 0 && c.epochs >= 0, "--steps and --epochs must be ≥ 0");
  need(c.batch >= 1 && c.batch <= kBig, "--batch must be in [1, 65536], got " + std::to_string(c.batch));
  need(c.lr > 0 && std::isfinite(c.lr), "--lr must be positive");
  need(c.schedule == "cosine" || c.schedule == "constant", "--schedule must be cosine or constant");
  need(c.warmup >= 0, "--warmup must be ≥ 0");
  need(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1]");
  need(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1, "--beta1 and --beta2 must be in [0, 1)");
  need(c.eps > 0 && std::isfinite(c.eps), "--eps must be positive");
  need(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "--weight-decay must be ≥ 0");
  need(c.clip >= 0 && std::isfinite(c.clip), "--clip must be ≥ 0 (0 disables clipping)");
  need(c.flip >= 0 && c.flip <= 1, "--flip must be a probability in [0, 1]");
  need(c.shift >= 0 && c.shift < 28, "--shift must be in [0, 27] pixels");
  need(c.eval_every >= 0 && c.checkpoint_every >= 0 && c.stop_after >= 0 && c.log_every >= 0,
       "--eval-every, --checkpoint-every, --stop-after and --log-every must be ≥ 0");
  need(c.threads >= 0 && c.threads <= 1024, "--threads must be in [0, 1024]");
  need(c.run_id.empty() || is_single_path_component(c.run_id),
       "--run-id must be one directory name inside --runs-dir (no '/', not '.' or '..')");
}

// ------------------------------------------------------------------------------------------
// Data and evaluation.

Tensor image_batch(const ImageSet& s, const std::vector<int64_t>& items) {
  const int64_t n = int64_t(items.size()), P = s.rows * s.cols;
  Tensor x = Tensor::empty({n, 1, s.rows, s.cols});
  float* o = x.data_mut();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < P; ++p) o[i * P + p] = float(s.pixels[size_t(items[size_t(i)] * P + p)]) / 255.0f;
  return x;
}

Tensor augmented_batch(const ImageSet& set, const std::vector<int64_t>& items, float flip, int64_t shift, uint64_t seed,
                       int64_t step) {
  Tensor x = image_batch(set, items);  // [n, 1, H, W]
  if (flip == 0 && shift == 0) return x;
  std::mt19937_64 rng(seed * 0xD1B54A32D192ED03ull + uint64_t(step) * 0x9E3779B97F4A7C15ull + 7);
  const int64_t H = set.rows, W = set.cols;
  std::vector<float> image(size_t(H * W));
  for (size_t i = 0; i < items.size(); ++i) {
    const bool mirror = double(rng() >> 11) * 0x1.0p-53 < double(flip);
    const int64_t dy = int64_t(rng() % uint64_t(2 * shift + 1)) - shift;
    const int64_t dx = int64_t(rng() % uint64_t(2 * shift + 1)) - shift;
    float* o = x.data_mut() + int64_t(i) * H * W;
    std::copy(o, o + H * W, image.begin());
    for (int64_t y = 0; y < H; ++y)
      for (int64_t c = 0; c < W; ++c) {
        const int64_t sy = y - dy, sc0 = c - dx, sc = mirror ? W - 1 - sc0 : sc0;  // the source pixel
        o[y * W + c] = sy >= 0 && sy < H && sc0 >= 0 && sc0 < W ? image[size_t(sy * W + sc)] : 0.0f;
      }
  }
  return x;
}

namespace {

Tensor label_batch(const ImageSet& s, const std::vector<int64_t>& items) {
  std::vector<int32_t> y;
  for (int64_t i : items) y.push_back(s.labels[size_t(i)]);
  return Tensor::from_ids({int64_t(y.size())}, y);
}

int64_t argmax_row(const float* row, int64_t K) { return std::max_element(row, row + K) - row; }

}  // namespace

VitEval evaluate_vit(const VitModel& m, const ImageSet& s, int64_t n, int64_t batch) {
  NoGrad no_grad;
  const int64_t K = m.hparams().n_class;
  VitEval e;
  e.n = n > 0 ? std::min(n, s.n) : s.n;
  e.confusion.assign(size_t(K * K), 0);
  double loss_sum = 0;
  int64_t right = 0;
  for (int64_t i0 = 0; i0 < e.n; i0 += batch) {
    std::vector<int64_t> items;
    for (int64_t i = i0; i < std::min(e.n, i0 + batch); ++i) items.push_back(i);
    const Tensor logits = m.forward(image_batch(s, items));  // [b, K]
    loss_sum += cross_entropy(logits, label_batch(s, items)).item() * double(items.size());
    for (size_t r = 0; r < items.size(); ++r) {
      const int64_t want = s.labels[size_t(items[r])], got = argmax_row(logits.data() + int64_t(r) * K, K);
      ++e.confusion[size_t(want * K + got)];
      right += want == got;
    }
  }
  e.loss = loss_sum / double(e.n);
  e.accuracy = double(right) / double(e.n);
  return e;
}

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::string confusion_text(const VitEval& e, const std::vector<std::string>& names) {
  const size_t K = size_t(std::lround(std::sqrt(double(e.confusion.size()))));
  auto name = [&](size_t k) { return k < names.size() ? names[k] : std::to_string(k); };
  std::ostringstream out;
  out << "confusion matrix (rows: true class, columns: predicted)\n";
  char cell[64];
  out << std::string(14, ' ');
  for (size_t k = 0; k < K; ++k) std::snprintf(cell, sizeof cell, "%6zu", k), out << cell;
  out << "   accuracy\n";
  for (size_t t = 0; t < K; ++t) {
    std::snprintf(cell, sizeof cell, "%2zu %-11.11s", t, name(t).c_str());  // 14 wide
    out << cell;
    int64_t row = 0;
    for (size_t p = 0; p < K; ++p) {
      row += e.confusion[t * K + p];
      std::snprintf(cell, sizeof cell, "%6lld", (long long)e.confusion[t * K + p]);
      out << cell;
    }
    std::snprintf(cell, sizeof cell, "   %5.1f%%\n", row ? 100.0 * double(e.confusion[t * K + t]) / double(row) : 0.0);
    out << cell;
  }
  return out.str();
}

// ------------------------------------------------------------------------------------------
// The run.

namespace {

// The order of epoch e: a Fisher–Yates shuffle of 0 … n − 1 from (seed, e) alone.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t e) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(e) + 1);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[size_t(rng() % uint64_t(i + 1))]);
  return order;
}

ImageSet first_images(ImageSet s, int64_t n) {
  if (n <= 0 || n >= s.n) return s;
  const int64_t P = s.rows * s.cols;
  s.pixels.resize(size_t(n * P));
  s.labels.resize(size_t(n));
  s.n = n;
  return s;
}

int64_t micros(double seconds) { return std::llround(seconds * 1e6); }

class VitRun {
 public:
  VitRun(VitRunConfig c, const RunOutput& io, const std::string& resume_dir)
      : c_(std::move(c)), io_(io), run_dir_(resume_dir) {
    validate(c_);
    if (c_.threads > 0) kernels::set_num_threads(c_.threads);
    std::optional<Checkpoint> ckpt;
    const bool resuming = !run_dir_.empty();
    if (resuming) {
      lock_ = BundleLock(run_dir_);
      remove_bundle_temporaries(run_dir_);
      repair_event_log(events_path());
      ckpt = latest_resumable_checkpoint(run_dir_);
      if (!ckpt)  // killed before its first checkpoint: the same run again, from its config.json
        std::fprintf(io_.err, "%s has no checkpoint yet: training it again from step 0 with its config.json\n",
                     run_dir_.c_str());
    } else {
      if (c_.run_id.empty()) c_.run_id = new_run_id(c_.recipe);
      run_dir_ = (fs::path(c_.runs_dir) / c_.run_id).string();
      if (fs::exists(run_dir_))
        throw ConfigError("run directory " + run_dir_ + " exists: continue it with --resume, or pick another --run-id");
    }
    train_ = first_images(read_image_set(c_.data, "train", 10), c_.train_images);
    test_ = first_images(read_image_set(c_.data, "t10k", 10), c_.test_images);
    if (train_.rows != 28 || train_.cols != 28 || test_.rows != 28 || test_.cols != 28)
      throw DataError(c_.data + ": the images are not 28×28");
    steps_per_epoch_ = std::max<int64_t>(1, train_.n / c_.batch);
    if (c_.steps == 0) c_.steps = c_.epochs * steps_per_epoch_;  // config.json records the steps
    if (ckpt) {
      model_ = VitModel::load(gguf::GgufFile::open(ckpt->model));
      start_ = ckpt->step;
      if (start_ >= c_.steps) throw ConfigError(run_dir_ + " already has " + std::to_string(start_) + " steps");
    } else {
      model_ = VitModel::random(vit_hparams(c_), c_.seed);
    }
    if (model_->class_names().empty()) model_->set_class_names(fashion_mnist_classes());  // the file names them
    model_->for_each_param([&](Tensor& t) {  // owned F32 copies that take gradients
      const std::string name = t.name();
      t = t.clone().set_name(name);
      t.requires_grad_();
      params_.push_back(t);
    });
    opt_ = std::make_unique<AdamW>(
        params_, AdamWConfig{.beta1 = c_.beta1, .beta2 = c_.beta2, .eps = c_.eps, .weight_decay = c_.weight_decay});
    if (ckpt) opt_->load(*gguf::GgufFile::open(ckpt->optimizer));
    fs::create_directories(fs::path(run_dir_) / "weights");
    if (!resuming) lock_ = BundleLock(run_dir_);
    write_file_atomic((fs::path(run_dir_) / "config.json").string(), to_json(c_).dump(2) + "\n");
    log_ = EventLog(events_path());
    end_ = c_.stop_after > 0 ? std::min(c_.steps, c_.stop_after) : c_.steps;
    if (end_ <= start_ && ckpt)
      throw ConfigError("--stop-after " + std::to_string(c_.stop_after) + " is not after the checkpoint at step " +
                        std::to_string(start_));
    if (ckpt) read_logged_curves();
  }

  VitRunResult run() {
    emit_start();
    VitRunResult r{.run_dir = run_dir_, .steps_done = start_, .last_loss = NAN};
    const Schedule schedule{.kind = c_.schedule == "cosine" ? ScheduleKind::Cosine : ScheduleKind::Constant,
                            .lr = c_.lr,
                            .warmup = c_.warmup,
                            .total = c_.steps,
                            .min_lr_ratio = c_.min_lr_ratio};
    const auto t0 = Clock::now();
    int64_t s = start_;
    for (;; ++s) {
      if (s > start_ && s < end_ && c_.checkpoint_every > 0 && s % c_.checkpoint_every == 0) checkpoint(s);
      if (s > 0 && s < end_ && c_.eval_every > 0 && s % c_.eval_every == 0) evaluate(s);
      if (s == end_) break;
      if (io_.stop && io_.stop->load()) {
        r.interrupted = true;
        break;
      }
      r.last_loss = step(s, schedule);
      if (!std::isfinite(r.last_loss)) {
        log_.emit("run_end", {{"ended_at", utc_timestamp()},
                              {"reason", "diverged"},
                              {"final_step", s},
                              {"final_loss", nullptr},
                              {"exit_code", 1}});
        throw std::runtime_error("the training loss diverged at step " + std::to_string(s));
      }
    }
    r.test = evaluate(s);
    checkpoint(s);
    r.steps_done = s;
    r.completed = s == c_.steps;
    if (r.completed) link_final(run_dir_, checkpoint_model_path(run_dir_, s));
    write_file_atomic((fs::path(run_dir_) / "confusion.txt").string(), confusion_text(r.test, model_->class_names()));
    write_file_atomic((fs::path(run_dir_) / "confusion.svg").string(),
                      confusion_svg(r.test.confusion, model_->class_names(), plot_title()));
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(io_.err, "%s: %lld steps in %.1fs, test accuracy %.2f%% (%lld images)\n",
                 r.completed ? "done" : "stopped", (long long)(s - start_), secs, 100 * r.test.accuracy,
                 (long long)r.test.n);
    const char* reason = r.interrupted ? "interrupted" : r.completed ? "completed" : "stopped";
    log_.emit("run_end", {{"ended_at", utc_timestamp()},
                          {"reason", reason},
                          {"final_step", s},
                          {"final_loss", r.last_loss},
                          {"exit_code", r.interrupted ? 130 : 0},
                          {"accuracy", r.test.accuracy},
                          {"seconds", secs},
                          {"checkpoint", fs::relative(checkpoint_model_path(run_dir_, s), run_dir_).string()}});
    return r;
  }

 private:
  std::string events_path() const { return (fs::path(run_dir_) / "events.jsonl").string(); }

  void emit_start() {
    const VitHparams& h = model_->hparams();
    int64_t n_params = 0;
    for (const Tensor& p : params_) n_params += p.numel();
    ordered_json e = {{"schema", kEventSchema},
                      {"started_at", utc_timestamp()},
                      {"run_id", fs::path(run_dir_).filename().string()},
                      {"phase", c_.recipe}};
    e.update(provenance());
    e["model"] = {
        {"arch", "vit"},         {"name", "vit-tiny"},    {"vocab", h.n_class},       {"d_model", h.d_model},
        {"n_layers", h.n_layer}, {"n_heads", h.n_head},   {"n_kv", h.n_head},         {"d_head", h.d_model / h.n_head},
        {"d_ff", h.d_ff},        {"patch", h.patch_size}, {"tokens", h.n_patch() + 1}};
    ordered_json config = to_json(c_);
    config["context"] = h.n_patch() + 1;  // the schema's T: tokens per image
    e["config"] = config;
    e["resumed_from"] = start_;
    e["parameters"] = n_params;
    e["data"] = {{"source", "idx"},
                 {"path", c_.data},
                 {"train_images", train_.n},
                 {"test_images", test_.n},
                 {"steps_per_epoch", steps_per_epoch_}};
    log_.emit("run_start", e);
    std::fprintf(io_.err, "vit: %lld parameters, %lld training images (%lld steps an epoch), %lld steps\n",
                 (long long)n_params, (long long)train_.n, (long long)steps_per_epoch_, (long long)c_.steps);
  }

  // Step s: batch s on the weights after s updates, then update s + 1.
  double step(int64_t s, const Schedule& schedule) {
    const auto t0 = Clock::now();
    const int64_t epoch = s / steps_per_epoch_, i0 = s % steps_per_epoch_ * c_.batch;
    if (order_epoch_ != epoch) order_ = epoch_order(train_.n, c_.seed, epoch), order_epoch_ = epoch;
    std::vector<int64_t> items;
    for (int64_t i = i0; i < std::min(train_.n, i0 + c_.batch); ++i) items.push_back(order_[size_t(i)]);
    for (Tensor& p : params_) p.zero_grad();
    Tensor logits = model_->forward(augmented_batch(train_, items, c_.flip, c_.shift, c_.seed, s));  // [B, K]
    Tensor loss = cross_entropy(logits, label_batch(train_, items));
    loss.backward();
    const double norm = global_grad_norm(params_);
    const float clip_scale = clip_grad_norm(params_, c_.clip, norm);
    const float lr = lr_at(schedule, s);
    opt_->step(lr);
    for (Tensor& p : params_) p.zero_grad();
    const double l = loss.item(), secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!std::isfinite(l)) return l;
    int64_t right = 0;
    const int64_t K = model_->hparams().n_class;
    for (size_t r = 0; r < items.size(); ++r)
      right += argmax_row(logits.data() + int64_t(r) * K, K) == train_.labels[size_t(items[r])];
    const double acc = double(right) / double(items.size());
    const int64_t T = model_->hparams().n_patch() + 1;
    log_.emit("step", {{"phase", c_.recipe},
                       {"step", s},
                       {"loss", l},
                       {"lr", lr},
                       {"tokens", (s + 1) * c_.batch * T},
                       {"wall_us", micros(secs)},
                       {"grad_norm", norm},
                       {"clip_scale", clip_scale},
                       {"accuracy", acc},
                       {"epoch", epoch}});
    train_curve_.push_back({double(s), l});
    train_accuracy_.push_back({double(s), acc});
    if (c_.log_every > 0 && (s % c_.log_every == 0 || s + 1 == end_))
      std::fprintf(io_.out, "step %lld: loss=%.4f acc=%.3f lr=%.2e (%.0f ms)\n", (long long)s, l, acc, lr, secs * 1e3);
    std::fflush(io_.out);
    return l;
  }

  VitEval evaluate(int64_t s) {
    const auto t0 = Clock::now();
    const VitEval e = evaluate_vit(*model_, test_);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    log_.emit("eval", {{"step", s},
                       {"loss", e.loss},
                       {"batches", (e.n + 499) / 500},
                       {"wall_us", micros(secs)},
                       {"accuracy", e.accuracy},
                       {"n", e.n}});
    std::fprintf(io_.out, "eval %lld: test_loss=%.4f accuracy=%.4f (%lld images)\n", (long long)s, e.loss, e.accuracy,
                 (long long)e.n);
    eval_curve_.push_back({double(s), e.loss});
    eval_accuracy_.push_back({double(s), e.accuracy});
    accuracy_ = e.accuracy, accuracy_step_ = s;
    plot();
    return e;
  }

  void checkpoint(int64_t s) {
    const std::string model = checkpoint_model_path(run_dir_, s), optim = checkpoint_optimizer_path(run_dir_, s);
    model_->write_gguf(model, "vit");  // not the run id: the same run under two ids, the same bytes
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::of_string("toy.optimizer"));
    opt_->save(w);
    w.write(optim);
    log_.emit("checkpoint", {{"step", s},
                             {"path", fs::relative(model, run_dir_).string()},
                             {"optimizer", fs::relative(optim, run_dir_).string()},
                             {"bytes", fs::file_size(model)}});
  }

  std::string plot_title() const {
    char title[160];
    std::snprintf(title, sizeof title, "%s: test accuracy %.2f%% at step %lld",
                  fs::path(run_dir_).filename().string().c_str(), 100 * accuracy_, (long long)accuracy_step_);
    return title;
  }

  // loss.svg and accuracy.svg: the training batches' (each step) and the test set's (each evaluation).
  void plot() {
    write_file_atomic((fs::path(run_dir_) / "loss.svg").string(), loss_svg(train_curve_, eval_curve_, plot_title()));
    write_file_atomic((fs::path(run_dir_) / "accuracy.svg").string(),
                      loss_svg(train_accuracy_, eval_accuracy_, plot_title(),
                               {.y_axis = "accuracy (share of images classified right)",
                                .train = "batch accuracy",
                                .eval = "test accuracy"}));
  }

  // The curves of the steps before start_ (a resumed run's plot shows the whole run).
  void read_logged_curves() {
    std::istringstream in(read_file(events_path()));
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number() || !j.contains("loss") ||
          !j["loss"].is_number() || j["step"].get<int64_t>() >= start_)
        continue;
      const CurvePoint p{j["step"].get<double>(), j["loss"].get<double>()};
      const bool train = j.value("kind", "") == "step", eval = j.value("kind", "") == "eval";
      if (train) train_curve_.push_back(p);
      if (eval) eval_curve_.push_back(p);
      if (!j.contains("accuracy") || !j["accuracy"].is_number()) continue;
      const CurvePoint a{p.step, j["accuracy"].get<double>()};
      if (train) train_accuracy_.push_back(a);
      if (eval) eval_accuracy_.push_back(a);
    }
  }

  VitRunConfig c_;
  RunOutput io_;
  std::string run_dir_;
  BundleLock lock_;
  ImageSet train_, test_;
  int64_t steps_per_epoch_ = 1, start_ = 0, end_ = 0;
  std::unique_ptr<VitModel> model_;
  std::vector<Tensor> params_;
  std::unique_ptr<AdamW> opt_;
  EventLog log_;
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
  std::vector<CurvePoint> train_curve_, eval_curve_;  // loss
  std::vector<CurvePoint> train_accuracy_, eval_accuracy_;
  double accuracy_ = 0;
  int64_t accuracy_step_ = 0;
};

}  // namespace

VitRunResult train_vit(const VitRunConfig& c, const RunOutput& io, const std::string& resume_dir) {
  return VitRun(c, io, resume_dir).run();
}

}  // namespace toy::recipes
