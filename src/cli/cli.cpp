// cli/cli.cpp — parsing, help and manifest for the declarative command tables.
#include "cli/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "toy/engines/events.h"

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
  auto find = [&](const std::string& name) -> const Flag* {
    for (const Flag& f : c.flags)
      if (f.name == name) return &f;
    return nullptr;
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
    std::string name, value;
    bool has_value = false;
    if (s.rfind("--", 0) == 0) {
      name = s.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else {
      for (const Flag& f : c.flags)
        if (s.size() == 2 && f.short_name == s[1]) name = f.name;
      if (name.empty())
        throw UsageError("unknown option '" + s + "' for 'toy " + c.name + "' (see toy " + c.name + " --help)");
    }
    const Flag* f = find(name);
    if (!f)
      throw UsageError("unknown option '--" + name + "' for 'toy " + c.name + "' (see toy " + c.name + " --help)");
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
    if (f.type != FlagType::Bool)
      left += " " + std::string(type_name(f.type) == std::string("path") ? "PATH"
                                : f.type == FlagType::String             ? "TEXT"
                                : f.type == FlagType::Int                ? "N"
                                                                         : "X");
    left += std::string(left.size() < 30 ? 30 - left.size() : 1, ' ');
    s += left + f.help;
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
  m["exit_codes"] = {{"0", "success"},         {"1", "runtime failure"},
                     {"2", "usage error"},     {"3", "invalid input file"},
                     {"4", "network failure"}, {"130", "interrupted"}};
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
      j["flags"].push_back(fj);
    }
    cmds.push_back(j);
  }
  m["commands"] = cmds;
  return m.dump(2);
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
