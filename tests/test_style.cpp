// tests/test_style.cpp — size budgets that keep the code readable (STYLE item 15):
// an architecture file stays under 200 lines, and its forward pass fits on one screen.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

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
