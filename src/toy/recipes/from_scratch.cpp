// recipes/from_scratch.cpp — the training loop with its data, run bundle, progress and resume.
#include "toy/recipes/from_scratch.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>

#include "toy/archs/model.h"
#include "toy/engines/events.h"
#include "toy/engines/run_bundle.h"
#include "toy/engines/train.h"
#include "toy/engines/train_data.h"
#include "toy/kernels/kernels.h"
#include "toy/tokenizer/tokenizer.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// config.json

// One table of every setting: its JSON key (= the CLI flag without dashes) and its field.
template <class F>
void for_each_setting(TrainRunConfig& c, F&& f) {
  f("recipe", c.recipe);
  f("d-model", c.d_model), f("layers", c.n_layer), f("heads", c.n_head), f("kv-heads", c.n_kv_head), f("ff", c.d_ff);
  f("tied", c.tied), f("rope-base", c.rope_base), f("rms-eps", c.rms_eps);
  f("corpus", c.corpus), f("tokenizer", c.tokenizer), f("data-ids", c.data_ids), f("eval-ids", c.eval_ids);
  f("init-weights", c.init_weights), f("eval-fraction", c.eval_fraction), f("eval-batches", c.eval_batches);
  f("context", c.context), f("batch", c.batch), f("steps", c.steps), f("lr", c.lr), f("schedule", c.schedule);
  f("warmup", c.warmup), f("min-lr-ratio", c.min_lr_ratio), f("beta1", c.beta1), f("beta2", c.beta2), f("eps", c.eps);
  f("weight-decay", c.weight_decay), f("clip", c.clip), f("seed", c.seed);
  f("eval-every", c.eval_every), f("checkpoint-every", c.checkpoint_every), f("stop-after", c.stop_after);
  f("threads", c.threads), f("runs-dir", c.runs_dir), f("run-id", c.run_id);
}

namespace {
// The shortest decimal that reads back as the same float.
std::string shortest(float v) {
  char b[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, double(v));
    if (std::strtof(b, nullptr) == v) break;
  }
  return b;
}
}  // namespace

ordered_json to_json(const TrainRunConfig& c0) {
  TrainRunConfig c = c0;
  ordered_json j;
  for_each_setting(c, [&](const char* key, auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, float>)
      j[key] = std::stod(shortest(v));  // 0.001, not 0.0010000000474974513
    else
      j[key] = v;
  });
  return j;
}

TrainRunConfig config_from_json(const nlohmann::json& j) {
  TrainRunConfig c;
  for_each_setting(c, [&](const char* key, auto& v) {
    if (!j.contains(key)) return;
    try {
      j.at(key).get_to(v);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(std::string("config.json: \"") + key + "\": " + e.what());
    }
  });
  return c;
}

TrainRunConfig load_run_config(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "config.json").string();
  if (!fs::exists(path)) throw DataError(run_dir + ": not a run directory (no config.json)");
  try {
    return config_from_json(nlohmann::json::parse(read_file(path)));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": " + e.what());
  }
}

