// tests/test_cli_habits.cpp — the habits people bring from llama-cli, `ollama run` and mlx_lm (#20),
// each driven as a user drives the CLI: infer prints its prompt and ends cleanly, llama.cpp's flags,
// model names from the caches, and `toy chat` typed into a pseudo-terminal.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixtures.h"
#include "toy/io/gguf.h"

namespace fs = std::filesystem;
using Env = toy::test::ScopedEnv;
using toy::test::run_toy;

namespace {

const fs::path kStories = fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf";

// A scratch directory for one test, removed after it.
struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::path(testing::TempDir()) / ("toy_habits_" + std::to_string(::getpid()) + "_" +
                                          testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
};

// The embedded story model with a chat template of our own.
fs::path with_template(const fs::path& dir, const std::string& source) {
  auto f = toy::gguf::GgufFile::open(kStories.string());
  toy::gguf::GgufWriter w = toy::gguf::copy_of(*f);
  w.set("tokenizer.chat_template", toy::gguf::Value::of_string(source));
  const fs::path out = dir / "chat.gguf";
  w.write(out.string());
  return out;
}

const char* kTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

std::string without_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool ends_sentence(const std::string& s) {
  const size_t at = s.find_last_not_of("\"')");
  return at != std::string::npos && (s[at] == '.' || s[at] == '!' || s[at] == '?' || s.back() == '\n');
}

}  // namespace

TEST(InferHabits, PromptThenContinuationThatEndsCleanly) {
  // The first run: the default prompt is shown, and the text ends at a sentence (or the model's
  // end of text), not mid-word at the token budget.
  auto r = run_toy("infer --temp 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time,", 0), 0u) << r.out;
  const bool eos = r.err.find("end of text") != std::string::npos;
  EXPECT_TRUE(eos || r.err.find("sentence end") != std::string::npos) << r.err;
  EXPECT_TRUE(eos || ends_sentence(without_newline(r.out))) << r.out;

  // --no-display-prompt: the continuation alone, the same text.
  auto h = run_toy("infer --temp 0 -n 6 --no-display-prompt");
  ASSERT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(h.out.rfind("Once", 0), std::string::npos);
  EXPECT_EQ(r.out.rfind("Once upon a time" + without_newline(h.out), 0), 0u) << h.out;
  // An explicit -n is exact, and says so.
  EXPECT_NE(h.err.find("generated: 6 tokens"), std::string::npos) << h.err;
  EXPECT_NE(h.err.find("length limit"), std::string::npos) << h.err;

  // This model spells a space as the three byte tokens of "▁" right after BOS: shown as a space.
  auto b = run_toy("infer --ids 1 -n 3 --temp 0 --no-display-prompt");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(b.out.find("\xE2\x96\x81"), std::string::npos) << b.out;

  // The context, not -n, ends this one: reported as such.
  auto c = run_toy("infer --ids 1 -n 100 --ctx 8 --temp 0");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.err.find("context full"), std::string::npos) << c.err;

  // A context beyond the trained length: allowed for rotary positions, with a warning.
  const int64_t n_train = toy::gguf::GgufFile::open(kStories.string())->get_int("llama.context_length");
  auto w = run_toy("infer --ids 1 -n 2 --temp 0 --ctx " + std::to_string(2 * n_train));
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.err.find("beyond the " + std::to_string(n_train) + " tokens the model was trained on"), std::string::npos)
      << w.err;

  // A prompt longer than the context: its end is kept, with a warning.
  auto t = run_toy("infer -p 'Once upon a time there was a little dog who liked to run in the park' --ctx 16 -n 2");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.err.find("warning: the prompt has"), std::string::npos) << t.err;
  // The warning's count is the summary's (BOS and the last 7), and the smallest contexts agree too
  // (it once said "only its last 1" where the summary said 2 tokens).
  EXPECT_NE(t.err.find("only 8 are used, its BOS token and its last 7"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("prompt: 8 tokens"), std::string::npos) << t.err;
  auto tiny = run_toy("infer -p 'Once upon a time there was a little dog' --ctx 3 -n 1");
  ASSERT_EQ(tiny.code, 0) << tiny.err;
  EXPECT_NE(tiny.err.find("only 2 are used, its BOS token and its last 1"), std::string::npos) << tiny.err;
  EXPECT_NE(tiny.err.find("prompt: 2 tokens"), std::string::npos) << tiny.err;
}

