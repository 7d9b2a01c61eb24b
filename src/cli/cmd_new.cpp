// cli/cmd_new.cpp — `toy new NAME [--lib]`: a project that builds against an installed toy.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "cli/cli.h"
#include "cli/new_templates.h"

namespace toy::cli {
namespace {

namespace fs = std::filesystem;

std::string substitute(std::string text, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [key, value] : vars)
    for (size_t at = 0; (at = text.find(key, at)) != std::string::npos; at += value.size())
      text.replace(at, key.size(), value);
  return text;
}

int run(const Args& a) {
  const fs::path dir = *a.positional(0);
  const std::string name = dir.filename().string();
  if (!std::regex_match(name, std::regex("[A-Za-z][A-Za-z0-9_-]{0,63}")))
    throw UsageError("'" + name + "' is not a project name (a letter, then letters, digits, '_' or '-')");
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw std::runtime_error(dir.string() + " already exists and is not empty");

  std::string ident = name;
  for (char& c : ident)
    if (c == '-') c = '_';
  const std::string prefix = default_install_prefix();
  const std::vector<std::pair<std::string, std::string>> vars = {{"@BUILD_STEPS@", readme_build_steps()},
                                                                 {"@NAME@", name},
                                                                 {"@IDENT@", ident},
                                                                 {"@VERSION@", TOY_VERSION},
                                                                 {"@PREFIX@", prefix}};

  const bool lib = a.flag("lib");
  for (const TemplateFile& f : lib ? library_template() : experiment_template()) {
    const fs::path p = dir / substitute(f.path, vars);
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << substitute(f.text, vars);
    if (!out) throw std::runtime_error(p.string() + ": cannot write");
  }

  std::cout << "created " << (lib ? "library" : "experiment") << " " << dir.string() << "/\n\n"
            << "  toy install --prefix " << prefix << "        # once: the library and its CMake package\n"
            << "  cd " << dir.string() << "\n"
            << "  cmake -S . -B build -DCMAKE_PREFIX_PATH=" << prefix << "\n"
            << "  cmake --build build\n"
            << (lib ? "  ctest --test-dir build --output-on-failure\n" : "  ./build/" + name + " config.json\n");
  return kOk;
}

Registrar reg({
    .name = "new",
    .summary = "create a project that uses toy: an experiment (train a model) or, with --lib, a library",
    .positionals = {{"NAME", "project directory to create; its last component names the project"}},
    .flags =
        {{"lib", FlagType::Bool, "",
          "create a library depending on toy (a primitive with its gradient, and a test) instead of an experiment"}},
    .run = run,
    .details =
        "The experiment has CMakeLists.txt, main.cpp (builds a Llama-style model and trains it on data/corpus.txt),\n"
        "config.json and a README; both kinds find toy with find_package(toy) after `toy install`.\n"
        "examples:\n  toy new my-experiment\n  toy new my-ops --lib",
});

}  // namespace
}  // namespace toy::cli
