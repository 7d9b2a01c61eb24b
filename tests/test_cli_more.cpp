// tests/test_cli_more.cpp — the CLI as a whole: every command is listed and documented, the
// manifest is the parser's own tables, docs/cli.md matches the manifest, and every exit code
// (0, 1, 2, 3, 4, 130) is produced where docs/cli.md says.
//
// docs/cli.md's command reference is generated from `toy --manifest` by this test:
//   TOY_UPDATE_DOCS=1 ./build/tests/toy_tests --gtest_filter='CliDocs.*'
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "fixtures.h"
#include "toy/kernels/cpu_features.h"

using json = nlohmann::json;
using toy::test::read_text;
using toy::test::run_toy;
namespace fs = std::filesystem;

namespace {

json manifest() {
  auto r = run_toy("--manifest");
  EXPECT_EQ(r.code, 0);
  return json::parse(r.out);
}

std::string flag_default(const json& f) { return f["default"].get<std::string>(); }

// --- docs/cli.md: the generated command reference and a parser for it ------------------------

const char* kBegin = "<!-- BEGIN GENERATED FROM `toy --manifest` (see tests/test_cli_more.cpp) -->";
const char* kEnd = "<!-- END GENERATED -->";

std::string cell(std::string s) {
  for (size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2) s.replace(at, 1, "\\|");
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

std::string reference(const json& m) {
  std::string s = std::string(kBegin) + "\n";
  for (const auto& c : m["commands"]) {
    const std::string name = c["name"];
    s += "\n### `toy " + name + "`\n\n" + cell(c["summary"]) + "\n\n    toy " + name;
    for (const auto& p : c["positionals"])
      s += p["required"].get<bool>() ? " " + p["name"].get<std::string>() : " [" + p["name"].get<std::string>() + "]";
    s += " [options]\n\n";
    if (!c["positionals"].empty()) {
      s += "| argument | description |\n|---|---|\n";
      for (const auto& p : c["positionals"])
        s += "| `" + p["name"].get<std::string>() + "` | " + cell(p["help"]) +
             (p["required"].get<bool>() ? "" : " (optional)") + " |\n";
      s += "\n";
    }
    s += "| option | type | default | description |\n|---|---|---|---|\n";
    for (const auto& f : c["flags"]) {
      const std::string shrt = f.contains("short") ? "`" + f["short"].get<std::string>() + "`, " : "";
      std::string aliases;
      for (const auto& alias : f.value("aliases", json::array())) aliases += ", `" + alias.get<std::string>() + "`";
      const std::string def = flag_default(f);
      s += "| " + shrt + "`" + f["name"].get<std::string>() + "`" + aliases + " | " + f["type"].get<std::string>() +
           " | " + (def.empty() ? "" : "`" + cell(def) + "`") + " | " + cell(f["help"]) + " |\n";
    }
  }
  return s + "\n" + kEnd;
}

struct DocFlag {
  std::string type, def;
};
// command -> flag name -> (type, default), read from every "### `toy NAME`" section's option table.
std::map<std::string, std::map<std::string, DocFlag>> parse_docs(const std::string& md) {
  std::map<std::string, std::map<std::string, DocFlag>> docs;
  std::string cmd;
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("### `toy ", 0) == 0) {
      cmd = line.substr(9, line.find('`', 9) - 9);
      docs[cmd];
      continue;
    }
    if (cmd.empty() || line.rfind("| ", 0) != 0) continue;
    std::vector<std::string> cols;
    for (size_t a = 1, b; (b = line.find(" |", a)) != std::string::npos; a = b + 2)
      cols.push_back(line.substr(a + 1, b - a - 1));
    if (cols.size() < 4) continue;
    const size_t at = cols[0].find("`--");
    if (at == std::string::npos) continue;
    const std::string flag = cols[0].substr(at + 1, cols[0].find('`', at + 1) - at - 1);
    std::string def = cols[2];
    if (def.size() >= 2 && def.front() == '`') def = def.substr(1, def.size() - 2);
    docs[cmd][flag] = {cols[1], def};
  }
  return docs;
}

fs::path docs_path() { return fs::path(TOY_SOURCE_DIR) / "docs" / "cli.md"; }

}  // namespace