TEST(LlamaCppHabits, FlagsHelpAndSuggestions) {
  Scratch s;
  const std::string m = kStories.string();
  auto a = run_toy("infer -m " + m + " -p 'Once upon a time' -n 6 -s 3 -t 1 -c 64 --temp 0");
  ASSERT_EQ(a.code, 0) << a.err;
  auto b =
      run_toy("infer " + m + " --prompt 'Once upon a time' --n-predict 6 --seed 3 --threads 1 --ctx-size 64 --temp 0");
  EXPECT_EQ(b.out, a.out);
  auto stdin_prompt = run_toy("infer -m " + m + " -p - -n 6 -s 3 --temp 0", "Once upon a time");
  EXPECT_EQ(stdin_prompt.out, a.out) << stdin_prompt.err;
  std::ofstream(s.dir / "prompt.txt") << "Once upon a time";
  auto file_prompt = run_toy("infer -m " + m + " -f " + (s.dir / "prompt.txt").string() + " -n 6 --temp 0");
  EXPECT_EQ(file_prompt.out, a.out) << file_prompt.err;
  // -ngl N puts the model on vulkan:0 unless --device says otherwise (test_device.cpp runs it there).
  auto ngl = run_toy("infer -m " + m + " -ngl 99 --device cpu -p 'Once upon a time' -n 6 -s 3 --temp 0");
  EXPECT_EQ(ngl.code, 0) << ngl.err;
  EXPECT_EQ(ngl.out, a.out);
  EXPECT_EQ(run_toy("infer -m " + m + " -ngl 0 --device vulkan -n 1").code, 2);  // the two contradict
  EXPECT_EQ(run_toy("infer " + m + " -m " + m + " -n 1").code, 2);               // the model twice
  EXPECT_EQ(run_toy("infer -m " + m + " -p x -f " + (s.dir / "prompt.txt").string()).code, 2);

  // toy help CMD is toy CMD --help.
  auto help = run_toy("help infer");
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out, run_toy("infer --help").out);
  EXPECT_NE(help.out.find("-c, --ctx, --ctx-size"), std::string::npos) << help.out;

  // A typo gets a suggestion.
  auto cmd = run_toy("infr");
  EXPECT_EQ(cmd.code, 2);
  EXPECT_NE(cmd.err.find("did you mean 'infer'?"), std::string::npos) << cmd.err;
  auto flag = run_toy("infer --n-predcit 3");
  EXPECT_EQ(flag.code, 2);
  EXPECT_NE(flag.err.find("did you mean '--n-predict'?"), std::string::npos) << flag.err;
  EXPECT_EQ(run_toy("infer --zzzzzzzz").err.find("did you mean"), std::string::npos);
}

TEST(LlamaCppHabits, EnvironmentVariablesAreChecked) {
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{{"TOY_THREADS", "abc"},
                                                                                    {"TOY_THREADS", "0"},
                                                                                    {"TOY_THREADS", "4x"},
                                                                                    {"TOY_SIMD", "avx9"},
                                                                                    {"TOY_FLOAT_TILE", "zmm"},
                                                                                    {"TOY_DEFAULT_MODEL", ""},
                                                                                    {"HF_ENDPOINT", "huggingface.co"},
                                                                                    {"TOY_GRAD_BUCKET", "1e6"},
                                                                                    {"TOY_GRAD_OVERLAP", "2"}}) {
    Env env;
    env.set(name, value);
    auto r = run_toy("infer -n 1");
    EXPECT_EQ(r.code, 2) << name << "=" << value << ": " << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
  Env env;
  env.set("TOY_THREADS", "2");
  EXPECT_EQ(run_toy("infer -n 1").code, 0);
}

