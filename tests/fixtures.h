// tests/fixtures.h — locating the shared golden fixtures ($TOY_FIXTURES, default ../shared/fixtures).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace toy::test {

inline std::filesystem::path fixtures_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("TOY_FIXTURES")) return fs::path(env);
  for (fs::path p : {fs::path("../shared/fixtures"), fs::path(TOY_SOURCE_DIR) / ".." / "shared" / "fixtures"})
    if (fs::exists(p)) return p;
  return fs::path("../shared/fixtures");
}

// Path of a fixture, or empty when the fixtures are not there (the caller skips).
inline std::filesystem::path fixture(const std::string& rel) {
  auto p = fixtures_dir() / rel;
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

#define TOY_REQUIRE_FIXTURE(var, rel)                          \
  const std::filesystem::path var = ::toy::test::fixture(rel); \
  if (var.empty())                                             \
    GTEST_SKIP() << "fixture " << (rel) << " not found under " << ::toy::test::fixtures_dir() << " (set TOY_FIXTURES)";

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file under fixtures/<sub> with the given extension, sorted.
inline std::vector<std::filesystem::path> fixture_files(const std::string& sub, const std::string& ext) {
  std::vector<std::filesystem::path> r;
  auto dir = fixtures_dir() / sub;
  if (!std::filesystem::exists(dir)) return r;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

// The toy binary built beside the tests (for CLI tests).
inline std::string toy_bin() {
  if (const char* b = std::getenv("TOY_BIN")) return b;
  return std::string(TOY_BINARY_DIR) + "/toy";
}

struct RunResult {
  int code;
  std::string out, err;
};

// Runs `toy ARGS` (ARGS is shell text) and captures stdout, stderr and the exit code.
inline RunResult run_toy(const std::string& args, const std::string& stdin_text = "") {
  static int counter = 0;
  const std::string base =
      ::testing::TempDir() + "/toy_run_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  {
    std::ofstream in(base + ".in", std::ios::binary);
    in << stdin_text;
  }
  const std::string cmd = toy_bin() + " " + args + " <" + base + ".in >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  RunResult r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_text(base + ".out"),
              read_text(base + ".err")};
  std::filesystem::remove(base + ".in");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

// Sets environment variables for the life of the object and restores the old values after.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* k, const std::string& v) {
    save(k);
    ::setenv(k, v.c_str(), 1);
  }
  void unset(const char* k) {
    save(k);
    ::unsetenv(k);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_)
      if (v.second)
        ::setenv(k.c_str(), v.first.c_str(), 1);
      else
        ::unsetenv(k.c_str());
  }

 private:
  void save(const char* k) {
    if (saved_.count(k)) return;
    const char* v = std::getenv(k);
    saved_[k] = {v ? v : "", v != nullptr};
  }
  std::map<std::string, std::pair<std::string, bool>> saved_;
};

}  // namespace toy::test
