// cli/common.cpp — shared helpers for the commands.
#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "toy/hub/hub.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/device.h"

namespace toy::cli {

bool model_given(const Args& a, size_t model_positional) { return a.positional(model_positional) || a.has("model"); }

std::string model_argument(const Args& a, size_t model_positional) {
  if (a.positional(model_positional) && a.has("model"))
    throw UsageError("give the model once: as MODEL or as -m/--model, not both");
  if (a.positional(model_positional)) return resolve_model(*a.positional(model_positional));
  if (a.has("model")) return resolve_model(a.str("model"));
  const std::string path = default_model_path();
  if (!std::filesystem::exists(path))
    throw InputError(path + ": no such file (the embedded default model is missing; pass a MODEL)");
  return path;
}

Loaded load_model_and_tokenizer(const Args& a, size_t model_positional) {
  const std::string path = model_argument(a, model_positional);
  Loaded l;
  l.file = gguf::GgufFile::open(path);
  l.model = load_model(l.file);
  if (l.file->has("tokenizer.ggml.tokens")) {
    try {
      l.tokenizer = Tokenizer::from_gguf(*l.file);
    } catch (const TokenizerError& e) {
      throw InputError(path + ": " + e.what());
    }
    if (l.tokenizer->n_vocab() < l.model->config().n_vocab)
      throw InputError(path + ": the vocabulary has " + std::to_string(l.tokenizer->n_vocab()) +
                       " tokens but the model has " + std::to_string(l.model->config().n_vocab) + " outputs");
  }
  return l;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of(", ", pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    if (!item.empty()) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || v < 0 || v > INT32_MAX) throw UsageError("--ids: '" + item + "' is not a token id");
      ids.push_back(int32_t(v));
    }
    pos = end + 1;
  }
  return ids;
}

void apply_threads(const Args& a) {
  const long long n = a.integer("threads");
  if (n < 0 || n > 1024) throw UsageError("--threads must be between 0 and 1024");
  if (n > 0) kernels::set_num_threads(int(n));
}

DType kv_type(const Args& a) {
  const std::string t = a.str("kv-type");
  if (t == "f32") return DType::F32;
  if (t == "f16") return DType::F16;
  throw UsageError("--kv-type must be f32 or f16");
}

Device chosen_device(const Args& a) {
  const long long ngl = a.integer("n-gpu-layers");
  if (ngl < -1) throw UsageError("-ngl must be 0 (the CPU), a number of layers, or -1 (all)");
  const char* env = std::getenv("TOY_DEVICE");
  const std::string text = a.has("device") ? a.str("device") : env && *env ? env : ngl != 0 ? "vulkan:0" : "cpu";
  Device d;
  try {
    d = parse_device(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(a.has("device") ? "--device" : "TOY_DEVICE") + ": " + e.what());
  }
  if (a.has("n-gpu-layers") && ngl == 0 && d != Device::cpu())
    throw UsageError("-ngl 0 keeps every layer on the CPU, but the device is " + to_string(d) +
                     ": drop one of the two");
  return d;
}

void place_model(const Args& a, Model& m) {
  const Device d = chosen_device(a);
  if (d == Device::cpu()) return;
  const long long ngl = a.integer("n-gpu-layers");
  if (ngl > 0 && ngl < m.config().n_layer)
    std::fprintf(stderr, "note: -ngl %lld: toy puts all %lld layers on the device (no partial offload)\n", ngl,
                 (long long)m.config().n_layer);
  m.to(d);
  std::fprintf(stderr, "running on %s\n", device_ops(d)->name().c_str());
}