void validate(const TrainRunConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(what);
  };
  constexpr int64_t kBig = int64_t(1) << 20;
  need(!c.corpus.empty() || !c.data_ids.empty(), "give a text corpus (--corpus FILE) or token ids (--data-ids FILE)");
  need(c.corpus.empty() || c.data_ids.empty(), "--corpus and --data-ids cannot be combined");
  need(c.eval_ids.empty() || !c.data_ids.empty(), "--eval-ids goes with --data-ids");
  if (c.init_weights.empty()) {
    need(c.d_model >= 1 && c.d_model <= kBig, "--d-model must be in [1, 2^20], got " + std::to_string(c.d_model));
    need(c.n_layer >= 1 && c.n_layer <= 4096, "--layers must be in [1, 4096], got " + std::to_string(c.n_layer));
    need(c.n_head >= 1 && c.n_head <= c.d_model, "--heads must be in [1, d-model], got " + std::to_string(c.n_head));
    need(c.d_model % c.n_head == 0,
         "--d-model " + std::to_string(c.d_model) + " is not divisible by --heads " + std::to_string(c.n_head));
    need((c.d_model / c.n_head) % 2 == 0, "the head size d-model/heads = " + std::to_string(c.d_model / c.n_head) +
                                              " must be even (RoPE rotates pairs)");
    const int64_t kv = c.n_kv_head ? c.n_kv_head : c.n_head;
    need(kv >= 1 && c.n_head % kv == 0,
         "--kv-heads " + std::to_string(c.n_kv_head) + " must divide --heads " + std::to_string(c.n_head));
    need(c.d_ff >= 0 && c.d_ff <= kBig, "--ff must be in [0, 2^20], got " + std::to_string(c.d_ff));
    need(c.rope_base > 0 && std::isfinite(c.rope_base), "--rope-base must be positive");
    need(c.rms_eps > 0 && std::isfinite(c.rms_eps), "--rms-eps must be positive");
  }
  need(c.context >= 1 && c.context <= kBig, "--context must be in [1, 2^20], got " + std::to_string(c.context));
  need(c.batch >= 1 && c.batch <= kBig, "--batch must be in [1, 2^20], got " + std::to_string(c.batch));
  need(c.steps >= 1, "--steps must be at least 1, got " + std::to_string(c.steps));
  need(c.lr > 0 && std::isfinite(c.lr), "--lr must be positive, got " + std::to_string(c.lr));
  need(c.schedule == "cosine" || c.schedule == "constant",
       "--schedule must be cosine or constant, got '" + c.schedule + "'");
  need(c.warmup >= 0, "--warmup must be ≥ 0");
  need(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1]");
  need(c.beta1 >= 0 && c.beta1 < 1, "--beta1 must be in [0, 1)");
  need(c.beta2 >= 0 && c.beta2 < 1, "--beta2 must be in [0, 1)");
  need(c.eps > 0 && std::isfinite(c.eps), "--eps must be positive");
  need(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "--weight-decay must be ≥ 0");
  need(c.clip >= 0 && std::isfinite(c.clip), "--clip must be ≥ 0 (0 disables clipping)");
  need(c.eval_fraction >= 0 && c.eval_fraction <= 0.5, "--eval-fraction must be in [0, 0.5]");
  need(c.eval_batches >= 1, "--eval-batches must be at least 1");
  need(c.eval_every >= 0 && c.checkpoint_every >= 0 && c.stop_after >= 0,
       "--eval-every, --checkpoint-every and --stop-after must be ≥ 0");
  need(c.threads >= 0 && c.threads <= 1024, "--threads must be in [0, 1024]");
  need(!c.recipe.empty(), "empty recipe name");
}

// ------------------------------------------------------------------------------------------
// Setup: tokenizer, model, data.

