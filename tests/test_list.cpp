// tests/test_list.cpp — `toy list` on fake model caches: Hugging Face (snapshot links into blobs/),
// Ollama (manifests naming blobs by digest), LM Studio and ./models, with the things real caches
// contain: a broken symlink, a non-GGUF file, an unreadable file, a corrupt manifest, duplicates.
// HOME and the cache variables point into a temporary directory; no fixture is needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "toy/hub/hub.h"
#include "toy/io/file_type.h"
#include "toy/io/gguf.h"

namespace fs = std::filesystem;
using Env = toy::test::ScopedEnv;
using toy::test::run_toy;

namespace {

// A small valid GGUF: `arch` metadata, file type, and two F32 tensors (parameter count 12).
void write_gguf(const fs::path& p, const std::string& arch, uint32_t file_type) {
  fs::create_directories(p.parent_path());
  static const float w[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4] = {0, 0, 0, 0};
  toy::gguf::GgufWriter g;
  g.set("general.architecture", toy::gguf::Value::of_string(arch));
  g.set("general.file_type", toy::gguf::Value::of_u32(file_type));
  g.add_tensor("token_embd.weight", {2, 4}, toy::DType::F32, w);
  g.add_tensor("output_norm.weight", {4}, toy::DType::F32, b);
  g.write(p.string());
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

struct FakeMachine {
  fs::path root, home, hf, ollama;
  Env env;
  FakeMachine() {
    root = fs::path(testing::TempDir()) / ("toy_list_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    home = root / "home";
    hf = home / ".cache" / "huggingface" / "hub";
    ollama = home / ".ollama" / "models";
    fs::create_directories(home);
    env.set("HOME", home.string());
    for (const char* k : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "OLLAMA_MODELS"})
      env.unset(k);
  }
  ~FakeMachine() {
    std::error_code ec;
    fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root, ec);
  }
};

nlohmann::json list_json(const std::string& extra = "") {
  auto r = run_toy("list --json" + extra);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

const nlohmann::json* find_model(const nlohmann::json& j, const std::string& name) {
  for (const auto& m : j["models"])
    if (m["name"] == name) return &m;
  return nullptr;
}

bool skipped_with(const nlohmann::json& j, const std::string& path_part, const std::string& reason_part) {
  for (const auto& s : j["skipped"])
    if (s["path"].get<std::string>().find(path_part) != std::string::npos &&
        s["reason"].get<std::string>().find(reason_part) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST(List, HuggingFaceCacheWithSymlinksAndJunk) {
  FakeMachine m;
  const fs::path repo = m.hf / "models--TheOrg--Tiny-GGUF";
  write_gguf(repo / "blobs" / "aaaa1111", "llama", 7);   // Q8_0
  write_gguf(repo / "blobs" / "bbbb2222", "qwen2", 15);  // Q4_K_M
  fs::create_directories(repo / "snapshots" / "c0ffee" / "sub");
  fs::create_symlink("../../blobs/aaaa1111", repo / "snapshots" / "c0ffee" / "tiny-q8_0.gguf");
  fs::create_symlink("../../../blobs/bbbb2222", repo / "snapshots" / "c0ffee" / "sub" / "tiny-q4_k_m.gguf");
  fs::create_symlink("../../blobs/gone", repo / "snapshots" / "c0ffee" / "broken.gguf");  // broken link
  write_text(repo / "snapshots" / "c0ffee" / "README.gguf", "# not a model");             // not GGUF
  write_text(repo / "snapshots" / "c0ffee" / "config.json", "{}");                        // ignored
  // A second revision pointing at the same blob is listed once.
  fs::create_directories(repo / "snapshots" / "beef42");
  fs::create_symlink("../../blobs/aaaa1111", repo / "snapshots" / "beef42" / "tiny-q8_0.gguf");
  write_text(repo / "refs" / "main", "c0ffee");

  const auto j = list_json();
  const auto* q8 = find_model(j, "TheOrg/Tiny-GGUF/tiny-q8_0.gguf");
  ASSERT_NE(q8, nullptr) << j.dump(2);
  EXPECT_EQ((*q8)["source"], "hf");
  EXPECT_EQ((*q8)["architecture"], "llama");
  EXPECT_EQ((*q8)["dtype"], "Q8_0");
  EXPECT_EQ((*q8)["parameters"], 12);
  EXPECT_GT((*q8)["bytes"].get<int>(), 0);
  const auto* q4 = find_model(j, "TheOrg/Tiny-GGUF/sub/tiny-q4_k_m.gguf");
  ASSERT_NE(q4, nullptr) << j.dump(2);
  EXPECT_EQ((*q4)["dtype"], "Q4_K_M");
  EXPECT_EQ((*q4)["architecture"], "qwen2");
  int hf_models = 0;
  for (const auto& x : j["models"]) hf_models += x["source"] == "hf";
  EXPECT_EQ(hf_models, 2) << "the blob reached from two snapshots is listed once";
  EXPECT_TRUE(skipped_with(j, "broken.gguf", "broken symlink")) << j.dump(2);
  EXPECT_TRUE(skipped_with(j, "README.gguf", "not a GGUF")) << j.dump(2);

  // Text output: the columns and a note per skipped file on stderr.
  auto t = run_toy("list");
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("NAME"), std::string::npos);
  EXPECT_NE(t.out.find("TheOrg/Tiny-GGUF/tiny-q8_0.gguf"), std::string::npos);
  EXPECT_NE(t.out.find("Q8_0"), std::string::npos);
  EXPECT_NE(t.err.find("broken symlink"), std::string::npos);
  EXPECT_EQ(run_toy("list --quiet").err.find("broken symlink"), std::string::npos);
}

TEST(List, CacheLocationFromEnvironment) {
  FakeMachine m;
  const fs::path custom = m.root / "elsewhere";
  write_gguf(custom / "models--a--b" / "blobs" / "x1", "gemma2", 0);
  fs::create_directories(custom / "models--a--b" / "snapshots" / "r1");
  fs::create_symlink("../../blobs/x1", custom / "models--a--b" / "snapshots" / "r1" / "m.gguf");

  m.env.set("HF_HUB_CACHE", custom.string());
  EXPECT_NE(find_model(list_json(), "a/b/m.gguf"), nullptr);
  m.env.unset("HF_HUB_CACHE");
  EXPECT_EQ(find_model(list_json(), "a/b/m.gguf"), nullptr);

  // HF_HOME/hub
  fs::create_directories(m.root / "hfhome");
  fs::rename(custom, m.root / "hfhome" / "hub");
  m.env.set("HF_HOME", (m.root / "hfhome").string());
  const auto j = list_json();
  const auto* found = find_model(j, "a/b/m.gguf");
  ASSERT_NE(found, nullptr) << j.dump(2);
  EXPECT_EQ((*found)["dtype"], "F32");
  EXPECT_EQ(toy::hub::hf_hub_cache(), (m.root / "hfhome" / "hub").string());
}

TEST(List, OllamaManifests) {
  FakeMachine m;
  const std::string hex(64, 'c'), hex2(64, 'd');
  write_gguf(m.ollama / "blobs" / ("sha256-" + hex), "llama", 2);  // Q4_0
  auto manifest = [&](const std::string& digest) {
    return nlohmann::json{{"schemaVersion", 2},
                          {"layers",
                           {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", digest}, {"size", 1}},
                            {{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + hex2}}}}}
        .dump();
  };
  write_text(m.ollama / "manifests" / "registry.ollama.ai" / "library" / "tinyllama" / "latest",
             manifest("sha256:" + hex));
  write_text(m.ollama / "manifests" / "registry.ollama.ai" / "someone" / "custom" / "v1", manifest("sha256:" + hex));
  write_text(m.ollama / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest",
             "{\"layers\": [");  // corrupt
  write_text(m.ollama / "manifests" / "registry.ollama.ai" / "library" / "nolayers" / "latest",
             "{\"x\": 1}");  // wrong shape
  write_text(m.ollama / "manifests" / "registry.ollama.ai" / "library" / "missing" / "latest",
             manifest("sha256:" + hex2));

  auto j = list_json();
  const auto* t = find_model(j, "tinyllama:latest");
  ASSERT_NE(t, nullptr) << j.dump(2);
  EXPECT_EQ((*t)["source"], "ollama");
  EXPECT_EQ((*t)["dtype"], "Q4_0");
  EXPECT_NE((*t)["path"].get<std::string>().find("sha256-" + hex), std::string::npos);
  EXPECT_TRUE(skipped_with(j, "broken", "corrupt manifest")) << j.dump(2);
  EXPECT_TRUE(skipped_with(j, "nolayers", "corrupt manifest")) << j.dump(2);
  EXPECT_TRUE(skipped_with(j, "missing", "missing blob")) << j.dump(2);

  // OLLAMA_MODELS moves the root.
  fs::rename(m.ollama, m.root / "ollama2");
  m.env.set("OLLAMA_MODELS", (m.root / "ollama2").string());
  j = list_json();
  EXPECT_NE(find_model(j, "tinyllama:latest"), nullptr) << j.dump(2);
}

TEST(List, LmStudioLocalDirsAndUnreadableFiles) {
  FakeMachine m;
  write_gguf(m.home / ".lmstudio" / "models" / "pub" / "repo" / "a.gguf", "gpt2", 1);
  write_gguf(m.home / ".cache" / "lm-studio" / "models" / "pub2" / "repo2" / "b.GGUF", "olmoe", 32);
  const fs::path work = m.root / "work";
  write_gguf(work / "models" / "c.gguf", "qwen3", 0);
  write_gguf(work / "data" / "run1" / "d.gguf", "llama", 0);
  write_text(work / "data" / "truncated.gguf", std::string("GGUF\x03\0\0\0", 8));  // GGUF magic, then nothing
  write_gguf(work / "models" / "locked.gguf", "llama", 0);
  fs::permissions(work / "models" / "locked.gguf", fs::perms::none);

  const fs::path old = fs::current_path();
  fs::current_path(work);
  const auto j = list_json();
  auto t = run_toy("list");
  fs::current_path(old);

  ASSERT_NE(find_model(j, "pub/repo/a.gguf"), nullptr) << j.dump(2);
  EXPECT_EQ((*find_model(j, "pub/repo/a.gguf"))["dtype"], "F16");
  ASSERT_NE(find_model(j, "pub2/repo2/b.GGUF"), nullptr) << j.dump(2);
  EXPECT_EQ((*find_model(j, "pub2/repo2/b.GGUF"))["dtype"], "BF16");
  ASSERT_NE(find_model(j, "c.gguf"), nullptr) << j.dump(2);
  EXPECT_EQ((*find_model(j, "c.gguf"))["source"], "local");
  EXPECT_NE(find_model(j, "run1/d.gguf"), nullptr) << j.dump(2);
  EXPECT_TRUE(skipped_with(j, "truncated.gguf", "")) << j.dump(2);
  if (::geteuid() != 0) {  // root reads anything
    EXPECT_TRUE(skipped_with(j, "locked.gguf", "unreadable")) << j.dump(2);
  }
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("c.gguf"), std::string::npos);
}

TEST(List, EmptyMachineAndDirFlag) {
  FakeMachine m;
  const fs::path old = fs::current_path();
  fs::current_path(m.root);
  auto r = run_toy("list");
  auto j = list_json();
  fs::current_path(old);
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("no GGUF models found"), std::string::npos);
  EXPECT_TRUE(j["models"].empty());
  EXPECT_EQ(j["searched"].size(), 6u);

  write_gguf(m.root / "mine" / "x.gguf", "llama", 0);
  j = list_json(" --dir " + (m.root / "mine").string());
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["name"], "x.gguf");
  EXPECT_EQ(run_toy("list --dir /nonexistent/dir").code, 2);
  EXPECT_EQ(run_toy("list extra-arg").code, 2);
}

