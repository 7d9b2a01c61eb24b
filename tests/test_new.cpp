// tests/test_new.cpp — `toy install` and `toy new` end to end: install the library into a
// temporary prefix, create an experiment and a library, build both against that prefix with
// CMake exactly as their READMEs say, and run them (the experiment for a few training steps).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fixtures.h"

namespace fs = std::filesystem;
using toy::test::read_text;
using toy::test::run_toy;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path p = fs::path(testing::TempDir()) / ("toy_new_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Runs a shell command in `dir`; returns its exit status and output (stdout and stderr).
std::pair<int, std::string> shell(const fs::path& dir, const std::string& cmd) {
  const fs::path log = dir / ".shell.log";
  const int status = std::system(("cd '" + dir.string() + "' && (" + cmd + ") > '" + log.string() + "' 2>&1").c_str());
  std::string out = read_text(log);
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

bool have(const std::string& tool) { return std::system(("command -v " + tool + " > /dev/null 2>&1").c_str()) == 0; }

// Creates a project with `toy new ARGS` inside `dir` (toy new writes relative to the working directory).
toy::test::RunResult toy_new_in(const fs::path& dir, const std::string& args) {
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  auto r = run_toy("new " + args);
  fs::current_path(old);
  return r;
}

std::string configure_and_build(const fs::path& project, const fs::path& prefix) {
  const std::string gen = have("ninja") ? " -G Ninja" : "";
  return "cmake -S . -B build" + gen + " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='" + prefix.string() +
         "' && cmake --build build -j 2";
}

}  // namespace

TEST(New, ProjectsBuildAndRunAgainstAnInstalledToy) {
  if (!have("cmake")) GTEST_SKIP() << "cmake is not on PATH";
  const fs::path root = scratch("e2e"), prefix = root / "prefix";

  auto inst = run_toy("install --prefix " + prefix.string());
  ASSERT_EQ(inst.code, 0) << inst.out << inst.err;
  for (const char* f : {"bin/toy", "lib/libtoy_tensor.a", "lib/cmake/toy/toyConfig.cmake",
                        "lib/cmake/toy/toyTargets.cmake", "include/toy/tensor/tensor.h", "include/toy/archs/arch.h"})
    EXPECT_TRUE(fs::exists(prefix / f)) << f;
  EXPECT_NE(inst.out.find("self-test"), std::string::npos);
  EXPECT_NE(inst.out.find("all checks passed"), std::string::npos) << inst.out;

  // The experiment: build, train 3 steps, write a model that toy reads.
  auto ne = toy_new_in(root, "exp");
  ASSERT_EQ(ne.code, 0) << ne.err;
  for (const char* f : {"CMakeLists.txt", "main.cpp", "config.json", "README.md", "data/corpus.txt"})
    EXPECT_TRUE(fs::exists(root / "exp" / f)) << f;
  EXPECT_NE(read_text(root / "exp" / "README.md").find("cmake -S . -B build"), std::string::npos);
  auto [bc, blog] = shell(root / "exp", configure_and_build(root / "exp", prefix));
  ASSERT_EQ(bc, 0) << blog;
  auto [rc, rlog] = shell(root / "exp", "./build/exp config.json 3");
  ASSERT_EQ(rc, 0) << rlog;
  EXPECT_NE(rlog.find("step 1: loss="), std::string::npos) << rlog;
  EXPECT_NE(rlog.find("step 3: loss="), std::string::npos) << rlog;
  EXPECT_NE(rlog.find("held-out loss"), std::string::npos) << rlog;
  ASSERT_TRUE(fs::exists(root / "exp" / "exp.gguf")) << rlog;
  auto d = run_toy("describe " + (root / "exp" / "exp.gguf").string() + " --json");
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(nlohmann::json::parse(d.out)["architecture"], "llama");

  // The library: build, run its check (a primitive's value and gradient).
  auto nl = toy_new_in(root, "my-ops --lib");
  ASSERT_EQ(nl.code, 0) << nl.err;
  EXPECT_TRUE(fs::exists(root / "my-ops" / "include" / "my-ops" / "my-ops.h"));
  auto [lc, llog] = shell(root / "my-ops", configure_and_build(root / "my-ops", prefix) + " && ./build/my-ops_check");
  ASSERT_EQ(lc, 0) << llog;
  EXPECT_NE(llog.find("all checks passed"), std::string::npos) << llog;

  // The architecture: a program of its own is the whole toy CLI with one more architecture, which
  // every command then reads and writes (toy itself does not know it).
  auto na = toy_new_in(root, "my-arch --template arch");
  ASSERT_EQ(na.code, 0) << na.err;
  {
    std::vector<int32_t> ids(400);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(3 + (i * 7) % 200);
    std::ofstream(root / "my-arch" / "ids.i32", std::ios::binary)
        .write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 4));
  }
  auto [ac, alog] =
      shell(root / "my-arch", configure_and_build(root / "my-arch", prefix) +
                                  " && ./build/my-arch init --card example.card.md -o ex.gguf"
                                  " && ./build/my-arch describe ex.gguf --card > card.md"
                                  " && ./build/my-arch infer ex.gguf --ids 1,2,3 -n 4 --temp 0"
                                  " && ./build/my-arch eval ex.gguf --ids 1,2,3,4,5 --dump-logits logits.f32"
                                  " && ./build/my-arch train from-scratch --init-weights ex.gguf --data-ids ids.i32"
                                  " --context 8 --batch 2 --steps 3 --runs-dir runs --run-id r"
                                  " && ./build/my-arch train from-scratch --arch my_arch --d-model 32 --layers 1"
                                  " --heads 2 --data-ids ids.i32 --context 8 --batch 2 --steps 2 --runs-dir runs"
                                  " --run-id s");
  ASSERT_EQ(ac, 0) << alog;
  EXPECT_NE(alog.find("step 3: loss="), std::string::npos) << alog;
  EXPECT_EQ(fs::file_size(root / "my-arch" / "logits.f32"), size_t(5 * 512 * 4));
  const std::string card = read_text(root / "my-arch" / "card.md");
  EXPECT_NE(card.find("The `my_arch` architecture"), std::string::npos) << card;
  EXPECT_NE(card.find("gelu"), std::string::npos) << card;
  auto trained =
      run_toy("describe " + (root / "my-arch" / "runs" / "r" / "weights" / "final.gguf").string() + " --json");
  ASSERT_EQ(trained.code, 0) << trained.err;
  EXPECT_EQ(nlohmann::json::parse(trained.out)["architecture"], "my_arch");
  // --arch names it like toy's own: a new model of the registered architecture, trained by the CLI.
  auto fresh = run_toy("describe " + (root / "my-arch" / "runs" / "s" / "weights" / "final.gguf").string() + " --json");
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(nlohmann::json::parse(fresh.out)["architecture"], "my_arch");
  EXPECT_EQ(nlohmann::json::parse(fresh.out)["hyperparameters"]["embedding_length"], 32) << fresh.out;
  EXPECT_EQ(run_toy("infer " + (root / "my-arch" / "ex.gguf").string() + " --ids 1 -n 1").code, 3)
      << "toy itself does not have the architecture";

  fs::remove_all(root);
}