TEST(CliDocs, ReferenceMatchesManifest) {
  const json m = manifest();
  std::string md = read_text(docs_path());
  ASSERT_FALSE(md.empty()) << docs_path() << " is missing";
  size_t a = md.find(kBegin), b = md.find(kEnd);
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && a < b)
      << "docs/cli.md lacks the generated-reference markers";
  const std::string want = reference(m);
  if (std::getenv("TOY_UPDATE_DOCS")) {
    md.replace(a, b + std::string(kEnd).size() - a, want);
    std::ofstream(docs_path(), std::ios::binary) << md;
    std::cout << "[ note ] rewrote the command reference of " << docs_path() << "\n";
    b = md.find(kEnd);
  }

  // Parsed, not just compared: every command and flag of the manifest is documented with its
  // type and default, and the docs document nothing the CLI does not have.
  const auto docs = parse_docs(md);
  std::set<std::string> in_manifest;
  for (const auto& c : m["commands"]) {
    const std::string name = c["name"];
    in_manifest.insert(name);
    ASSERT_TRUE(docs.count(name)) << "docs/cli.md does not document `toy " << name << "`";
    std::set<std::string> flags;
    for (const auto& f : c["flags"]) {
      const std::string flag = f["name"];
      flags.insert(flag);
      auto it = docs.at(name).find(flag);
      ASSERT_NE(it, docs.at(name).end()) << "docs/cli.md: `toy " << name << "` lacks " << flag;
      EXPECT_EQ(it->second.type, f["type"].get<std::string>()) << name << " " << flag;
      EXPECT_EQ(it->second.def, cell(flag_default(f))) << name << " " << flag;
    }
    for (const auto& [flag, d] : docs.at(name))
      EXPECT_TRUE(flags.count(flag)) << "docs/cli.md documents `toy " << name << " " << flag
                                     << "`, which does not exist";
  }
  for (const auto& [name, flags] : docs)
    EXPECT_TRUE(in_manifest.count(name)) << "docs/cli.md documents `toy " << name << "`, which does not exist";
  EXPECT_EQ(md.substr(a, b + std::string(kEnd).size() - a), want)
      << "docs/cli.md is out of date; regenerate it: TOY_UPDATE_DOCS=1 ./build/tests/toy_tests "
         "--gtest_filter='CliDocs.*'";

  // The exit-code table.
  for (const auto& [code, meaning] : m["exit_codes"].items())
    EXPECT_NE(md.find("| " + code + " | " + meaning.get<std::string>()), std::string::npos) << "exit code " << code;
}

TEST(CliDocs, HabitsTableMatchesManifest) {
  // docs/cli.md "Coming from llama.cpp, ollama or mlx-lm": every `toy …` in the table's toy column
  // names a command, and each option in it is one of that command's spellings.
  const json m = manifest();
  const std::string md = read_text(docs_path());
  const size_t start = md.find("## Coming from llama.cpp, ollama or mlx-lm");
  ASSERT_NE(start, std::string::npos) << "docs/cli.md lacks the section";
  const size_t end = md.find("\n## ", start + 1);
  std::istringstream in(md.substr(start, end - start));
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t bar = line.find(" | ", 1);
    ASSERT_NE(bar, std::string::npos) << line;
    const std::string toy_cell = line.substr(bar + 3);
    const size_t a = toy_cell.find("`toy "), b = toy_cell.find('`', a + 1);
    ASSERT_TRUE(a != std::string::npos && b != std::string::npos) << "no `toy …` in: " << line;
    std::istringstream words(toy_cell.substr(a + 1, b - a - 1));
    std::string word, cmd;
    words >> word >> cmd;
    const json* c = nullptr;
    for (const auto& k : m["commands"])
      if (k["name"] == cmd) c = &k;
    ASSERT_NE(c, nullptr) << "toy " << cmd << " does not exist: " << line;
    std::set<std::string> spellings = {"--help", "-h"};
    for (const auto& f : (*c)["flags"]) {
      spellings.insert(f["name"].get<std::string>());
      if (f.contains("short")) spellings.insert(f["short"].get<std::string>());
      for (const auto& alias : f.value("aliases", json::array())) spellings.insert(alias.get<std::string>());
    }
    while (words >> word) {
      if (word.size() < 2 || word[0] != '-' || std::isdigit(static_cast<unsigned char>(word[1]))) continue;
      EXPECT_TRUE(spellings.count(word.substr(0, word.find('='))))
          << "toy " << cmd << " has no " << word << ": " << line;
    }
    ++rows;
  }
  EXPECT_GE(rows, 15);
}