TEST(ModelReferences, NamesFromTheCachesAndAmbiguity) {
  Scratch s;
  Env env;
  env.set("HOME", (s.dir / "home").string());
  env.set("HF_HUB_CACHE", (s.dir / "hf").string());
  env.set("OLLAMA_MODELS", (s.dir / "ollama").string());
  env.set("HF_ENDPOINT", "http://127.0.0.1:9");  // nothing listens: every name must resolve offline
  const fs::path snap = s.dir / "hf" / "models--org--stories" / "snapshots" / std::string(40, 'a');
  fs::create_directories(snap);
  fs::copy_file(kStories, snap / "stories-Q8_0.gguf");
  fs::copy_file(kStories, snap / "stories-F32.gguf");
  const std::string hex(64, 'e');
  fs::create_directories(s.dir / "ollama" / "blobs");
  fs::copy_file(kStories, s.dir / "ollama" / "blobs" / ("sha256-" + hex));
  const fs::path manifest = s.dir / "ollama" / "manifests" / "registry.ollama.ai" / "library" / "stories" / "latest";
  fs::create_directories(manifest.parent_path());
  std::ofstream(manifest) << nlohmann::json{{"schemaVersion", 2},
                                            {"layers",
                                             {{{"mediaType", "application/vnd.ollama.image.model"},
                                               {"digest", "sha256:" + hex}}}}}
                                 .dump();

  for (const char* ref : {"org/stories:Q8_0", "org/stories:q8_0", "hf:org/stories:F32", "org/stories/stories-F32.gguf",
                          "stories:latest", "stories"}) {
    auto r = run_toy(std::string("infer ") + ref + " -n 2 --temp 0");
    EXPECT_EQ(r.code, 0) << ref << ": " << r.err;
  }
  auto m = run_toy("infer -m stories -n 2 --temp 0");
  EXPECT_EQ(m.code, 0) << m.err;
  auto two = run_toy("infer org/stories -n 1");
  EXPECT_EQ(two.code, 3);
  EXPECT_NE(two.err.find("stories-Q8_0.gguf"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("stories-F32.gguf"), std::string::npos) << two.err;
  auto typo = run_toy("infer storis:latest -n 1");
  EXPECT_EQ(typo.code, 3);
  EXPECT_NE(typo.err.find("did you mean 'stories:latest'?"), std::string::npos) << typo.err;
  // Not in the cache and the hub unreachable: a network failure, not a crash.
  EXPECT_EQ(run_toy("infer org/stories:Q2_K -n 1").code, 4);
  EXPECT_EQ(run_toy("describe stories").code, 0);
}

TEST(ChatHabits, OneTurnThroughTheModelsTemplate) {
  Scratch s;
  const fs::path chat = with_template(s.dir, kTemplate);
  auto r = run_toy("infer " + chat.string() + " --chat -p 'Tell me a story.' --system 'Be brief.' -n 8 --temp 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("Tell me a story"), std::string::npos) << r.out;  // the answer only
  EXPECT_EQ(r.err.find("no chat template"), std::string::npos) << r.err;
  // The template is what renders the prompt: one that refuses says so.
  const fs::path refusing = with_template(s.dir, "{{ raise_exception('no chatting here') }}");
  auto no = run_toy("infer " + refusing.string() + " -cnv -p hi -n 2");
  EXPECT_EQ(no.code, 3);
  EXPECT_NE(no.err.find("no chatting here"), std::string::npos) << no.err;
  // A model without one: ChatML, with a warning.
  auto plain = run_toy("infer --chat -p hi -n 2 --temp 0");
  EXPECT_EQ(plain.code, 0) << plain.err;
  EXPECT_NE(plain.err.find("has no chat template"), std::string::npos) << plain.err;
}

namespace {

// `toy ARGS…` on a pseudo-terminal: what it writes is the screen; keys go in as a user types them.
struct Terminal {
  int fd = -1;
  pid_t pid = -1;
  std::string screen;

  explicit Terminal(const std::vector<std::string>& args) {
    pid = ::forkpty(&fd, nullptr, nullptr, nullptr);
    if (pid == 0) {
      std::vector<char*> argv;
      const std::string bin = toy::test::toy_bin();
      argv.push_back(const_cast<char*>(bin.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~Terminal() {
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (fd >= 0) ::close(fd);
  }
  void type(const std::string& keys) { ASSERT_EQ(::write(fd, keys.data(), keys.size()), ssize_t(keys.size())); }
  // Reads the screen until `text` appears after position `from` (`limit` at most); its end, or npos.
  size_t wait_for(const std::string& text, size_t from, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (size_t at = screen.find(text, from); at != std::string::npos) return at + text.size();
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        screen.append(buf, size_t(n));
      }
    }
    const size_t at = screen.find(text, from);
    return at == std::string::npos ? at : at + text.size();
  }
  int exit_code() {  // -1 when it has not exited within about 10 s
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      // Read the screen while waiting; once the program has closed the terminal that returns at
      // once, so sleep too: the process may end a moment after closing it.
      wait_for("\x01", screen.size(), std::chrono::milliseconds(100));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
};

}  // namespace

TEST(ChatHabits, InteractiveInAPseudoTerminal) {
  Scratch s;
  const fs::path chat = with_template(s.dir, kTemplate);
  Terminal t({"chat", chat.string(), "--system", "Be brief.", "-n", "6", "--temp", "0"});
  ASSERT_GT(t.pid, 0);
  size_t at = t.wait_for("> ", 0);
  ASSERT_NE(at, std::string::npos) << t.screen;
  EXPECT_NE(t.screen.find("/help"), std::string::npos) << t.screen;

  t.type("Tell me a story.\n");
  const size_t echoed = t.wait_for("Tell me a story.", at);
  ASSERT_NE(echoed, std::string::npos) << t.screen;
  at = t.wait_for("> ", echoed);
  ASSERT_NE(at, std::string::npos) << t.screen;
  const std::string answer = t.screen.substr(echoed, at - echoed - 2);
  EXPECT_NE(answer.find_first_not_of("\r\n "), std::string::npos) << "an empty answer: " << t.screen;

  // A line ending in '\' continues on the next.
  t.type("What happened \\\n");
  at = t.wait_for(". ", at);
  ASSERT_NE(at, std::string::npos) << t.screen;
  t.type("next?\n");
  at = t.wait_for("> ", t.wait_for("next?", at));
  ASSERT_NE(at, std::string::npos) << t.screen;

  // Ctrl-C at the prompt does not end the program; /clear and unknown commands answer.
  t.type("\x03");
  at = t.wait_for("> ", at);
  ASSERT_NE(at, std::string::npos) << t.screen;
  t.type("/clear\n");
  at = t.wait_for("(conversation cleared)", at);
  ASSERT_NE(at, std::string::npos) << t.screen;
  t.type("/frobnicate\n");
  at = t.wait_for("unknown command", at);
  ASSERT_NE(at, std::string::npos) << t.screen;
  t.type("/exit\n");
  EXPECT_EQ(t.exit_code(), 0) << t.screen;

  // Ctrl-C while an answer is written (here one of ~2000 tokens, seconds long) stops that answer,
  // not the program: the prompt comes back and the conversation goes on.
  Terminal u({"chat", chat.string(), "--ctx", "2048", "-n", "0", "--ignore-eos", "--temp", "0"});
  ASSERT_GT(u.pid, 0);
  at = u.wait_for("> ", 0);
  ASSERT_NE(at, std::string::npos) << u.screen;
  u.type("Tell me a story.\n");
  at = u.wait_for("Tell me a story.", at);
  ASSERT_NE(at, std::string::npos) << u.screen;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  u.type("\x03");
  at = u.wait_for(" [stopped]", at);
  ASSERT_NE(at, std::string::npos) << u.screen;
  at = u.wait_for("> ", at);
  ASSERT_NE(at, std::string::npos) << u.screen;
  u.type("/exit\n");
  EXPECT_EQ(u.exit_code(), 0) << u.screen;
}
