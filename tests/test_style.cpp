// tests/test_style.cpp — size budgets that keep the code readable (STYLE item 15): an
// architecture file stays under 200 lines, and its forward pass fits on one screen; and every
// C++ file is formatted as .clang-format says.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST(Style, ArchitectureFilesFitTheirBudget) {
  const fs::path dir = fs::path(TOY_SOURCE_DIR) / "src" / "toy" / "archs";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    EXPECT_LE(lines.size(), 200u) << e.path().filename() << " has " << lines.size() << " lines";
    // `Tensor <Name>::forward(` … the closing brace at column 0: at most 60 lines.
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!std::regex_search(lines[i], std::regex(R"(^Tensor \w+::forward\()"))) continue;
      size_t j = i;
      while (j < lines.size() && lines[j] != "}") ++j;
      EXPECT_LE(j - i + 1, 60u) << e.path().filename() << ": forward pass of " << j - i + 1 << " lines";
    }
    ++files;
  }
  EXPECT_GE(files, 6);
}

// clang-format --dry-run --Werror over every C++ file of the tree (one process; it names each file
// it would change in its diagnostics). Skipped where clang-format is not installed; scripts/setup.sh
// installs it, so CI runs it.
TEST(Style, ClangFormatLeavesEveryFileUnchanged) {
  if (std::system("clang-format --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "clang-format not installed";
  const fs::path root(TOY_SOURCE_DIR);
  std::string files;
  int n = 0;
  for (const char* dir : {"src", "tests", "bench", "examples", "fuzz"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const fs::path ext = e.path().extension();
      if (ext != ".cpp" && ext != ".h" && ext != ".inc") continue;
      files += " '" + e.path().string() + "'";
      ++n;
    }
  ASSERT_GT(n, 100);
  FILE* p = popen(("cd '" + root.string() + "' && clang-format --dry-run --Werror" + files + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::set<std::string> unformatted;  // from "path:line:col: error: code should be clang-formatted"
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    const std::string l(line);
    if (l.find("error: code should be clang-formatted") != std::string::npos)
      unformatted.insert(l.substr(0, l.find(':')));
  }
  const int status = pclose(p);
  std::string list;
  for (const std::string& f : unformatted) list += "\n  " + f;
  EXPECT_TRUE(unformatted.empty()) << "run clang-format -i on:" << list;
  EXPECT_EQ(status, 0) << "clang-format failed";
}