std::string for_terminal(std::string_view text, bool multiline) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](const char* format, unsigned value) {
    char buf[8];
    std::snprintf(buf, sizeof buf, format, value);
    out += buf;
  };
  for (size_t i = 0; i < text.size();) {
    const auto byte = [&](size_t k) { return i + k < text.size() ? uint8_t(text[i + k]) : uint8_t(0); };
    const uint8_t c = byte(0);
    if (c < 0x80) {  // ASCII
      if ((c < 0x20 && !(multiline && (c == '\n' || c == '\t'))) || c == 0x7f)
        escape("\\x%02x", c);
      else
        out += char(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation bytes 10xxxxxx, no
    // overlong forms, no surrogates, nothing past U+10FFFF.
    const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    uint32_t cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    bool ok = n > 0;
    for (size_t k = 1; ok && k < n; ++k) {
      ok = (byte(k) & 0xc0) == 0x80;
      cp = cp << 6 | (byte(k) & 0x3f);
    }
    ok = ok && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
         !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok) {
      out += "\xef\xbf\xbd";  // U+FFFD for the lead byte; resynchronise on the next
      ++i;
    } else if (cp <= 0x9f) {  // C1 controls (U+0080..U+009F): CSI and OSC on some terminals
      escape("\\u%04x", cp);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `file`'s name carries quantization `quant` as one of its '-', '.' or '_' separated
// parts: "smollm2-135m-q4_k_m.gguf" has "Q4_K_M"; "q4_k_m_l" or "xq4_k_m" do not.
bool has_quant(const std::string& file, const std::string& quant) {
  const std::string name = lower(std::filesystem::path(file).filename().string()), q = lower(quant);
  for (size_t at = name.find(q); at != std::string::npos; at = name.find(q, at + 1)) {
    const auto boundary = [&](size_t i) { return i >= name.size() || name[i] == '-' || name[i] == '.'; };
    if ((at == 0 || boundary(at - 1) || name[at - 1] == '_') && boundary(at + q.size())) return true;
  }
  return false;
}

// The model files among a repository's `files` that `quant` selects ("": every one); multimodal
// projectors (mmproj-*) and the later shards of a split model are never the model to run.
std::vector<std::string> select_gguf(const std::vector<std::string>& files, const std::string& quant) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    const std::string name = lower(std::filesystem::path(f).filename().string());
    if (name.size() < 5 || name.substr(name.size() - 5) != ".gguf" || name.rfind("mmproj", 0) == 0) continue;
    if (name.find("-of-") != std::string::npos && name.find("-00001-of-") == std::string::npos) continue;
    if (quant.empty() || has_quant(f, quant)) out.push_back(f);
  }
  return out;
}

[[noreturn]] void ambiguous(const std::string& ref, const std::vector<std::string>& candidates) {
  std::string msg = "'" + ref + "' matches " + std::to_string(candidates.size()) + " models; name one of them:";
  for (const std::string& c : candidates) msg += "\n  " + for_terminal(c);
  throw InputError(msg);
}

// `hf:org/repo[:QUANT]` or `org/repo:QUANT` -> the file, from the cache or fetched into it.
std::string resolve_hub(const std::string& ref, const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string repo = spec.substr(0, colon), quant = colon == std::string::npos ? "" : spec.substr(colon + 1);
  try {
    hub::repo_folder(repo);
  } catch (const hub::HubError& e) {
    throw UsageError(ref + ": " + e.what());
  }
  // In the cache already: no network needed.
  std::vector<std::string> cached;
  for (const hub::FoundModel& m : hub::scan({{"hf", hub::hf_hub_cache()}}).models)
    if (m.name.rfind(repo + "/", 0) == 0 && !select_gguf({m.path}, quant).empty()) cached.push_back(m.path);
  if (cached.size() == 1) return cached[0];
  if (cached.size() > 1) ambiguous(ref, cached);
  hub::FetchOptions o;
  o.progress = true;
  const std::string file = hub_file(ref, repo, quant, o);
  std::cerr << "fetching " << repo << "/" << for_terminal(file) << "\n";
  try {
    return hub::fetch(repo, file, o).path;
  } catch (const hub::HubError& e) {
    if (e.kind == hub::HubError::Local) throw std::runtime_error(e.what());
    throw NetworkError(ref + ": " + e.what());
  }
}

}  // namespace

std::string hub_file(const std::string& ref, const std::string& repo, const std::string& quant,
                     const hub::FetchOptions& o) {
  std::vector<std::string> files;
  try {
    files = select_gguf(hub::list_files(repo, o), quant);
  } catch (const hub::HubError& e) {
    if (e.kind == hub::HubError::Local) throw UsageError(ref + ": " + e.what());
    throw NetworkError(ref + ": " + e.what());
  }
  if (files.empty())
    throw InputError(ref + ": " + repo + " has no GGUF file" + (quant.empty() ? "" : " with quantization " + quant));
  if (files.size() > 1) ambiguous(ref, files);
  return files[0];
}

