// cli/cli.cpp — parsing, help and manifest for the declarative command tables.
#include "cli/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "toy/engines/distributed.h"
#include "toy/engines/events.h"
#include "toy/tensor/device.h"

namespace toy::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
const char* type_name(FlagType t) {
  switch (t) {
    case FlagType::Bool:
      return "bool";
    case FlagType::Int:
      return "int";
    case FlagType::Float:
      return "float";
    case FlagType::String:
      return "string";
    case FlagType::Path:
      return "path";
  }
  return "?";
}
}  // namespace

void register_command(Command c) {
  registry().push_back(std::move(c));
  std::sort(registry().begin(), registry().end(), [](const Command& a, const Command& b) { return a.name < b.name; });
}
const std::vector<Command>& commands() { return registry(); }

std::string Args::str(const std::string& f) const {
  auto it = values_.find(f);
  if (it == values_.end()) throw std::logic_error("flag --" + f + " is not declared");
  return it->second;
}
long long Args::integer(const std::string& f) const {
  const std::string v = str(f);
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw UsageError("--" + f + ": expected an integer, got '" + v + "'");
  }
}
double Args::number(const std::string& f) const {
  const std::string v = str(f);
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    // No "nan", "inf" or 1e999; the flags are float32 parameters, so nothing beyond float's range either.
    if (used != v.size() || !std::isfinite(x) || std::abs(x) > std::numeric_limits<float>::max())
      throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    throw UsageError("--" + f + ": expected a finite number, got '" + v + "'");
  }
}
bool Args::flag(const std::string& f) const { return str(f) == "true"; }
std::vector<std::string> Args::all(const std::string& f) const {
  auto it = all_.find(f);
  return it == all_.end() ? std::vector<std::string>() : it->second;
}

Args parse_args(const Command& c, const std::vector<std::string>& argv) {
  Args a;
  for (const Flag& f : c.flags) a.values_[f.name] = f.type == FlagType::Bool && f.def.empty() ? "false" : f.def;
  // A spelling as typed ("--ctx-size", "-c", "-ngl") -> its flag; null when unknown.
  auto find = [&](const std::string& spelling) -> const Flag* {
    for (const Flag& f : c.flags) {
      if (spelling == "--" + f.name || (f.short_name && spelling == std::string("-") + f.short_name)) return &f;
      for (const std::string& alias : f.aliases)
        if (spelling == alias) return &f;
    }
    return nullptr;
  };
  auto unknown = [&](const std::string& spelling) {
    std::vector<std::string> spellings;
    for (const Flag& f : c.flags) {
      spellings.push_back("--" + f.name);
      spellings.insert(spellings.end(), f.aliases.begin(), f.aliases.end());
    }
    const std::string near = closest(spelling, spellings);
    return UsageError("unknown option '" + spelling + "' for 'toy " + c.name + "'" +
                      (near.empty() ? "" : "; did you mean '" + near + "'?") + " (see toy " + c.name + " --help)");
  };
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (only_positional || s.size() < 2 || s[0] != '-' ||
        (s.size() > 1 && std::isdigit(static_cast<unsigned char>(s[1])))) {
      a.pos_.push_back(s);
      continue;
    }
    if (s == "--") {
      only_positional = true;
      continue;
    }
    std::string spelling = s, value;
    bool has_value = false;
    if (auto eq = s.find('='); s.rfind("--", 0) == 0 && eq != std::string::npos) {
      spelling = s.substr(0, eq);
      value = s.substr(eq + 1);
      has_value = true;
    }
    const Flag* f = find(spelling);
    if (!f) throw unknown(spelling);
    const std::string& name = f->name;
    if (f->type == FlagType::Bool) {
      if (has_value && value != "true" && value != "false") throw UsageError("--" + name + ": expected true or false");
      a.values_[name] = has_value ? value : "true";
    } else {
      if (has_value && f->arity != 1) throw UsageError("--" + name + " takes " + std::to_string(f->arity) + " values");
      if (!has_value) {
        if (i + size_t(f->arity) >= argv.size())
          throw UsageError("--" + name +
                           (f->arity == 1 ? " needs a value" : " needs " + std::to_string(f->arity) + " values"));
        value = argv[++i];
      }
      a.values_[name] = value;
      a.all_[name].push_back(value);
      for (int k = 1; k < f->arity; ++k) a.all_[name].push_back(argv[++i]);
    }
    a.given_[name] = true;
  }
  size_t required = 0;
  for (const Positional& p : c.positionals) required += p.required;
  if (a.pos_.size() < required) {
    std::string missing;
    for (size_t k = a.pos_.size(); k < c.positionals.size(); ++k)
      if (c.positionals[k].required) missing += (missing.empty() ? "" : ", ") + c.positionals[k].name;
    throw UsageError("'toy " + c.name + "' needs " + missing + " (see toy " + c.name + " --help)");
  }
  if (a.pos_.size() > c.positionals.size())
    throw UsageError("'toy " + c.name + "': unexpected argument '" + a.pos_[c.positionals.size()] + "'");
  // Validate numeric flags early so a typo is a usage error, not a failure later.
  for (const Flag& f : c.flags) {
    if (a.values_[f.name].empty()) continue;
    if (f.type == FlagType::Int) a.integer(f.name);
    if (f.type == FlagType::Float) a.number(f.name);
  }
  return a;
}