TEST(New, BadNamesAndExistingDirectories) {
  const fs::path root = scratch("bad");
  EXPECT_EQ(toy_new_in(root, "9lives").code, 2);
  EXPECT_EQ(toy_new_in(root, "'has space'").code, 2);
  EXPECT_EQ(toy_new_in(root, "").code, 2);
  EXPECT_EQ(toy_new_in(root, "ok --bogus").code, 2);
  ASSERT_EQ(toy_new_in(root, "taken").code, 0);
  auto again = toy_new_in(root, "taken");
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  // An empty directory is fine; a nested path names the project by its last component.
  fs::create_directories(root / "empty");
  EXPECT_EQ(toy_new_in(root, "empty").code, 0);
  EXPECT_EQ(toy_new_in(root, "sub/dir/proj --lib").code, 0);
  EXPECT_TRUE(fs::exists(root / "sub" / "dir" / "proj" / "src" / "proj.cpp"));
  fs::remove_all(root);
}

TEST(New, NamesThatMakeBrokenProjectsAreRefused) {
  // Each was accepted and made a project that does not configure (a reserved CMake target, toy's
  // own package) or does not compile (a C++ keyword or reserved name as the namespace).
  const fs::path root = scratch("reserved");
  for (const char* name : {"all", "test", "install", "clean", "help", "package", "toy", "int", "class", "and",
                           "namespace", "co_await", "std", "double-underscore__x", "a--b", "new", "sub/dir/int"}) {
    auto r = toy_new_in(root, name);
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find("cannot name a project"), std::string::npos) << name << ": " << r.err;
  }
  EXPECT_TRUE(fs::is_empty(root));
  // Near misses stay valid: a keyword inside a name, a reserved target in another case.
  EXPECT_EQ(toy_new_in(root, "integer").code, 0);
  EXPECT_EQ(toy_new_in(root, "my-test").code, 0);
  EXPECT_EQ(toy_new_in(root, "Toy2").code, 0);
  fs::remove_all(root);
}

TEST(Install, CheckOnlyReportsTheMachine) {
  auto r = run_toy("install --check");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* s : {"machine:", "cpu", "threads", "backends", "self-test:", "linear", "rms_norm", "cross_entropy",
                        "autograd", "matmul (every kernel path)", "sha256", "all checks passed"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("installing"), std::string::npos);
}

TEST(Install, UnwritablePrefixFails) {
  if (!have("cmake")) GTEST_SKIP() << "cmake is not on PATH";
  auto r = run_toy("install --prefix /dev/null/prefix");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cmake --install failed"), std::string::npos) << r.err;
  EXPECT_EQ(run_toy("install --prefix").code, 2);
}
