// tests/test_style.cpp — size budgets that keep the code readable (STYLE item 15): an
// architecture file stays under 200 lines and its forward pass fits on one screen; each
// architecture is described once (its tensor names in one table, none outside archs/); and every
// C++ file is formatted as .clang-format says.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {
std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
// Quoted GGUF tensor names ("attn_q.weight", "blk.0.ffn_up.bias", …) in a text.
std::vector<std::string> tensor_names(const std::string& text) {
  static const std::regex name(R"re("((?:blk\.\d+\.)?[a-z_]+(?:_exps|_inp)?\.(?:weight|bias))")re");
  std::vector<std::string> r;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it)
    r.push_back((*it)[1]);
  return r;
}
}  // namespace

TEST(Style, ArchitectureFilesFitTheirBudget) {
  const fs::path dir = fs::path(TOY_SOURCE_DIR) / "src" / "toy" / "archs";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp" || read(e.path()).find("static Tensor forward(") == std::string::npos) continue;
    std::ifstream in(e.path());
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    EXPECT_LE(lines.size(), 200u) << e.path().filename() << " has " << lines.size() << " lines";
    // `static Tensor forward(` … its closing brace at the same indent: at most 60 lines.
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!std::regex_search(lines[i], std::regex(R"(^  static Tensor forward\()"))) continue;
      size_t j = i;
      while (j < lines.size() && lines[j] != "  }") ++j;
      EXPECT_LE(j - i + 1, 60u) << e.path().filename() << ": forward pass of " << j - i + 1 << " lines";
    }
    ++files;
  }
  EXPECT_GE(files, 6);
}

TEST(Style, EachTensorNameInOneTablePerArchitecture) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TOY_SOURCE_DIR) / "src" / "toy" / "archs")) {
    if (e.path().extension() != ".cpp") continue;
    std::map<std::string, int> seen;
    for (const std::string& n : tensor_names(read(e.path()))) ++seen[n];
    for (const auto& [n, count] : seen)
      EXPECT_EQ(count, 1) << e.path().filename() << " names " << n << " " << count << " times";
    files += !seen.empty();
  }
  EXPECT_GE(files, 6);
  // Nothing outside the architecture layer knows an architecture's tensors. Allowed: GGUF's own
  // conventions for every architecture (llama-quantize's name rules, the output/token_embd
  // tying, warm-start's donor table: token_embd.weight in every GGUF architecture), and the
  // example architecture that `toy new --template arch` writes.
  const std::set<std::string> conventions = {"file_type.cpp", "cmd_bench.cpp", "new_templates.cpp", "warm_start.cpp"};
  for (const char* dir : {"src/toy/io", "src/cli", "src/toy/recipes", "src/toy/engines", "src/toy/serve"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(TOY_SOURCE_DIR) / dir)) {
      if (!e.is_regular_file() || conventions.count(e.path().filename().string())) continue;
      for (const std::string& n : tensor_names(read(e.path())))
        ADD_FAILURE() << e.path() << " names the tensor " << n << " (architecture knowledge belongs in archs/)";
    }
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
    for (auto it = fs::recursive_directory_iterator(root / dir); it != fs::recursive_directory_iterator(); ++it) {
      const fs::directory_entry& e = *it;
      // npm's (bench/peer/run.sh installs one) and llama.cpp's (bench/peer/native.sh clones it), not ours
      if (e.path().filename() == "node_modules" || e.path() == root / "bench" / "peer" / "llama.cpp") {
        it.disable_recursion_pending();
        continue;
      }
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