TEST(CliManifest, DescribesEveryCommandAndFlag) {
  const json m = manifest();
  EXPECT_EQ(m["name"], "toy");
  EXPECT_FALSE(m["version"].get<std::string>().empty());
  EXPECT_EQ(m["event_schema"], "toy/v1");
  EXPECT_EQ(m["exit_codes"].size(), 7u);
  for (const char* code : {"0", "1", "2", "3", "4", "5", "130"}) EXPECT_TRUE(m["exit_codes"].contains(code)) << code;

  const auto overview = run_toy("--help");
  EXPECT_EQ(overview.code, 0);
  std::set<std::string> names;
  for (const auto& c : m["commands"]) {
    const std::string name = c["name"];
    names.insert(name);
    SCOPED_TRACE(name);
    EXPECT_FALSE(c["summary"].get<std::string>().empty());
    EXPECT_NE(overview.out.find("  " + name + " "), std::string::npos) << "toy --help does not list it";
    // toy CMD --help documents every flag the manifest names, with its default.
    const auto h = run_toy(name + " --help");
    ASSERT_EQ(h.code, 0);
    EXPECT_EQ(h.out.rfind("usage: toy " + name, 0), 0u);
    for (const auto& f : c["flags"]) {
      const std::string flag = f["name"];
      EXPECT_NE(h.out.find(flag), std::string::npos) << flag;
      EXPECT_FALSE(f["help"].get<std::string>().empty()) << flag;
      EXPECT_TRUE(std::set<std::string>({"bool", "int", "float", "string", "path"}).count(f["type"].get<std::string>()))
          << flag;
      const std::string def = flag_default(f);
      if (f["type"] != "bool" && !def.empty()) {
        EXPECT_NE(h.out.find("(default: " + def + ")"), std::string::npos) << flag;
      }
      if (f.contains("short")) {
        EXPECT_NE(h.out.find(f["short"].get<std::string>() + ", " + flag), std::string::npos) << flag;
      }
    }
    for (const auto& p : c["positionals"]) EXPECT_NE(h.out.find(p["name"].get<std::string>()), std::string::npos);
  }
  // The commands of the issue; each is registered by its own cmd_<name>.cpp.
  for (const char* want : {"new", "install", "list", "describe", "fetch", "infer", "train", "eval", "serve", "tokenize",
                           "bench", "init", "quantize", "runs"})
    EXPECT_TRUE(names.count(want)) << "toy " << want << " is not registered";
}

TEST(CliManifest, FlagsParseAsDeclared) {
  // A value of the wrong type for a typed flag is a usage error for every command.
  const auto m = manifest();  // a range-for over manifest()["commands"] would outlive the temporary
  for (const auto& c : m["commands"])
    for (const auto& f : c["flags"]) {
      if (f["type"] != "int" && f["type"] != "float") continue;
      auto r = run_toy(c["name"].get<std::string>() + " " + f["name"].get<std::string>() + " not-a-number");
      EXPECT_EQ(r.code, 2) << c["name"] << " " << f["name"] << ": " << r.err;
    }
}

TEST(CliManifest, FloatFlagsAreFinite) {
  // nan, inf and values beyond float32 (1e39) parse as numbers, and compare false with every range
  // check after: the flag parser refuses them, for every float flag of every command.
  const auto m = manifest();
  int checked = 0;
  for (const auto& c : m["commands"])
    for (const auto& f : c["flags"]) {
      if (f["type"] != "float") continue;
      for (const char* v : {"nan", "-inf", "1e39"}) {
        auto r = run_toy(c["name"].get<std::string>() + " " + f["name"].get<std::string>() + " " + v);
        EXPECT_EQ(r.code, 2) << c["name"] << " " << f["name"] << " " << v << ": " << r.err;
        EXPECT_NE(r.err.find("finite number"), std::string::npos) << r.err;
        ++checked;
      }
    }
  EXPECT_GT(checked, 0);
}

