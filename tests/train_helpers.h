// tests/train_helpers.h — what the `toy train` tests share: a scratch directory, a tiny corpus,
// the tiny model's flags, readers for the stdout lines and the event log, and greedy decoding by
// toy and by llama.cpp (node-llama-cpp) for the checkpoints they write.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "toy/archs/model.h"
#include "toy/engines/decode.h"
#include "toy/tokenizer/tokenizer.h"

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

// A shared corpus ($TOY_CORPORA, default ../shared/corpora beside the fixtures), or empty when absent.
inline fs::path shared_corpus(const std::string& name) {
  const char* env = std::getenv("TOY_CORPORA");
  const fs::path p = (env ? fs::path(env) : fixtures_dir() / ".." / "corpora") / name;
  return fs::exists(p) ? p : fs::path();
}

// bench/peer, where node-llama-cpp is installed (bench/peer/run.sh, or `cd bench/peer && npm i`);
// empty when it or node is not there (the llama.cpp checks then skip).
inline fs::path llama_cpp_peer() {
  const fs::path peer = fs::path(TOY_SOURCE_DIR) / "bench" / "peer";
  if (std::system("node --version >/dev/null 2>&1") != 0 ||
      !fs::exists(peer / "node_modules" / "node-llama-cpp" / "package.json"))
    return {};
  return peer;
}

// llama.cpp's greedy continuation of `prompt` (BOS as each file asks, at most n ids, ending at
// end-of-generation) by every model in turn, optionally with a LoRA adapter: one row of ids per
// model, from one node process (bench/peer/generate.mjs). Empty, with a test failure, when node fails.
inline std::vector<std::vector<int32_t>> llama_cpp_greedy_ids(const std::vector<std::string>& models,
                                                              const std::string& prompt, int n,
                                                              const std::string& lora = "") {
  std::string list;
  for (const std::string& m : models) list += (list.empty() ? "" : ",") + m;
  const std::string log = ::testing::TempDir() + "/toy_llama_cpp_" + std::to_string(::getpid()) + ".txt";
  const int rc = std::system(("cd " + llama_cpp_peer().string() + " && timeout 300 node generate.mjs " + list + " '" +
                              prompt + "' " + std::to_string(n) + " " + lora + " --ids >" + log + " 2>&1")
                                 .c_str());
  const std::string out = read_text(log);
  fs::remove(log);
  std::vector<std::vector<int32_t>> rows;
  std::istringstream lines(out);
  for (std::string line; rc == 0 && std::getline(lines, line);) {
    std::vector<int32_t> ids;
    std::istringstream in(line);
    for (std::string id; std::getline(in, id, ',');) ids.push_back(std::stoi(id));
    rows.push_back(ids);
  }
  if (rc != 0 || rows.size() != models.size()) {
    ADD_FAILURE() << "node generate.mjs: exit " << rc << ", " << rows.size() << " rows for " << models.size()
                  << " models:\n"
                  << out;
    return {};
  }
  return rows;
}

// toy's greedy continuation, as `toy infer --temp 0` makes it (the prompt with BOS as the
// vocabulary asks, KV-cached decoding, at most n ids, ending at EOS), and the smallest gap
// between the largest and the second largest logit on the way: how far a greedy pick was from a tie.
struct Greedy {
  std::vector<int32_t> ids;
  float min_margin = INFINITY;
};
inline Greedy toy_greedy_ids(const Model& m, const Tokenizer& tok, const std::string& prompt, size_t n) {
  DecodeEngine engine(m);
  Greedy g;
  Tensor logits = engine.feed(tok.encode(prompt, /*add_special=*/true, /*parse_special=*/false), true);  // [1, V]
  while (g.ids.size() < n) {
    std::vector<float> v(logits.data(), logits.data() + logits.numel());
    const int32_t next = argmax(v);
    std::nth_element(v.begin(), v.begin() + 1, v.end(), std::greater<float>());
    g.min_margin = std::min(g.min_margin, v[0] - v[1]);
    if (next == tok.eos()) break;
    g.ids.push_back(next);
    logits = engine.feed(std::vector<int32_t>{next}, true);
  }
  return g;
}

}  // namespace toy::test