std::string help_text(const Command& c) {
  std::string s = "usage: toy " + c.name;
  for (const Positional& p : c.positionals) s += p.required ? " " + p.name : " [" + p.name + "]";
  s += " [options]\n\n" + c.summary + "\n";
  if (!c.positionals.empty()) {
    s += "\narguments:\n";
    for (const Positional& p : c.positionals)
      s += "  " + p.name + std::string(p.name.size() < 22 ? 22 - p.name.size() : 1, ' ') + p.help + "\n";
  }
  s += "\noptions:\n";
  for (const Flag& f : c.flags) {
    std::string left = "  ";
    left += f.short_name ? std::string("-") + f.short_name + ", " : "    ";
    left += "--" + f.name;
    for (const std::string& alias : f.aliases) left += ", " + alias;
    if (f.type != FlagType::Bool)
      left += " " + std::string(type_name(f.type) == std::string("path") ? "PATH"
                                : f.type == FlagType::String             ? "TEXT"
                                : f.type == FlagType::Int                ? "N"
                                                                         : "X");
    s += left + (left.size() < 30 ? std::string(30 - left.size(), ' ') : "\n" + std::string(30, ' ')) + f.help;
    if (f.type != FlagType::Bool && !f.def.empty()) s += " (default: " + f.def + ")";
    s += "\n";
  }
  s += "  -h, --help                  show this help\n";
  if (!c.details.empty()) s += "\n" + c.details + "\n";
  return s;
}

std::string manifest_json() {
  nlohmann::ordered_json m;
  m["name"] = "toy";
  m["version"] = TOY_VERSION;
  m["event_schema"] = toy::kEventSchema;
  m["exit_codes"] = {
      {"0", "success"},         {"1", "runtime failure"},    {"2", "usage error"},  {"3", "invalid input file"},
      {"4", "network failure"}, {"5", "device unavailable"}, {"130", "interrupted"}};
  nlohmann::ordered_json cmds = nlohmann::ordered_json::array();
  for (const Command& c : commands()) {
    nlohmann::ordered_json j;
    j["name"] = c.name;
    j["summary"] = c.summary;
    j["positionals"] = nlohmann::ordered_json::array();
    for (const Positional& p : c.positionals)
      j["positionals"].push_back({{"name", p.name}, {"help", p.help}, {"required", p.required}});
    j["flags"] = nlohmann::ordered_json::array();
    for (const Flag& f : c.flags) {
      nlohmann::ordered_json fj{{"name", "--" + f.name},
                                {"type", type_name(f.type)},
                                {"default", f.type == FlagType::Bool && f.def.empty() ? "false" : f.def},
                                {"help", f.help}};
      if (f.short_name) fj["short"] = std::string("-") + f.short_name;
      if (!f.aliases.empty()) fj["aliases"] = f.aliases;
      j["flags"].push_back(fj);
    }
    cmds.push_back(j);
  }
  m["commands"] = cmds;
  return m.dump(2);
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  // Levenshtein distance, one row at a time.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
        diagonal = up;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const std::string& c : candidates)
    if (const size_t d = distance(word, c); d < best_distance) {
      best = c;
      best_distance = d;
    }
  return best;
}

void check_environment() {
  auto value = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  if (auto v = value("TOY_THREADS")) {
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(*v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v->size() || n < 1 || n > 1024)
      throw UsageError("TOY_THREADS='" + *v + "': expected a number of threads between 1 and 1024 (or unset it)");
  }
  if (auto v = value("TOY_SIMD"); v && *v != "scalar" && *v != "avx2" && *v != "avx512vnni")
    throw UsageError("TOY_SIMD='" + *v +
                     "': expected scalar, avx2 or avx512vnni (or unset it for the best the CPU has)");
  if (auto v = value("TOY_FLOAT_TILE"); v && *v != "avx2" && *v != "avx512")
    throw UsageError("TOY_FLOAT_TILE='" + *v +
                     "': expected avx2 or avx512 (or unset it: the kernels time both at first use)");
  if (auto v = value("TOY_DEVICE")) try {
      parse_device(*v);
    } catch (const std::invalid_argument& e) {
      throw UsageError("TOY_DEVICE='" + *v + "': " + e.what() + " (or unset it for the CPU)");
    }
  if (auto v = value("TOY_DEFAULT_MODEL"); v && v->empty())
    throw UsageError("TOY_DEFAULT_MODEL is set but empty: set it to a GGUF file, or unset it");
  if (auto v = value("HF_ENDPOINT"); v && v->rfind("http://", 0) != 0 && v->rfind("https://", 0) != 0)
    throw UsageError("HF_ENDPOINT='" + *v + "': expected an http:// or https:// URL");
  try {
    exchange_options_from_env();  // TOY_GRAD_BUCKET, TOY_GRAD_OVERLAP (docs/distributed.md)
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
}

std::string default_model_path() {
  if (const char* env = std::getenv("TOY_DEFAULT_MODEL")) return env;
  namespace fs = std::filesystem;
  for (const fs::path& p :
       {fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf", fs::path("models/toy-stories.gguf")})
    if (fs::exists(p)) return p.string();
  return (fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf").string();
}

}  // namespace toy::cli
