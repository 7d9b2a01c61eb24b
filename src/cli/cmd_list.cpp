// cli/cmd_list.cpp — `toy list`: the GGUF models on this machine (HF cache, Ollama, LM Studio, ./models).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/common.h"
#include "toy/hub/hub.h"

namespace toy::cli {
namespace {

std::string human_count(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
  else if (n >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  else if (n >= 1000ull)
    std::snprintf(buf, sizeof buf, "%.1fK", double(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)n);
  return buf;
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / (1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1ull << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

int run(const Args& a) {
  std::vector<hub::Location> where = hub::search_locations();
  if (a.has("dir")) {
    const std::string dir = a.str("dir");
    if (!std::filesystem::is_directory(dir)) throw UsageError("--dir " + dir + ": not a directory");
    where = {{"local", dir}};
  }
  const hub::Scan s = hub::scan(where);

  if (a.flag("json")) {
    nlohmann::ordered_json j;
    j["models"] = nlohmann::ordered_json::array();
    for (const auto& m : s.models)
      j["models"].push_back({{"name", m.name},
                             {"source", m.source},
                             {"architecture", m.architecture},
                             {"parameters", m.parameters},
                             {"dtype", m.dtype},
                             {"bytes", m.bytes},
                             {"path", m.path}});
    j["skipped"] = nlohmann::ordered_json::array();
    for (const auto& k : s.skipped) j["skipped"].push_back({{"path", k.path}, {"reason", k.reason}});
    j["searched"] = nlohmann::ordered_json::array();
    for (const auto& l : where)
      j["searched"].push_back({{"source", l.source}, {"dir", l.dir}, {"exists", std::filesystem::is_directory(l.dir)}});
    std::cout << json_text(j) << "\n";
    return kOk;
  }

  if (!a.flag("quiet"))
    for (const auto& k : s.skipped)
      std::cerr << "note: skipped " << for_terminal(k.path) << ": " << for_terminal(k.reason) << "\n";
  if (s.models.empty()) {
    std::cerr << "no GGUF models found; looked in:\n";
    for (const auto& l : where)
      std::cerr << "  " << l.source << "  " << l.dir << (std::filesystem::is_directory(l.dir) ? "" : "  (absent)")
                << "\n";
    std::cerr << "get one with: toy fetch ORG/NAME FILE.gguf\n";
    return kOk;
  }
  // Names, paths and metadata come from files: shown with their control characters escaped.
  std::vector<hub::FoundModel> shown = s.models;
  for (auto& m : shown)
    for (std::string* field : {&m.name, &m.architecture, &m.dtype, &m.path}) *field = for_terminal(*field);
  size_t wn = 4, wa = 4, wd = 5;
  for (const auto& m : shown) {
    wn = std::max(wn, m.name.size());
    wa = std::max(wa, m.architecture.size());
    wd = std::max(wd, m.dtype.size());
  }
  std::printf("%-*s  %-8s  %-*s  %7s  %-*s  %10s  %s\n", int(wn), "NAME", "SOURCE", int(wa), "ARCH", "PARAMS", int(wd),
              "DTYPE", "SIZE", "PATH");
  for (const auto& m : shown)
    std::printf("%-*s  %-8s  %-*s  %7s  %-*s  %10s  %s\n", int(wn), m.name.c_str(), m.source.c_str(), int(wa),
                m.architecture.c_str(), human_count(m.parameters).c_str(), int(wd), m.dtype.c_str(),
                human_bytes(m.bytes).c_str(), m.path.c_str());
  return kOk;
}

Registrar reg({
    .name = "list",
    .summary = "find GGUF models on this machine: Hugging Face cache, Ollama, LM Studio, ./models, ./data",
    .positionals = {},
    .flags = {{"json", FlagType::Bool, "", "print one JSON object: models, skipped files, places searched"},
              {"dir", FlagType::Path, "", "search only this directory (recursively)"},
              {"quiet", FlagType::Bool, "", "do not print notes about skipped files", 'q'}},
    .run = run,
    .details = "Searches $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub), $OLLAMA_MODELS (else\n"
               "~/.ollama/models), ~/.lmstudio/models, ~/.cache/lm-studio/models, ./models and ./data.\n"
               "Unreadable, broken or non-GGUF files are skipped with a note on stderr.\n"
               "example: toy list --json",
});

}  // namespace
}  // namespace toy::cli
