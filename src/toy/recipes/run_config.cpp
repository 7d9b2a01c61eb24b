// recipes/run_config.cpp — config.json: writing, reading back with type checks, validation.
#include "toy/recipes/run_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <type_traits>

#include "toy/archs/model.h"
#include "toy/engines/train_data.h"
#include "toy/io/file_type.h"
#include "toy/recipes/from_scratch.h"

namespace toy::recipes {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// ------------------------------------------------------------------------------------------
// config.json

// One table of every setting: its JSON key (= the CLI flag without dashes) and its field.
template <class F>
void for_each_setting(TrainRunConfig& c, F&& f) {
  f("recipe", c.recipe), f("arch", c.arch);
  f("d-model", c.d_model), f("layers", c.n_layer), f("heads", c.n_head), f("kv-heads", c.n_kv_head), f("ff", c.d_ff);
  f("tied", c.tied), f("rope-base", c.rope_base), f("rms-eps", c.rms_eps);
  f("experts", c.n_expert), f("experts-used", c.n_expert_used);
  f("full-attention-interval", c.full_attention_interval), f("differential", c.differential), f("ssmax", c.ssmax);
  f("corpus", c.corpus), f("tokenizer", c.tokenizer), f("data-ids", c.data_ids), f("eval-ids", c.eval_ids);
  f("data", c.data), f("mask-prompt", c.mask_prompt);
  f("base", c.base), f("init-adapter", c.init_adapter), f("targets", c.targets), f("rank", c.rank);
  f("alpha", c.alpha), f("dropout", c.dropout), f("donor", c.donor), f("train-embd", c.train_embd);
  f("init-weights", c.init_weights), f("eval-fraction", c.eval_fraction), f("eval-batches", c.eval_batches);
  f("context", c.context), f("batch", c.batch), f("grad-accum", c.grad_accum), f("steps", c.steps), f("lr", c.lr),
      f("schedule", c.schedule);
  f("warmup", c.warmup), f("min-lr-ratio", c.min_lr_ratio), f("beta1", c.beta1), f("beta2", c.beta2), f("eps", c.eps);
  f("weight-decay", c.weight_decay), f("clip", c.clip), f("seed", c.seed), f("save-dtype", c.save_dtype);
  f("log-every", c.log_every), f("eval-every", c.eval_every), f("checkpoint-every", c.checkpoint_every),
      f("stop-after", c.stop_after);
  f("threads", c.threads), f("runs-dir", c.runs_dir), f("run-id", c.run_id);
}

double json_number(float v) {  // the shortest decimal that reads back as the same float
  char b[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, double(v));
    if (std::strtof(b, nullptr) == v) break;
  }
  return std::stod(b);
}

ordered_json to_json(const TrainRunConfig& c0) {
  TrainRunConfig c = c0;
  ordered_json j;
  for_each_setting(c, [&](const char* key, auto& v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, float>)
      j[key] = json_number(v);  // 0.001, not 0.0010000000474974513
    else
      j[key] = v;
  });
  return j;
}

namespace {

// What a JSON value is, for messages: `a string ("abc")`.
std::string describe(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const std::string type = v.type_name();
  return (type == "array" || type == "object" ? "an " : "a ") + type + " (" + text + ")";
}

}  // namespace

template <class T>
void read_setting(const nlohmann::json& value, const char* key, T& v) {
  auto wrong = [&](const std::string& want) {
    return ConfigError(std::string("\"") + key + "\" must be " + want + ", got " + describe(value));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) throw wrong("true or false");
    v = value.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) throw wrong("a string");
    v = value.get<std::string>();
  } else if constexpr (std::is_integral_v<T>) {
    const std::string want = std::is_signed_v<T> ? "an integer" : "an integer ≥ 0";
    if (!value.is_number_integer()) throw wrong(want);
    using L = std::numeric_limits<T>;
    if (value.is_number_unsigned() ? value.get<uint64_t>() > uint64_t(L::max())
                                   : value.get<int64_t>() < int64_t(L::min()))
      throw wrong(want + " in [" + std::to_string(L::min()) + ", " + std::to_string(L::max()) + "]");
    v = value.get<T>();
  } else {
    static_assert(std::is_floating_point_v<T>);
    if (!value.is_number()) throw wrong("a number");
    v = value.get<T>();
  }
}
template void read_setting(const nlohmann::json&, const char*, bool&);
template void read_setting(const nlohmann::json&, const char*, std::string&);
template void read_setting(const nlohmann::json&, const char*, int&);
template void read_setting(const nlohmann::json&, const char*, int64_t&);
template void read_setting(const nlohmann::json&, const char*, uint64_t&);
template void read_setting(const nlohmann::json&, const char*, float&);
template void read_setting(const nlohmann::json&, const char*, double&);

