// tests/test_layers.cpp — the layers are enforced as documented.
//
// CMakeLists.txt's toy_layer(...) calls are the one table of which layer may use which: CMake
// writes it to <build>/toy_layers.txt ("engines: archs tokenizer", one line per layer), and here
//   - every `#include "toy/<layer>/..."` in src/toy/<layer>/ must name the layer itself or one it
//     depends on, directly or through others (an upward or sideways include fails, even when the
//     link happens to succeed);
//   - the table names every directory under src/toy/;
//   - the layer list in docs/architecture.md names exactly the directories under src/toy/ and src/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"

namespace fs = std::filesystem;

namespace {

using Table = std::map<std::string, std::set<std::string>>;  // layer -> layers it links directly

Table layer_table() {
  std::ifstream in(fs::path(TOY_BINARY_DIR) / "toy_layers.txt");
  EXPECT_TRUE(in) << "toy_layers.txt is missing from the build directory (written by CMakeLists.txt)";
  Table t;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream deps(line.substr(colon + 1));
    auto& allowed = t[line.substr(0, colon)];
    for (std::string d; deps >> d;) allowed.insert(d);
  }
  return t;
}

// Everything `layer` may use: what it links, and what those link, and so on.
std::set<std::string> reachable(const Table& t, const std::string& layer) {
  std::set<std::string> seen;
  std::vector<std::string> todo{layer};
  while (!todo.empty()) {
    const std::string l = todo.back();
    todo.pop_back();
    if (!seen.insert(l).second) continue;
    if (auto it = t.find(l); it != t.end()) todo.insert(todo.end(), it->second.begin(), it->second.end());
  }
  return seen;
}

std::set<std::string> directories(const fs::path& dir) {
  std::set<std::string> r;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) r.insert(e.path().filename().string());
  return r;
}

// "io/x.h:3: io includes toy/engines/" for every include under root/<layer>/ that `t` does not allow.
std::vector<std::string> upward_includes(const Table& t, const fs::path& root, int* checked) {
  const std::regex include(R"re(^\s*#\s*include\s*"toy/([A-Za-z0-9_]+)/)re");
  std::vector<std::string> bad;
  for (const auto& [layer, deps] : t) {
    const std::set<std::string> allowed = reachable(t, layer);
    if (!fs::exists(root / layer)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path());
      int line_no = 0;
      for (std::string line; std::getline(in, line);) {
        ++line_no;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        ++*checked;
        if (!allowed.count(m[1]))
          bad.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(line_no) + ": " + layer +
                        " includes toy/" + m[1].str() + "/");
      }
    }
  }
  return bad;
}

// The names in the first fenced block of `markdown` that starts with "tensor/": "tensor", "io", ...
std::set<std::string> documented_layers(const fs::path& markdown) {
  std::ifstream in(markdown);
  std::vector<std::vector<std::string>> blocks;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      inside = !inside;
      if (inside) blocks.emplace_back();
    } else if (inside) {
      blocks.back().push_back(line);
    }
  }
  for (const auto& b : blocks) {
    if (b.empty() || b[0].rfind("tensor/", 0) != 0) continue;
    std::set<std::string> names;
    for (const auto& line : b) names.insert(line.substr(0, line.find('/')));
    return names;
  }
  return {};
}

const fs::path kSource = fs::path(TOY_SOURCE_DIR) / "src";

}  // namespace

TEST(Layers, TableNamesEveryLayerDirectory) {
  const Table t = layer_table();
  std::set<std::string> layers;
  for (const auto& [layer, deps] : t) {
    layers.insert(layer);
    for (const auto& d : deps) EXPECT_TRUE(t.count(d)) << layer << " depends on " << d << ", which is not a layer";
  }
  EXPECT_EQ(layers, directories(kSource / "toy"));
}

TEST(Layers, IncludesPointOnlyDownTheTable) {
  int checked = 0;
  for (const std::string& v : upward_includes(layer_table(), kSource / "toy", &checked))
    ADD_FAILURE() << "src/toy/" << v << ", which is not below it in the layer table (CMakeLists.txt, toy_layer)";
  EXPECT_GT(checked, 50);  // the walk saw the tree
}

TEST(Layers, AnUpwardOrSidewaysIncludeIsFound) {
  const fs::path root = fs::path(testing::TempDir()) / ("toy_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("io/gguf.h", "#include \"toy/tensor/tensor.h\"\n#include \"toy/engines/decode.h\"\n");  // up
  write("engines/decode.h", "#include \"toy/tensor/tensor.h\"\n");  // down, transitively: allowed
  write("chat/jinja.h", "#include \"toy/io/gguf.h\"\n");            // sideways
  const Table t = {{"tensor", {}}, {"io", {"tensor"}}, {"archs", {"io"}}, {"engines", {"archs"}}, {"chat", {}}};
  int checked = 0;
  EXPECT_EQ(upward_includes(t, root, &checked), (std::vector<std::string>{"chat/jinja.h:1: chat includes toy/io/",
                                                                          "io/gguf.h:2: io includes toy/engines/"}));
  EXPECT_EQ(checked, 4);
  fs::remove_all(root);
}

TEST(Layers, DocsListTheDirectories) {
  const std::set<std::string> documented = documented_layers(fs::path(TOY_SOURCE_DIR) / "docs" / "architecture.md");
  std::set<std::string> expected = directories(kSource / "toy");
  for (const auto& d : directories(kSource))
    if (d != "toy") expected.insert(d);  // cli/
  EXPECT_EQ(documented, expected) << "the layer list in docs/architecture.md";
}
