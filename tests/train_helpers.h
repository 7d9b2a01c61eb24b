// tests/train_helpers.h — what the `toy train` tests share: a scratch directory, a tiny corpus,
// the tiny model's flags, and readers for the stdout lines and the event log.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"

namespace toy::test {

namespace fs = std::filesystem;
using nlohmann::json;

struct TrainDir {
  fs::path dir;
  TrainDir() {
    static int n = 0;
    dir = fs::path(testing::TempDir()) / ("toy_train_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TrainDir() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

// A small synthetic corpus: simple sentences, documents ended by <|endoftext|> as in TinyStories.
inline std::string corpus_text() {
  const char* names[] = {"Lily", "Tom", "Sue", "Ben", "Max"};
  const char* things[] = {"a red ball", "a big tree", "a little cat", "the sun", "a blue car"};
  const char* verbs[] = {"saw", "liked", "found", "wanted", "played with"};
  std::string s;
  uint32_t x = 7;
  auto pick = [&](int n) {
    x = x * 1103515245u + 12345u;
    return int((x >> 16) % uint32_t(n));
  };
  for (int doc = 0; doc < 120; ++doc) {
    for (int k = 0; k < 4; ++k) s += std::string(names[pick(5)]) + " " + verbs[pick(5)] + " " + things[pick(5)] + ". ";
    s += "\n<|endoftext|>\n";
  }
  return s;
}

inline std::string write_corpus(const TrainDir& d) {
  const std::string p = d.path("corpus.txt");
  std::ofstream(p, std::ios::binary) << corpus_text();
  return p;
}

inline const std::string kTiny =
    " --d-model 32 --layers 2 --heads 4 --kv-heads 2 --ff 64 --context 16 --batch 4 --lr 3e-3 --no-progress";

inline std::vector<std::string> loss_lines(const std::string& out) {
  std::vector<std::string> r;
  static const std::regex re(R"(^step (\d+): loss=(\S+)$)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, re)) r.push_back(line);
  return r;
}

inline double loss_of(const std::string& line) { return std::stod(line.substr(line.find('=') + 1)); }

inline std::vector<json> events_of(const fs::path& run) {
  std::vector<json> r;
  std::istringstream in(read_text(run / "events.jsonl"));
  for (std::string line; std::getline(in, line);) r.push_back(json::parse(line));
  return r;
}

}  // namespace toy::test