TEST(CliExitCodes, InferRangesAndContextLimit) {
  // The embedded default model: --ctx beyond its context was std::bad_alloc (exit 1).
  auto ctx = run_toy("infer --ids 1,2 -n 1 --ctx 1099511627776");
  EXPECT_EQ(ctx.code, 2) << ctx.err;
  EXPECT_NE(ctx.err.find("exceeds 8 times the model's context of"), std::string::npos) << ctx.err;
  for (const char* bad : {"--repeat-last-n -2",
                          "--repeat-last-n 4294967296",
                          "--top-k -1",
                          "--top-k 4294967296",
                          "--temp -0.5",
                          "--top-p 0",
                          "--min-p 2",
                          "--repeat-penalty 0",
                          "--typical 1.5",
                          "--xtc-probability 2",
                          "--xtc-threshold -1",
                          "--min-keep -1",
                          "--dry-base 0.5",
                          "--dry-multiplier -1",
                          "--dry-penalty-last-n -2",
                          "--mirostat 3",
                          "--mirostat-lr 2",
                          "--samplers 'top_k;bogus'",
                          "--sampling-seq kq",
                          "--samplers top_k --sampling-seq k",
                          "--logit-bias 5",
                          "--logit-bias x+1",
                          "--logit-bias 5+nan",
                          "--logit-bias 5+inf",
                          "--logit-bias 99999+1",
                          "-l 2*3"}) {
    auto r = run_toy(std::string("infer --ids 1,2 -n 1 ") + bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
  }
  EXPECT_EQ(run_toy("infer --ids 1,2 -n 1 --repeat-last-n 0 --temp 0").code, 0);
}

// Every sampler flag reaches the sampler: each run with the same seed gives the same text, a
// logit bias of +100 forces its token, "-inf" bans the greedy choice, and each sampler of the
// chain, alone, still writes text.
TEST(CliSampling, EveryFlagEndToEnd) {
  const std::string base = "infer -m " + std::string(TOY_SOURCE_DIR) + "/models/toy-stories.gguf -p Once -n 6 ";
  auto text = [&](const std::string& flags) {
    const auto r = run_toy(base + flags);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.err;
    return r.out;
  };
  EXPECT_EQ(text("--temp 0 --logit-bias 274+100"), "Once c c c c c c\n");  // 274 is " c"
  const std::string greedy = text("--temp 0");
  ASSERT_EQ(greedy.substr(0, 6), "Once u");  // 318 is " u"
  EXPECT_NE(text("--temp 0 -l 318-inf").substr(0, 6), "Once u");
  for (const std::string flags :
       {"--typical 0.5", "--top-n-sigma 1", "--xtc-probability 1 --xtc-threshold 0.05", "--min-keep 3 --top-p 0.1",
        "--presence-penalty 1 --frequency-penalty 0.5 --repeat-last-n -1", "--dry-multiplier 0.8 --dry-base 2",
        "--dry-multiplier 1 --dry-sequence-breaker none", "--dry-multiplier 1 --dry-sequence-breaker e",
        "--mirostat 1 --mirostat-ent 3", "--mirostat 2 --mirostat-lr 0.2", "--samplers 'top_k;temperature'",
        "--sampling-seq kt --top-k 2"}) {
    const std::string once = text(flags + " -s 5");
    EXPECT_EQ(text(flags + " -s 5"), once) << flags;
    EXPECT_GT(once.size(), std::string("Once\n").size()) << flags;
  }
}

TEST(CliExitCodes, EachCodeWhereDocumented) {
  EXPECT_EQ(run_toy("--help").code, 0);
  EXPECT_EQ(run_toy("").code, 2);  // no command: the overview, as a usage error
  EXPECT_EQ(run_toy("frobnicate").code, 2);
  EXPECT_EQ(run_toy("list --json=maybe").code, 2);
  EXPECT_EQ(run_toy("describe /nonexistent/model.gguf").code, 3);
  const fs::path dir = fs::path(testing::TempDir()) / ("toy_exit_" + std::to_string(::getpid()));
  fs::create_directories(dir / "taken" / "x");
  EXPECT_EQ(run_toy("new " + (dir / "taken").string()).code, 1);  // runtime failure: the directory exists
  fs::remove_all(dir);
}

// `toy bench --json` names the SIMD path in use and each weight dtype's matmul kernel, and
// TOY_SIMD changes both: scalar, and avx2 where the default is AVX-512 VNNI (one run takes ~1 s,
// mostly the bandwidth probe; KernelMatmul.KernelNamesFollowThePath checks every path's names).
// The embedded story model: F32 matrices and a 256-token context, so only tg128 and pp128 run.
TEST(CliBench, JsonReportsTheSimdPathAndKernels) {
  const std::string stories = (fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf").string();
  std::vector<std::pair<std::string, std::string>> cases = {{"scalar", "scalar"}};  // TOY_SIMD, F32 kernel
  if (toy::kernels::cpu_has_avx512vnni()) cases.push_back({"avx2", "avx2 fma 4x3"});
  for (const auto& [path, kernel] : cases) {
    toy::test::ScopedEnv env;
    env.set("TOY_SIMD", path);
    auto r = run_toy("bench " + stories + " --json --reps 1 --threads 1");
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["isa"]["TOY_SIMD"], path);
    EXPECT_EQ(j["isa"]["level"], path == "scalar" ? "scalar" : "avx2+fma+f16c");
    EXPECT_EQ(j["isa"]["cpu"], toy::kernels::cpu_simd_features());
    EXPECT_EQ(j["isa"]["float_tile"], "avx2: the avx512vnni path is not in use");
    EXPECT_TRUE(j["isa"]["TOY_FLOAT_TILE"].is_null());
    EXPECT_EQ(j["kernels"], json({{"F32", kernel}})) << r.out;
    EXPECT_GT(j["tg128"].get<double>(), 0);
    EXPECT_GT(j["roofline_fraction"].get<double>(), 0);
    EXPECT_TRUE(j["pp512"].is_null());  // beyond the context
  }
}

TEST(CliExitCodes, InterruptedIs130) {
  // A hub that accepts the connection and never answers: `toy fetch` waits until SIGINT.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const std::string cache = testing::TempDir() + "/toy_sigint_cache_" + std::to_string(::getpid());

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("HF_ENDPOINT", endpoint.c_str(), 1);
    ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
    const std::string bin = toy::test::toy_bin();
    ::execl(bin.c_str(), bin.c_str(), "fetch", "org/tiny", "model.gguf", "--quiet", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(s);
  fs::remove_all(cache);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
}