TrainRunConfig config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError("expected a JSON object of settings, got " + describe(j));
  TrainRunConfig c;
  for_each_setting(c, [&](const char* key, auto& v) {
    if (j.contains(key)) read_setting(j.at(key), key, v);
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
  } catch (const ConfigError& e) {
    throw DataError(path + ": " + e.what());
  }
}

std::string run_recipe(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / "config.json").string();
  if (!fs::exists(path)) throw DataError(run_dir + ": not a run directory (no config.json)");
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path));
    return j.is_object() && j.contains("recipe") ? j.at("recipe").get<std::string>() : "";
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": " + e.what());
  }
}

// A name that stays inside the directory it is joined to: no separator, not "." or "..", no
// control character (they would end up in paths printed to a terminal), within NAME_MAX.
bool is_single_path_component(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (unsigned char ch : name)
    if (ch == '/' || ch == '\\' || ch < 0x20 || ch == 0x7f) return false;
  return true;
}

namespace {

// The flags that set a key only some architectures have (a hybrid's layer pattern, Dragon's
// attention variants): refused, naming the flag, for an architecture whose key table lacks it.
void validate_architecture_keys(const TrainRunConfig& c, const Architecture& arch) {
  const bool pattern = c.full_attention_interval != 0, variant = !c.differential || !c.ssmax;
  if (c.full_attention_interval < 0 || c.full_attention_interval > 4096)
    throw ConfigError("--full-attention-interval must be in [0, 4096], got " +
                      std::to_string(c.full_attention_interval));
  if (!pattern && !variant) return;
  std::vector<std::string> keys;
  try {
    keys = arch.key_names(shape_metadata(model_shape(c, /*n_vocab=*/1)));
  } catch (const std::invalid_argument& e) {  // a shape the architecture refuses
    throw ConfigError(e.what());
  }
  auto refuse_without = [&](bool given, const std::string& key, const std::string& flag, const std::string& what) {
    if (given && std::find(keys.begin(), keys.end(), key) == keys.end())
      throw ConfigError(flag + " applies to " + what + " (GGUF key " + key + "), not " + c.arch);
  };
  refuse_without(pattern, "full_attention_interval", "--full-attention-interval",
                 "the hybrids of Gated DeltaNet and attention layers");
  refuse_without(!c.differential, "attention.differential", "--no-differential",
                 "architectures with differential attention");
  refuse_without(!c.ssmax, "attention.ssmax", "--no-ssmax", "architectures with Scalable-Softmax");
}

}  // namespace

