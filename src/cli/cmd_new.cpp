// cli/cmd_new.cpp — `toy new NAME [--template experiment|lib|arch]`: a project that builds against an
// installed toy.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

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

// The project name as a C++ identifier (the library's namespace): '-' becomes '_'.
std::string identifier(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The name becomes a CMake project and target (`name`) and a C++ namespace (`identifier(name)`):
// throws UsageError for a name that would make a project that does not build.
void check_project_name(const std::string& name) {
  if (!std::regex_match(name, std::regex("[A-Za-z][A-Za-z0-9_-]{0,63}")))
    throw UsageError("'" + name + "' is not a project name (a letter, then letters, digits, '_' or '-')");
  // Targets CMake reserves (policy CMP0037) or generates, and toy's own package.
  static const std::set<std::string> cmake_reserved = {
      "all",       "clean",      "help",          "install", "package",    "package_source",
      "test",      "edit_cache", "rebuild_cache", "depend",  "preinstall", "list_install_components",
      "ALL_BUILD", "ZERO_CHECK", "RUN_TESTS",     "INSTALL", "PACKAGE",    "toy"};
  if (cmake_reserved.count(name))
    throw UsageError("'" + name + "' cannot name a project: CMake or toy already uses it as a target name");
  // C++20 keywords and alternative tokens, and the namespaces the standard reserves.
  static const std::set<std::string> cpp_reserved = {
      "alignas",     "alignof",   "and",        "and_eq",    "asm",      "auto",         "bitand",
      "bitor",       "bool",      "break",      "case",      "catch",    "char",         "char8_t",
      "char16_t",    "char32_t",  "class",      "compl",     "concept",  "const",        "consteval",
      "constexpr",   "constinit", "const_cast", "continue",  "co_await", "co_return",    "co_yield",
      "decltype",    "default",   "delete",     "do",        "double",   "dynamic_cast", "else",
      "enum",        "explicit",  "export",     "extern",    "false",    "float",        "for",
      "friend",      "goto",      "if",         "inline",    "int",      "long",         "mutable",
      "namespace",   "new",       "noexcept",   "not",       "not_eq",   "nullptr",      "operator",
      "or",          "or_eq",     "private",    "protected", "public",   "register",     "reinterpret_cast",
      "requires",    "return",    "short",      "signed",    "sizeof",   "static",       "static_assert",
      "static_cast", "struct",    "switch",     "template",  "this",     "thread_local", "throw",
      "true",        "try",       "typedef",    "typeid",    "typename", "union",        "unsigned",
      "using",       "virtual",   "void",       "volatile",  "wchar_t",  "while",        "xor",
      "xor_eq",      "std",       "posix"};
  const std::string ident = identifier(name);
  if (cpp_reserved.count(ident))
    throw UsageError("'" + name + "' cannot name a project: '" + ident +
                     "' is reserved in C++ (it names the namespace)");
  if (ident.find("__") != std::string::npos)
    throw UsageError("'" + name + "' cannot name a project: '" + ident +
                     "' contains '__', which C++ reserves (it names the namespace)");
}

int run(const Args& a) {
  const fs::path dir = *a.positional(0);
  const std::string name = dir.filename().string();
  check_project_name(name);
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw std::runtime_error(dir.string() + " already exists and is not empty");

  const std::string ident = identifier(name);
  const std::string prefix = default_install_prefix();
  const std::vector<std::pair<std::string, std::string>> vars = {{"@BUILD_STEPS@", readme_build_steps()},
                                                                 {"@NAME@", name},
                                                                 {"@IDENT@", ident},
                                                                 {"@VERSION@", TOY_VERSION},
                                                                 {"@PREFIX@", prefix}};

  const std::string kind = a.flag("lib") ? "lib" : a.str("template");
  const std::vector<TemplateFile>* files = kind == "experiment" ? &experiment_template()
                                           : kind == "lib"      ? &library_template()
                                           : kind == "arch"     ? &arch_template()
                                                                : nullptr;
  if (!files) throw UsageError("--template " + kind + ": experiment, lib or arch");
  for (const TemplateFile& f : *files) {
    const fs::path p = dir / substitute(f.path, vars);
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << substitute(f.text, vars);
    if (!out) throw std::runtime_error(p.string() + ": cannot write");
  }

  std::cout << "created "
            << (kind == "lib"    ? "library"
                : kind == "arch" ? "architecture"
                                 : "experiment")
            << " " << dir.string() << "/\n\n"
            << "  toy install --prefix " << prefix << "        # once: the library and its CMake package\n"
            << "  cd " << dir.string() << "\n"
            << "  cmake -S . -B build -DCMAKE_PREFIX_PATH=" << prefix << "\n"
            << "  cmake --build build\n"
            << (kind == "lib"    ? "  ctest --test-dir build --output-on-failure\n"
                : kind == "arch" ? "  ./build/" + name + " init --card example.card.md -o example.gguf\n"
                                 : "  ./build/" + name + " config.json\n");
  return kOk;
}

Registrar reg({
    .name = "new",
    .summary = "create a project that uses toy: an experiment (train a model), a library, or an architecture",
    .positionals = {{"NAME", "project directory to create; its last component names the project"}},
    .flags =
        {{"template", FlagType::String, "experiment",
          "experiment (train a model), lib (a primitive with its gradient, and a test) or arch (a new architecture "
          "and your own `toy` with it)"},
         {"lib", FlagType::Bool, "", "the same as --template lib"}},
    .run = run,
    .details =
        "The experiment has CMakeLists.txt, main.cpp (builds a Llama-style model and trains it on data/corpus.txt),\n"
        "config.json and a README; both kinds find toy with find_package(toy) after `toy install`.\n"
        "The architecture project has arch.cpp (a new architecture described once) and main.cpp (toy's command line).\n"
        "examples:\n  toy new my-experiment\n  toy new my-ops --lib\n  toy new my-arch --template arch",
});

}  // namespace
}  // namespace toy::cli
