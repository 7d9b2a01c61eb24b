// cli/common.cpp — shared helpers for the commands.
#include "cli/common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "toy/kernels/kernels.h"

namespace toy::cli {

Loaded load_model_and_tokenizer(const Args& a, size_t model_positional) {
  const std::string path = a.positional(model_positional).value_or(default_model_path());
  if (!std::filesystem::exists(path))
    throw InputError(path + ": no such file" +
                     (a.positional(model_positional) ? "" : " (the embedded default model is missing; pass a MODEL)"));
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

void apply_lora_flags(const Args& a, Model& m) {
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

Flag kv_type_flag() {
  return {"kv-type", FlagType::String, "f32", "KV cache dtype: f32, or f16 (half the memory, as llama.cpp's default)"};
}

}  // namespace toy::cli