void validate(const TrainRunConfig& c) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError(what);
  };
  constexpr int64_t kBig = int64_t(1) << 20;
  need(int(!c.corpus.empty()) + int(!c.data_ids.empty()) + int(!c.data.empty()) <= 1,
       "give at most one of a text corpus (--corpus FILE), token ids (--data-ids FILE) or JSONL examples (--data "
       "FILE); none: the built-in corpus");
  need(c.eval_ids.empty() || !c.data_ids.empty(), "--eval-ids goes with --data-ids");
  if (c.init_weights.empty()) {
    const Architecture* arch = find_architecture(c.arch);
    need(arch, "--arch '" + c.arch + "' is not an architecture toy knows (" + architecture_names() + ")");
    need(arch->untrainable.empty(), "--arch " + c.arch + " cannot be trained yet: " + arch->untrainable);
    need(c.d_model >= 1 && c.d_model <= kBig, "--d-model must be in [1, 2^20], got " + std::to_string(c.d_model));
    need(c.n_layer >= 1 && c.n_layer <= 4096, "--layers must be in [1, 4096], got " + std::to_string(c.n_layer));
    need(c.n_head >= 1 && c.n_head <= c.d_model, "--heads must be in [1, d-model], got " + std::to_string(c.n_head));
    need(c.d_model % c.n_head == 0,
         "--d-model " + std::to_string(c.d_model) + " is not divisible by --heads " + std::to_string(c.n_head));
    need(
        arch->variant.positions == Positions::Learned || (c.d_model / c.n_head) % 2 == 0,
        "the head size d-model/heads = " + std::to_string(c.d_model / c.n_head) + " must be even (RoPE rotates pairs)");
    const int64_t kv = c.n_kv_head ? c.n_kv_head : c.n_head;
    need(kv >= 1 && c.n_head % kv == 0,
         "--kv-heads " + std::to_string(c.n_kv_head) + " must divide --heads " + std::to_string(c.n_head));
    need(c.d_ff >= 0 && c.d_ff <= kBig, "--ff must be in [0, 2^20], got " + std::to_string(c.d_ff));
    need(c.rope_base >= 0 && std::isfinite(c.rope_base), "--rope-base must be positive (0: the architecture's)");
    need(c.rms_eps >= 0 && std::isfinite(c.rms_eps), "--rms-eps must be positive (0: the architecture's)");
    need(c.rope_base == 0 || arch->variant.positions != Positions::Learned,
         "--rope-base does not apply to " + c.arch + " (learned positions, no RoPE)");
    const bool moe = arch->variant.ffn == FfnKind::Moe;
    need(moe || (c.n_expert == 0 && c.n_expert_used == 0),
         "--experts and --experts-used apply to mixture-of-experts architectures, not " + c.arch);
    need(c.n_expert >= 0 && c.n_expert <= 1024, "--experts must be in [0, 1024], got " + std::to_string(c.n_expert));
    need(c.n_expert_used >= 0 && c.n_expert_used <= (c.n_expert ? c.n_expert : 1024),
         "--experts-used " + std::to_string(c.n_expert_used) + " must be at most --experts " +
             std::to_string(c.n_expert));
    validate_architecture_keys(c, *arch);
  }
  need(c.context >= 1 && c.context <= kBig, "--context must be in [1, 2^20], got " + std::to_string(c.context));
  need(c.batch >= 1 && c.batch <= kBig, "--batch must be in [1, 2^20], got " + std::to_string(c.batch));
  need(c.grad_accum >= 1 && c.grad_accum <= kBig / c.batch,
       "--grad-accum must be in [1, 2^20 / batch], got " + std::to_string(c.grad_accum));
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
  need(c.log_every >= 1, "--log-every must be at least 1, got " + std::to_string(c.log_every));
  need(c.eval_every >= 0 && c.checkpoint_every >= 0 && c.stop_after >= 0,
       "--eval-every, --checkpoint-every and --stop-after must be ≥ 0");
  need(c.threads >= 0 && c.threads <= 1024, "--threads must be in [0, 1024]");
  need(gguf::file_type(c.save_dtype).has_value(),
       "--save-dtype " + c.save_dtype + " cannot be written (try " + std::string(gguf::file_type_names()) + ")");
  need(!c.recipe.empty(), "empty recipe name");
  if (c.recipe == "lora") {
    need(!c.base.empty(), "the lora recipe needs --base MODEL.gguf");
    need(c.init_weights.empty(), "--init-weights is for full training; the lora recipe takes --base");
    need(c.rank >= 1 && c.rank <= 4096, "--rank must be in [1, 4096], got " + std::to_string(c.rank));
    need(c.alpha > 0 && std::isfinite(c.alpha), "--alpha must be positive");
    need(c.dropout >= 0 && c.dropout < 1, "--dropout must be in [0, 1)");
    need(!c.targets.empty() || !c.init_adapter.empty(), "--targets is empty");
  }
  need(c.donor.empty() == (c.recipe != "warm-start"),
       c.donor.empty() ? "the warm-start recipe needs --donor MODEL.gguf" : "--donor is for the warm-start recipe");
  need(!c.train_embd || c.recipe == "warm-start", "--train-embd is for the warm-start recipe");
  need(c.recipe != "warm-start" || c.init_weights.empty(),
       "--init-weights is for full training; warm-start makes a new model around --donor's embedding");
  need(c.run_id.empty() || is_single_path_component(c.run_id),
       "--run-id must be one directory name inside --runs-dir: not '.' or '..', no '/', '\\' or control "
       "characters, at most 255 bytes");
}

}  // namespace toy::recipes