namespace {

std::shared_ptr<const gguf::GgufFile> open_input(const std::string& path, const char* flag) {
  if (!fs::exists(path)) throw DataError(std::string(flag) + " " + path + ": no such file");
  return gguf::GgufFile::open(path);
}

// A new Llama-architecture model of the configured shape (NORM rope, as GGUF llama files).
std::unique_ptr<Model> build_model(const TrainRunConfig& c, int64_t n_vocab) {
  using gguf::Value;
  try {
    return random_model({.arch = "llama",
                         .n_vocab = n_vocab,
                         .d_model = c.d_model,
                         .n_layer = c.n_layer,
                         .n_head = c.n_head,
                         .n_kv_head = c.n_kv_head,
                         .d_ff = c.d_ff ? c.d_ff : 3 * c.d_model,
                         .n_ctx = c.context,
                         .tied_output = c.tied,
                         .keys = {{"rope.freq_base", Value::of_f32(c.rope_base)},
                                  {"attention.layer_norm_rms_epsilon", Value::of_f32(c.rms_eps)}}},
                        c.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
}

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

struct Data {
  std::function<std::vector<int32_t>(int64_t step)> batch_ids;  // B·(T + 1) ids of step s
  std::vector<Batch> eval;                                      // fixed held-out batches
  ordered_json summary;                                         // for run_start
};

Data load_data(const TrainRunConfig& c, const Tokenizer* tok, int64_t n_vocab, std::FILE* err) {
  const int64_t B = c.batch, T = c.context;
  Data d;
  auto eval_set = [&](const TokenSplit& split) {
    for (const auto& ids : split.eval_batches(B, T, c.eval_batches))
      d.eval.push_back(make_batch(ids, int64_t(ids.size()) / (T + 1), T));
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
  const std::string text = read_file(c.corpus);
  if (text.empty()) throw DataError(c.corpus + ": the corpus is empty");
  const auto t0 = Clock::now();
  std::vector<int32_t> tokens = tokenize_corpus(*tok, text);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const size_t n_tokens = tokens.size();
  auto split = std::make_shared<TokenSplit>();
  try {
    *split = TokenSplit::make(std::move(tokens), c.eval_fraction, T);
  } catch (const DataError& e) {
    throw DataError(c.corpus + ": " + e.what());
  }
  std::fprintf(err, "corpus %s: %zu bytes -> %zu tokens in %.1fs (train %zu, held out %zu)\n", c.corpus.c_str(),
               text.size(), n_tokens, secs, split->train.size(), split->held_out.size());
  d.batch_ids = [split, B, T, seed = c.seed](int64_t s) { return split->sample(s, B, T, seed); };
  eval_set(*split);
  d.summary = {{"source", "corpus"},
               {"path", c.corpus},
               {"bytes", text.size()},
               {"tokens", n_tokens},
               {"train_tokens", split->train.size()},
               {"held_out_tokens", split->held_out.size()}};
  return d;
}

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

std::string duration_text(double s) {
  char b[32];
  if (s < 60)
    std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(b, sizeof b, "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return b;
}

// A one-line progress bar on a terminal, redrawn at most 10 times a second.
class Progress {
 public:
  Progress(std::FILE* err, bool on, bool shares_terminal) : err_(err), on_(on), shares_(shares_terminal) {}
  void update(int64_t step, int64_t total, double loss, double tok_per_s, double eta_s, bool force = false) {
    if (!on_) return;
    const auto now = Clock::now();
    if (!force && visible_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int fill = total > 0 ? int(double(kWidth) * double(step) / double(total)) : 0;
    std::string bar(size_t(fill), '=');
    if (fill < kWidth) bar += '>' + std::string(size_t(kWidth - fill - 1), ' ');
    std::fprintf(err_, "\r\033[K%lld/%lld [%s] loss %.4f  %.1fk tok/s  ETA %s", (long long)step, (long long)total,
                 bar.c_str(), loss, tok_per_s / 1000, duration_text(eta_s).c_str());
    std::fflush(err_);
    visible_ = true;
  }
  // Before a line on stdout: clear the bar when both go to the same terminal.
  void clear() {
    if (on_ && visible_ && shares_) {
      std::fprintf(err_, "\r\033[K");
      std::fflush(err_);
      visible_ = false;
    }
  }
  void finish() {
    if (on_ && visible_) std::fprintf(err_, "\n");
    visible_ = false;
  }

 private:
  std::FILE* err_;
  bool on_, shares_, visible_ = false;
  Clock::time_point last_{};
};

// Curve points of the events logged before `resume_step` (for loss.svg after a resume).
void read_curves(const std::string& path, int64_t resume_step, std::vector<CurvePoint>& train,
                 std::vector<CurvePoint>& eval) {
  std::map<int64_t, double> tr, ev;
  std::istringstream in(fs::exists(path) ? read_file(path) : std::string());
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || !j.contains("loss") ||
        !j["loss"].is_number())
      continue;
    const int64_t s = j["step"];
    if (j.value("event", "") == "step" && s < resume_step) tr[s] = j["loss"];
    if (j.value("event", "") == "eval" && s <= resume_step) ev[s] = j["loss"];
  }
  for (auto [s, l] : tr) train.push_back({double(s), l});
  for (auto [s, l] : ev) eval.push_back({double(s), l});
}

// Writes checkpoint `step` of a run: the optimizer state first, then the model (a checkpoint
// counts for --resume once both exist); drops the optimizer state of the previous checkpoint;
// links weights/final.gguf to the last one.
Checkpoint write_checkpoint(TrainEngine& engine, const Tokenizer* tok, const std::string& run_dir, int64_t step,
                            const TrainRunConfig& c, int64_t prev_step, bool final) {
  const Checkpoint k{step, checkpoint_model_path(run_dir, step), checkpoint_optimizer_path(run_dir, step)};
  write_optimizer_gguf(
      engine.optimizer(), k.optimizer,
      {{"toy.train.step", gguf::Value::of_u64(uint64_t(step))}, {"toy.train.seed", gguf::Value::of_u64(c.seed)}});
  write_model_gguf(engine.model(), tok, k.model, "toy-" + c.recipe);
  std::error_code ec;
  if (prev_step > 0 && prev_step != step) fs::remove(checkpoint_optimizer_path(run_dir, prev_step), ec);
  if (final) {
    const fs::path fin = fs::path(run_dir) / "weights" / "final.gguf";
    fs::remove(fin, ec);
    fs::create_hard_link(k.model, fin, ec);
    if (ec) fs::copy_file(k.model, fin, fs::copy_options::overwrite_existing);
  }
  return k;
}

int64_t count_params(const std::vector<Tensor>& ps) {
  int64_t n = 0;
  for (const Tensor& p : ps) n += p.numel();
  return n;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The run.

RunResult train_run(const TrainRunConfig& c_in, const RunOutput& io, const std::string& resume_dir) {
  TrainRunConfig c = c_in;
  validate(c);
  if (c.threads > 0) kernels::set_num_threads(c.threads);
  const bool resuming = !resume_dir.empty();

  std::optional<Checkpoint> ckpt;
  if (resuming) {
    ckpt = latest_resumable_checkpoint(resume_dir);
    if (!ckpt)
      throw DataError(resume_dir + ": no checkpoint to resume from (weights/step-N.gguf with its step-N.optim.gguf)");
    if (ckpt->step >= c.steps)
      throw ConfigError(resume_dir + " already has " + std::to_string(ckpt->step) +
                        " steps; pass --steps greater than that to train further");
    if (c.stop_after > 0 && c.stop_after <= ckpt->step)
      throw ConfigError("--stop-after " + std::to_string(c.stop_after) + " is not after the checkpoint at step " +
                        std::to_string(ckpt->step));
  }

  std::string run_dir = resume_dir;
  if (!resuming) {
    if (c.run_id.empty()) c.run_id = new_run_id(c.recipe);
    run_dir = (fs::path(c.runs_dir) / c.run_id).string();
    if (fs::exists(run_dir))
      throw ConfigError("run directory " + run_dir + " exists: continue it with --resume " + run_dir +
                        ", or pick another --run-id");
  }

  // Tokenizer: --tokenizer, else the one in --init-weights, else bytes (from scratch).
  std::shared_ptr<const gguf::GgufFile> init_file;
  if (!c.init_weights.empty()) init_file = open_input(c.init_weights, "--init-weights");
  std::shared_ptr<const Tokenizer> tok;
  if (!c.tokenizer.empty())
    tok = Tokenizer::from_gguf(*open_input(c.tokenizer, "--tokenizer"));
  else if (init_file && init_file->has("tokenizer.ggml.tokens"))
    tok = Tokenizer::from_gguf(*init_file);
  else if (!init_file)
    tok = Tokenizer::byte_level();
  if (!tok)
    std::fprintf(io.err, "warning: no tokenizer (--init-weights has none): checkpoints will have no vocabulary\n");

  // Model: the checkpoint when resuming, else --init-weights, else random weights.
  std::unique_ptr<Model> model;
  if (ckpt)
    model = load_model(gguf::GgufFile::open(ckpt->model));
  else if (init_file)
    model = load_model(init_file);
  else {
    model = build_model(c, tok->n_vocab());
  }
  init_file.reset();
  const int64_t V = model->config().n_vocab;
  if (tok && tok->n_vocab() != V)
    throw DataError("the tokenizer has " + std::to_string(tok->n_vocab()) + " tokens but the model's vocabulary has " +
                    std::to_string(V));

  Data data = load_data(c, tok.get(), V, io.err);
  const bool has_eval = !data.eval.empty();

  TrainConfig tc{.schedule = {.kind = c.schedule == "constant" ? ScheduleKind::Constant : ScheduleKind::Cosine,
                              .lr = c.lr,
                              .warmup = c.warmup,
                              .total = c.steps,
                              .min_lr_ratio = c.min_lr_ratio},
                 .adamw = {.beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps, .weight_decay = c.weight_decay},
                 .clip = c.clip};
  TrainEngine engine(*model, tc);
  if (ckpt) {
    engine.optimizer().load(*gguf::GgufFile::open(ckpt->optimizer));
    if (engine.steps() != ckpt->step)
      throw DataError(ckpt->optimizer + ": optimizer state has " + std::to_string(engine.steps()) +
                      " steps, the checkpoint name says " + std::to_string(ckpt->step));
  }

  // The bundle. Temporary files of a killed run (`<name>.tmp.<pid>`) are removed on resume.
  if (!resuming) fs::create_directories(fs::path(run_dir) / "weights");
  for (const fs::path& dir : {fs::path(run_dir), fs::path(run_dir) / "weights"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  }
  write_file_atomic((fs::path(run_dir) / "config.json").string(), to_json(c).dump(2) + "\n");
  const std::string events_path = (fs::path(run_dir) / "events.jsonl").string();
  std::vector<CurvePoint> train_curve, eval_curve;
  if (resuming) read_curves(events_path, ckpt->step, train_curve, eval_curve);
  EventLog events(events_path);

  const int64_t B = c.batch, T = c.context, start = ckpt ? ckpt->step : 0;
  const int64_t end = c.stop_after > 0 ? std::min(c.steps, c.stop_after) : c.steps;
  const int64_t n_params = count_params(engine.params());
  const ModelConfig& mc = model->config();
  std::fprintf(io.err,
               "%s %s: %lld parameters (d_model %lld, %lld layers, %lld/%lld heads, d_ff %lld, vocab %lld), B %lld x T "
               "%lld, steps %lld..%lld\n",
               resuming ? "resuming" : "run", run_dir.c_str(), (long long)n_params, (long long)mc.d_model,
               (long long)mc.n_layer, (long long)mc.n_head, (long long)mc.n_kv_head, (long long)mc.d_ff, (long long)V,
               (long long)B, (long long)T, (long long)start, (long long)end);
  events.emit("run_start", {{"schema", kEventSchema},
                            {"run_id", fs::path(run_dir).filename().string()},
                            {"recipe", c.recipe},
                            {"toy_version", TOY_VERSION},
                            {"resumed_from_step", resuming ? ordered_json(start) : ordered_json(nullptr)},
                            {"steps", c.steps},
                            {"threads", kernels::num_threads()},
                            {"parameters", n_params},
                            {"model",
                             {{"arch", mc.arch},
                              {"n_vocab", V},
                              {"d_model", mc.d_model},
                              {"n_layer", mc.n_layer},
                              {"n_head", mc.n_head},
                              {"n_kv_head", mc.n_kv_head},
                              {"d_ff", mc.d_ff}}},
                            {"data", data.summary},
                            {"config", to_json(c)}});

  const std::string title = fs::path(run_dir).filename().string() + ": " + std::to_string(n_params) + " parameters";
  auto write_plot = [&] {
    write_file_atomic((fs::path(run_dir) / "loss.svg").string(), loss_svg(train_curve, eval_curve, title));
  };
  const bool out_is_tty = ::isatty(fileno(io.out)) != 0;
  Progress bar(io.err, io.progress, out_is_tty);
  auto print_line = [&](const char* fmt, long long s, double v) {
    bar.clear();
    std::fprintf(io.out, fmt, s, v);
    std::fflush(io.out);
  };

  RunResult result{.run_dir = run_dir, .steps_done = start};
  const auto t_start = Clock::now();
  double last_loss = NAN;
  int64_t prev_checkpoint = start;
  for (int64_t s = start;; ++s) {
    if (has_eval && (s == c.steps || (c.eval_every > 0 && s % c.eval_every == 0)) && !(resuming && s == start)) {
      const auto t0 = Clock::now();
      const double l = evaluate(engine, data.eval);
      result.last_eval_loss = l;
      print_line("eval %lld: val_loss=%.9g\n", s, l);
      events.emit("eval", {{"step", s},
                           {"loss", l},
                           {"batches", data.eval.size()},
                           {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}});
      eval_curve.push_back({double(s), l});
      write_plot();
    }
    if (s > start && (s == end || (c.checkpoint_every > 0 && s % c.checkpoint_every == 0))) {
      const Checkpoint saved =
          write_checkpoint(engine, tok.get(), run_dir, s, c, prev_checkpoint, /*final=*/s == c.steps);
      prev_checkpoint = s;
      events.emit("checkpoint", {{"step", s},
                                 {"path", fs::relative(saved.model, run_dir).string()},
                                 {"optimizer", fs::relative(saved.optimizer, run_dir).string()},
                                 {"bytes", fs::file_size(saved.model)}});
      write_plot();
      result.steps_done = s;
    }
    if (s >= end) break;

    const auto t0 = Clock::now();
    const Batch batch = make_batch(data.batch_ids(s), B, T);
    const StepResult r = engine.step(batch);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    print_line("step %lld: loss=%.9g\n", s, r.loss);
    if (!std::isfinite(r.loss)) {
      bar.finish();
      events.emit("run_end", {{"status", "diverged"}, {"step", s}});
      throw std::runtime_error("the loss is " + std::to_string(r.loss) + " at step " + std::to_string(s) +
                               " (try a lower --lr)");
    }
    last_loss = r.loss;
    const double tok_s = double(B * T) / secs;
    events.emit("step", {{"step", s},
                         {"loss", r.loss},
                         {"lr", r.lr},
                         {"grad_norm", r.grad_norm},
                         {"clip_scale", r.clip_scale},
                         {"tokens", (s + 1) * B * T},
                         {"seconds", secs},
                         {"tokens_per_s", tok_s}});
    train_curve.push_back({double(s), r.loss});
    const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
    const double done = double(s + 1 - start);
    bar.update(s + 1, c.steps, r.loss, done * double(B * T) / elapsed, elapsed / done * double(end - s - 1),
               /*force=*/s + 1 == end);
  }
  bar.finish();

  const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
  const int64_t trained = end - start;
  result.last_loss = last_loss;
  result.completed = end == c.steps;
  events.emit("run_end",
              {{"status", result.completed ? "completed" : "stopped"},
               {"step", end},
               {"loss", last_loss},
               {"eval_loss", result.last_eval_loss >= 0 ? ordered_json(result.last_eval_loss) : ordered_json(nullptr)},
               {"seconds", elapsed},
               {"tokens_per_s", double(trained * B * T) / elapsed},
               {"checkpoint", fs::relative(checkpoint_model_path(run_dir, end), run_dir).string()}});
  write_plot();
  std::fprintf(io.err, "%s %lld steps (%lld tokens) in %s, %.0f tok/s; last loss %.4f%s; bundle %s\n",
               result.completed ? "trained" : "stopped after", (long long)trained, (long long)(trained * B * T),
               duration_text(elapsed).c_str(), double(trained * B * T) / elapsed, last_loss,
               result.last_eval_loss >= 0 ? (", eval " + std::to_string(result.last_eval_loss)).c_str() : "",
               run_dir.c_str());
  return result;
}

}  // namespace toy::recipes
