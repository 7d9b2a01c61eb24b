// cli/new_templates.h — the files `toy new` writes (the texts are in new_templates.cpp).
#pragma once

#include <string>
#include <vector>

namespace toy::cli {

struct TemplateFile {
  std::string path;  // relative to the project directory
  std::string text;  // with @NAME@, @IDENT@, @VERSION@, @PREFIX@, @BUILD_STEPS@ still in it
};

// An experiment: CMakeLists.txt, main.cpp (build a model, train it on data/corpus.txt),
// config.json, data/corpus.txt, README.md, .gitignore.
const std::vector<TemplateFile>& experiment_template();

// A library depending on toy: CMakeLists.txt, include/NAME/NAME.h, src/NAME.cpp (a primitive
// with its gradient), tests/check.cpp, README.md, .gitignore.
const std::vector<TemplateFile>& library_template();

// An architecture outside toy's tree and the `toy` command line with it registered:
// CMakeLists.txt, main.cpp, arch.cpp, example.card.md, README.md, .gitignore.
const std::vector<TemplateFile>& arch_template();

// The README lines (inside an open sh code block) that install toy and build a project: the
// value of @BUILD_STEPS@, itself with @PREFIX@ in it.
const char* readme_build_steps();

// Where `toy install` installs by default and generated READMEs point: $HOME/.local.
std::string default_install_prefix();

}  // namespace toy::cli