std::string resolve_model(const std::string& ref) {
  namespace fs = std::filesystem;
  if (ref.empty()) throw UsageError("the model reference is empty");
  if (fs::exists(ref)) return ref;
  if (ref.rfind("hf:", 0) == 0) return resolve_hub(ref, ref.substr(3));
  // A name from `toy list`: exact, then as a prefix ("org/repo", "llama3.2" for "llama3.2:latest").
  const hub::Scan found = hub::scan();
  std::vector<std::string> names, prefixed;
  for (const hub::FoundModel& m : found.models) {
    if (m.name == ref) return m.path;
    names.push_back(m.name);
    if (m.name.rfind(ref + "/", 0) == 0 || m.name.rfind(ref + ":", 0) == 0) prefixed.push_back(m.name);
  }
  const size_t slash = ref.find('/'), colon = ref.find(':');
  if (prefixed.empty() && slash != std::string::npos && colon != std::string::npos && slash < colon)
    return resolve_hub(ref, ref);  // org/repo:QUANT
  auto path_of = [&](const std::string& name) {
    for (const hub::FoundModel& m : found.models)
      if (m.name == name) return m.path;
    return std::string();
  };
  if (prefixed.size() == 1) return path_of(prefixed[0]);
  if (prefixed.size() > 1) {
    // "llama3.2" with "llama3.2:latest" among its tags: Ollama's default tag.
    for (const std::string& n : prefixed)
      if (n == ref + ":latest") return path_of(n);
    ambiguous(ref, prefixed);
  }
  const std::string near = closest(ref, names);
  throw InputError(ref + ": no such file, and no model of that name in `toy list`" +
                   (near.empty() ? std::string() : "; did you mean '" + for_terminal(near) + "'?") +
                   (slash != std::string::npos ? " (for the Hugging Face hub: hf:" + ref + ")" : ""));
}

Flag model_flag() { return {"model", FlagType::String, "", "the model, as MODEL (llama.cpp's -m)", 'm'}; }

std::vector<ScaledLora> read_lora_flags(const Args& a) {
  std::vector<ScaledLora> loras;
  auto add = [&](const std::string& path, float scale) {
    if (!std::filesystem::exists(path)) throw InputError(path + ": no such file");
    loras.push_back({std::make_shared<const LoraAdapter>(read_lora(path)), scale});
  };
  for (const std::string& path : a.all("lora")) add(path, 1.0f);
  const std::vector<std::string> scaled = a.all("lora-scaled");  // FILE, SCALE, FILE, SCALE, …
  for (size_t i = 0; i + 1 < scaled.size(); i += 2) {
    size_t used = 0;
    float s = 0;
    try {
      s = std::stof(scaled[i + 1], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != scaled[i + 1].size() || !std::isfinite(s))
      throw UsageError("--lora-scaled " + scaled[i] + ": '" + scaled[i + 1] + "' is not a finite scale");
    add(scaled[i], s);
  }
  return loras;
}

void apply_lora_flags(const Args& a, Model& m) {
  const std::vector<ScaledLora> loras = read_lora_flags(a);
  if (!loras.empty()) apply_loras(m, loras);
}

Flag lora_flag() {
  Flag f{"lora", FlagType::Path, "", "a LoRA adapter (llama.cpp's GGUF format), applied at run time; repeatable"};
  f.repeatable = true;
  return f;
}

Flag lora_scaled_flag() {
  Flag f{"lora-scaled", FlagType::Path, "", "FILE SCALE: a LoRA adapter with its output scaled; repeatable"};
  f.arity = 2;
  f.repeatable = true;
  return f;
}

Flag threads_flag() { return {"threads", FlagType::Int, "0", "CPU threads (0: all cores, or $TOY_THREADS)", 't'}; }

Flag device_flag() {
  return {"device", FlagType::String, "cpu",
          "where the model runs: cpu, vulkan or vulkan:N (toy devices lists them; default $TOY_DEVICE, else cpu)"};
}

Flag gpu_layers_flag() {
  return {"n-gpu-layers",
          FlagType::Int,
          "0",
          "llama.cpp's habit: N > 0 (or -1) runs the model on vulkan:0 unless --device says otherwise; all "
          "layers go to the device (no partial offload)",
          0,
          {"-ngl", "--gpu-layers"}};
}

Flag kv_type_flag() {
  return {"kv-type", FlagType::String, "f32", "KV cache dtype: f32, or f16 (half the memory, as llama.cpp's default)"};
}

}  // namespace toy::cli