TEST(List, DescribeFileSummary) {
  FakeMachine m;
  write_gguf(m.root / "f.gguf", "llama", 18);
  const auto s = toy::hub::describe_file((m.root / "f.gguf").string());
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.dtype, "Q6_K");
  EXPECT_EQ(s.parameters, 12u);
  EXPECT_EQ(toy::gguf::file_type_name(15), "Q4_K_M");
  EXPECT_EQ(toy::gguf::file_type_name(999), "");
}

TEST(List, HostileMetadataIsSanitized) {
  // Metadata and file names are not UTF-8 or carry terminal escapes: JSON output replaces invalid
  // bytes with U+FFFD (it failed entirely), text output shows control characters escaped.
  FakeMachine m;
  const std::string name =
      "\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
      "31m bad \xff\xfe name";
  const fs::path dir = m.root / "hostile", file = dir / "evil\x1b[31m.gguf";
  fs::create_directories(dir);
  static const float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  toy::gguf::GgufWriter g;
  g.set("general.architecture", toy::gguf::Value::of_string("llama\xff"));
  g.set("general.name", toy::gguf::Value::of_string(name));
  g.set("llama\xff.context_length", toy::gguf::Value::of_u32(8));
  g.add_tensor("token_embd.weight\x1b[0m", {2, 4}, toy::DType::F32, w);
  g.write(file.string());
  const auto no_controls = [](const std::string& s) {
    return std::none_of(s.begin(), s.end(), [](char c) { return c == '\x1b' || c == '\x07'; }) &&
           s.find("\xc2\x9b") == std::string::npos;
  };

  auto j = list_json(" --dir " + dir.string());
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["architecture"], "llama\xef\xbf\xbd");
  auto t = run_toy("list --dir '" + dir.string() + "'");
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(no_controls(t.out)) << t.out;
  EXPECT_NE(t.out.find("evil\\x1b[31m.gguf"), std::string::npos) << t.out;

  auto dj = run_toy("describe '" + file.string() + "' --json");
  ASSERT_EQ(dj.code, 0) << dj.err;
  const auto d = nlohmann::json::parse(dj.out);
  EXPECT_EQ(d["name"],
            "\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
            "31m bad \xef\xbf\xbd\xef\xbf\xbd name");
  EXPECT_EQ(d["architecture"], "llama\xef\xbf\xbd");
  auto dt = run_toy("describe '" + file.string() + "'");
  ASSERT_EQ(dt.code, 0) << dt.err;
  EXPECT_TRUE(no_controls(dt.out)) << dt.out;
  EXPECT_NE(dt.out.find("(\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m bad \xef\xbf\xbd\xef\xbf\xbd name)"), std::string::npos)
      << dt.out;
  EXPECT_NE(dt.out.find("token_embd.weight\\x1b[0m"), std::string::npos) << dt.out;
}
