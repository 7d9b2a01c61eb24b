// tests/test_serve.cpp — `toy template` and `toy serve` end to end.
//
// The server is the real binary on an ephemeral loopback port (tests/serve/server_process.h),
// on real/llama-2-tiny-random.gguf (the full 32000-token LLaMA-2 vocabulary, tiny random weights,
// no chat template: ChatML). Covered: the chat-template CLI on every fixture case; the OpenAI
// routes and their JSON; SSE chunk format; stop strings; logprobs against `toy eval`; greedy
// output against `toy infer`; client mistakes and abuse (each with its documented status, after
// which the server still serves); a client that stops reading or vanishes mid-stream; the
// bounded queue; concurrency; SIGTERM; and the official `openai` npm SDK (skipped when node/npm
// or the registry is unavailable).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixtures.h"
#include "helpers.h"
#include "serve/server_process.h"
#include "toy/archs/lora.h"
#include "toy/io/gguf.h"
#include "toy/primitives/primitives.h"
#include "toy/serve/text_stream.h"
#include "toy/serve/tool_calls.h"

using json = nlohmann::json;
using toy::test::run_toy;
using toy::test::ServerProcess;
using toy::test::toy_bin;
namespace fs = std::filesystem;

namespace {

constexpr const char* kModel = "real/llama-2-tiny-random.gguf";

// Temporary files are per process: ctest -j runs tests as parallel processes.
std::string tmp(const std::string& name) {
  return testing::TempDir() + "/toy_serve_" + std::to_string(::getpid()) + "_" + name;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Reply {
  int status = 0;  // 0: no answer
  std::string body;
  json j() const { return json::parse(body, nullptr, false); }
};

Reply post(int port, const std::string& path, const std::string& body, int timeout_s = 60) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(timeout_s, 0);
  auto r = c.Post(path.c_str(), body, "application/json");
  return r ? Reply{r->status, r->body} : Reply{};
}
Reply post(int port, const std::string& path, const json& body) { return post(port, path, body.dump()); }

Reply get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  auto r = c.Get(path.c_str());
  return r ? Reply{r->status, r->body} : Reply{};
}

// The JSON objects of an SSE body ("data: {...}\n\n" ... "data: [DONE]\n\n"); `done` tells
// whether the [DONE] line came last.
std::vector<json> sse_events(const std::string& body, bool* done) {
  std::vector<json> events;
  *done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) {
      ADD_FAILURE() << "not an SSE data line: " << ev;
      continue;
    }
    ev = ev.substr(6);
    if (ev == "[DONE]") {
      *done = true;
      EXPECT_GE(pos, body.size()) << "[DONE] must be the last event";
      continue;
    }
    events.push_back(json::parse(ev));
  }
  return events;
}

// A raw loopback connection, for what an HTTP client library would not do.
struct RawConn {
  int fd = -1;
  explicit RawConn(int port, int rcvbuf = 0) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);  // before connect: sets the window
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~RawConn() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  bool send_all(const std::string& s) {
    for (size_t off = 0; off < s.size();) {
      const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }
  // Reads until `needle` appears or the peer closes (5 s at most).
  std::string read_until(const std::string& needle) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string got;
    char buf[4096];
    while (got.find(needle) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
    return got;
  }
};

std::string http_post_text(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

json health(int port) { return get(port, "/health").j(); }

// Waits until the server reports `busy` slots generating (5 s at most).
bool wait_busy(int port, int busy) {
  for (int i = 0; i < 100; ++i) {
    json h = health(port);
    if (h.is_object() && h.value("slots_processing", -1) == busy) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// A streaming request (of `n` choices) that takes a long time and whose client never reads: the
// server blocks in write once the (small) socket buffers are full, holding its slot.
std::unique_ptr<RawConn> hold_a_slot(int port, int n = 1) {
  auto c = std::make_unique<RawConn>(port, /*rcvbuf=*/4096);
  const json body = {{"model", "tiny"},    {"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                     {"max_tokens", 3000}, {"ignore_eos", true},
                     {"logprobs", true},   {"top_logprobs", 20},
                     {"stream", true},     {"n", n}};
  c->send_all(http_post_text("/v1/chat/completions", body.dump()));
  c->read_until("data: ");  // the stream has started
  return c;
}

// The answer's text (+ logprobs when asked) of a completion, from a plain or a streamed response.
std::string answer(const Reply& r, bool stream) {
  if (!stream) return r.j()["choices"][0].dump();
  bool done = false;
  std::string text;
  for (const json& e : sse_events(r.body, &done)) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// TextStream: what may be sent while stop strings can still match.

TEST(ServeTextStream, StopStringsAcrossPiecesAndUtf8) {
  toy::serve::TextStream t({"\n\nUser:", "END"});
  EXPECT_EQ(t.push("Hello"), "Hello");
  EXPECT_EQ(t.push(" world\n"), " world");  // "\n" may begin "\n\nUser:"
  EXPECT_EQ(t.push("\nUs"), "");            // still a prefix
  EXPECT_EQ(t.push("ual"), "\n\nUsual");    // no longer
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.push(" E"), " ");
  EXPECT_EQ(t.push("NDx"), "");  // "END" complete: nothing after it, nor the stop string, is sent
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.stop_at(), std::string("Hello world\n\nUsual ").size());
  EXPECT_EQ(t.push("more"), "");

  toy::serve::TextStream u({});
  EXPECT_EQ(u.push("caf\xC3"), "caf");  // "é" split over two byte tokens waits
  EXPECT_EQ(u.push("\xA9!"), "\xC3\xA9!");
  EXPECT_EQ(u.push("\xF0\x9F"), "");  // half an emoji
  EXPECT_EQ(u.finish(), "\xF0\x9F");  // at the end, whatever is left goes out

  toy::serve::TextStream v({"ab", "b"});  // the earliest match wins
  EXPECT_EQ(v.push("xab"), "x");
  EXPECT_TRUE(v.stopped());
}

// ---------------------------------------------------------------------------------------------
// `toy template`: every fixture case renders to exactly llama.cpp's prompt.

TEST(ServeTemplate, EveryFixtureCaseRendersExactly) {
  const auto files = toy::test::fixture_files("chat-templates", ".json");
  if (files.empty()) GTEST_SKIP() << "chat-template fixtures not found (set TOY_FIXTURES)";
  int n = 0;
  for (const fs::path& cases_path : files) {
    const json spec = json::parse(toy::test::read_text(cases_path));
    const fs::path tmpl = cases_path.parent_path() / spec["template"].get<std::string>();
    for (size_t i = 0; i < spec["cases"].size(); ++i) {
      const json& c = spec["cases"][i];
      SCOPED_TRACE(tmpl.filename().string() + " case " + std::to_string(i));
      const std::string msgs = tmp("messages.json");
      std::ofstream(msgs) << c["messages"].dump();
      const auto r = run_toy("template " + shell_quote(tmpl.string()) + " --messages " + msgs + " --bos-token " +
                             shell_quote(spec["bos_token"]) + " --eos-token " + shell_quote(spec["eos_token"]) +
                             " --today 2026-11-30");
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, c["prompt"].get<std::string>());
      ++n;
    }
  }
  EXPECT_GT(n, 20);
}

TEST(ServeTemplate, InputsAndErrors) {
  const std::string dir = tmp("dir");
  fs::create_directories(dir);
  std::ofstream(dir + "/t_msgs.json") << R"({"messages": [{"role": "user", "content": "Hi"}]})";
  std::ofstream(dir + "/t_plain.jinja") << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  std::ofstream(dir + "/t_bad.jinja") << "{% for m in messages %}{{ m.content ";
  std::ofstream(dir + "/t_bad.json") << "[{\"role\": ";

  auto r = run_toy("template " + dir + "/t_plain.jinja --messages " + dir + "/t_msgs.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[user] Hi\n");  // the template's own newline, none added
  r = run_toy("template " + dir + "/t_plain.jinja --messages -", R"([{"role": "user", "content": "stdin"}])");
  EXPECT_EQ(r.out, "[user] stdin\n");
  EXPECT_EQ(run_toy("template " + dir + "/t_plain.jinja").code, 2);                                   // no --messages
  EXPECT_EQ(run_toy("template " + dir + "/t_bad.jinja --messages " + dir + "/t_msgs.json").code, 3);  // template syntax
  EXPECT_EQ(run_toy("template " + dir + "/t_plain.jinja --messages " + dir + "/t_bad.json").code, 3);  // messages JSON
  EXPECT_EQ(run_toy("template " + dir + "/t_plain.jinja --messages " + dir + "/t_msgs.json --today 2026-13-45").code,
            2);

  // A GGUF without a template: ChatML, as the server uses; BOS is not a string in the output.
  const fs::path model = toy::test::fixture(kModel);
  if (model.empty()) return;
  r = run_toy("template " + model.string() + " --messages " + dir + "/t_msgs.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// ---------------------------------------------------------------------------------------------
// One server for most tests: two slots, a short queue, a 1024-token context, a 64 KiB body limit.

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A write to a connection the server closed must fail the request here, not end the test
    // binary (httplib's client does not pass MSG_NOSIGNAL everywhere).
    std::signal(SIGPIPE, SIG_IGN);
    model_ = toy::test::fixture(kModel);
    if (model_.empty()) return;
    // Every client here comes from 127.0.0.1, and ManyConcurrentClientsGetIndependentAnswers
    // holds up to 64 connections at once: above the default per-address limit (16), which
    // ServeLifecycle.SlowClientsDoNotStarveTheServer tests on a server of its own.
    server_ = new ServerProcess(
        model_.string(),
        "--name tiny --parallel 2 --queue 4 --ctx 1024 --max-body 65536 --timeout 30 --conns-per-client 128");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (model_.empty()) GTEST_SKIP() << "fixture " << kModel << " not found (set TOY_FIXTURES)";
    ASSERT_NE(server_->port(), 0) << "the server did not start:\n" << server_->log();
    port = server_->port();
  }
  void TearDown() override {
    if (server_ && port) {
      EXPECT_TRUE(server_->alive()) << "the server died:\n" << server_->log();
    }
  }
  static inline fs::path model_;
  static inline ServerProcess* server_ = nullptr;
  int port = 0;
};

TEST_F(Serve, HealthModelsTokenize) {
  json h = health(port);
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["slots_idle"], 2);
  Reply m = get(port, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.j()["object"], "list");
  EXPECT_EQ(m.j()["data"][0]["id"], "tiny");
  EXPECT_EQ(get(port, "/v1/models/tiny").status, 200);
  EXPECT_EQ(get(port, "/v1/models/other").status, 404);

  Reply t = post(port, "/tokenize", json{{"content", "Hello world"}, {"add_special", true}});
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.j()["tokens"][0], 1);  // BOS
  const json ids = post(port, "/tokenize", json{{"content", "Hello world"}}).j()["tokens"];
  Reply d = post(port, "/detokenize", json{{"tokens", ids}});
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.j()["content"], "Hello world");  // SPM: the space added in front is dropped again
}

TEST_F(Serve, GreedyCompletionEqualsToyInfer) {
  const std::string prompt = "Once upon a time, there was a little girl who lived in a village near the forest.";
  const auto infer =
      run_toy("infer " + model_.string() + " --prompt " + shell_quote(prompt) + " -n 24 --temp 0 --no-display-prompt");
  ASSERT_EQ(infer.code, 0) << infer.err;
  ASSERT_FALSE(infer.out.empty());
  const std::string expected = infer.out.substr(0, infer.out.size() - 1);  // infer ends with "\n"

  Reply r = post(port, "/v1/completions",
                 json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  if (j["choices"][0]["finish_reason"] == "length") {
    EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  }

  // The same through the streaming path and with token ids as the prompt.
  r = post(port, "/v1/completions",
           json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"stream", true}});
  bool done = false;
  std::string text;
  for (const json& e : sse_events(r.body, &done)) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  EXPECT_EQ(text, expected);
  const json ids = post(port, "/tokenize", json{{"content", prompt}, {"add_special", true}}).j()["tokens"];
  r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}});
  EXPECT_EQ(r.j()["choices"][0]["text"], expected);
}

// llama-server's sampler fields: each configuration, seeded, gives the text `toy infer` gives
// with the same flags and seed; a value out of range is a 400 that names the field.
TEST_F(Serve, LlamaServerSamplerFieldsAsToyInfer) {
  const std::string prompt = "Once upon a time, there was a little girl";
  const json c_ids = post(port, "/tokenize", json{{"content", " c"}}).j()["tokens"];
  std::string c_flags;
  for (const json& id : c_ids) c_flags += " -l " + std::to_string(id.get<int>()) + "+3";
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"mirostat", 2}, {"mirostat_tau", 3}, {"mirostat_eta", 0.2}, {"temperature", 0.9}},
       "--mirostat 2 --mirostat-ent 3 --mirostat-lr 0.2 --temp 0.9"},
      {{{"mirostat", 1}, {"mirostat_tau", 4}, {"temperature", 1}}, "--mirostat 1 --mirostat-ent 4 --temp 1"},
      {{{"typical_p", 0.6},
        {"top_n_sigma", 1.5},
        {"xtc_probability", 0.5},
        {"xtc_threshold", 0.05},
        {"min_keep", 2},
        {"temperature", 1.1}},
       "--typical 0.6 --top-n-sigma 1.5 --xtc-probability 0.5 --xtc-threshold 0.05 --min-keep 2 --temp 1.1"},
      {{{"dry_multiplier", 0.8},
        {"dry_base", 2},
        {"dry_allowed_length", 1},
        {"dry_penalty_last_n", -1},
        {"dry_sequence_breakers", {"e"}},
        {"repeat_penalty", 1.2},
        {"presence_penalty", 0.5},
        {"frequency_penalty", 0.3},
        {"repeat_last_n", 32},
        {"temperature", 1}},
       "--dry-multiplier 0.8 --dry-base 2 --dry-allowed-length 1 --dry-penalty-last-n -1 --dry-sequence-breaker e "
       "--repeat-penalty 1.2 --presence-penalty 0.5 --frequency-penalty 0.3 --repeat-last-n 32 --temp 1"},
      {{{"dry_multiplier", 1}, {"temperature", 0.7}}, "--dry-multiplier 1 --temp 0.7"},  // the default breakers
      {{{"samplers", {"top_k", "temperature"}}, {"top_k", 5}, {"temperature", 1.5}},
       "--samplers 'top_k;temperature' --top-k 5 --temp 1.5"},
      {{{"samplers", "kt"}, {"top_k", 3}, {"temperature", 2}}, "--sampling-seq kt --top-k 3 --temp 2"},
      {{{"logit_bias", json::array({json::array({" c", 3})})}, {"temperature", 1}}, c_flags + " --temp 1"},
      {{{"logit_bias", {{318, false}}}, {"temperature", 0}}, "-l 318-inf --temp 0"},
  };
  for (const auto& [fields, flags] : cases) {
    SCOPED_TRACE(flags);
    const auto infer = run_toy("infer " + model_.string() + " --prompt " + shell_quote(prompt) +
                               " -n 20 -s 42 --top-k 0 --top-p 1 --min-p 0 --no-display-prompt " + flags);
    ASSERT_EQ(infer.code, 0) << infer.err;
    json body = {{"prompt", prompt}, {"max_tokens", 20}, {"seed", 42}, {"top_k", 0}, {"top_p", 1}, {"min_p", 0}};
    body.update(fields);
    const Reply r = post(port, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j()["choices"][0]["text"].get<std::string>() + "\n", infer.out);
  }
  for (const json& bad : {json{{"typical_p", 1.5}},
                          json{{"mirostat", 3}},
                          json{{"mirostat_eta", -1}},
                          json{{"dry_base", 0.5}},
                          json{{"dry_penalty_last_n", -2}},
                          json{{"xtc_probability", 2}},
                          json{{"repeat_penalty", 0}},
                          json{{"repeat_last_n", -5}},
                          json{{"min_keep", -1}},
                          json{{"samplers", {"top_k", "bogus"}}},
                          json{{"samplers", "kq"}},
                          json{{"samplers", 5}},
                          json{{"samplers", {"top_k;temperature"}}},
                          json{{"dry_sequence_breakers", {""}}},
                          json{{"dry_sequence_breakers", "x"}},
                          json{{"logit_bias", {{5}}}},
                          json{{"logit_bias", {{5, true}}}},
                          json{{"logit_bias", {{-1, 2}}}},
                          json{{"logit_bias", {{5, 500}}}},
                          json{{"logit_bias", {{"5", 1.5}, {"x", 1}}}},
                          json{{"logit_bias", {{999999, 1}}}}}) {
    json body = {{"prompt", prompt}, {"max_tokens", 2}};
    body.update(bad);
    const Reply r = post(port, "/v1/completions", body);
    EXPECT_EQ(r.status, 400) << bad.dump() << " -> " << r.body;
    EXPECT_EQ(r.j()["error"]["param"].get<std::string>().substr(0, bad.begin().key().size()), bad.begin().key())
        << r.body;
  }
}

TEST_F(Serve, ChatCompletionObject) {
  Reply r =
      post(port, "/v1/chat/completions",
           json{{"model", "tiny"},
                {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi!"}}}},
                {"max_tokens", 8},
                {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  // The prompt is the ChatML rendering (`toy template` prints it), tokenized with BOS.
  const std::string chatml =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n";
  const json ids = post(port, "/tokenize", json{{"content", chatml}, {"add_special", true}}).j()["tokens"];
  EXPECT_EQ(j["usage"]["prompt_tokens"], ids.size());
  // Content parts are joined text; "developer" is the system role.
  Reply parts = post(port, "/v1/chat/completions",
                     json{{"model", "tiny"},
                          {"messages",
                           {{{"role", "developer"}, {"content", "Be brief."}},
                            {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi!"}}}}}}},
                          {"max_tokens", 8},
                          {"temperature", 0}});
  ASSERT_EQ(parts.status, 200) << parts.body;
  EXPECT_EQ(parts.j()["choices"][0]["message"]["content"], j["choices"][0]["message"]["content"]);
}

TEST_F(Serve, StreamingChunkFormat) {
  const json msgs = {{{"role", "user"}, {"content", "Tell me a story."}}};
  Reply whole = post(port, "/v1/chat/completions",
                     json{{"model", "tiny"}, {"messages", msgs}, {"max_tokens", 10}, {"temperature", 0}});
  Reply r = post(port, "/v1/chat/completions",
                 json{{"model", "tiny"},
                      {"messages", msgs},
                      {"max_tokens", 10},
                      {"temperature", 0},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const auto ev = sse_events(r.body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(ev[i]["id"], ev[0]["id"]);
    EXPECT_TRUE(ev[i].contains("usage"));  // null on all but the last
    if (i + 2 < ev.size()) {
      EXPECT_TRUE(ev[i]["choices"][0]["finish_reason"].is_null());
      EXPECT_TRUE(ev[i]["usage"].is_null());
      text += ev[i]["choices"][0]["delta"].value("content", "");
    }
  }
  const json& last = ev[ev.size() - 2];
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], whole.j()["choices"][0]["finish_reason"]);
  EXPECT_TRUE(ev.back()["choices"].empty());
  // The same usage, but for the cached tokens: the second request reuses the first one's prompt.
  json usage = ev.back()["usage"], whole_usage = whole.j()["usage"];
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"].get<int>() - 1);
  usage.erase("prompt_tokens_details");
  whole_usage.erase("prompt_tokens_details");
  EXPECT_EQ(usage, whole_usage);
  EXPECT_EQ(text, whole.j()["choices"][0]["message"]["content"]);

  // Without include_usage there is no usage key at all.
  r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 3}, {"stream", true}});
  for (const json& e : sse_events(r.body, &done)) {
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_FALSE(e.contains("usage"));
  }
  EXPECT_TRUE(done);
}

TEST_F(Serve, StopStringsSpanningTokens) {
  const json base = {
      {"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  json with_tokens = base;
  with_tokens["logprobs"] = 0;
  const json full = post(port, "/v1/completions", with_tokens).j();
  const std::string text = full["choices"][0]["text"];
  const json pieces = full["choices"][0]["logprobs"]["tokens"];
  // A stop string that starts inside one token and ends inside the next: the last two bytes of
  // one piece and the first two of the following one (ASCII pieces of at least 3 bytes).
  auto ascii = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  };
  std::string stop;
  for (size_t i = 2; i + 1 < pieces.size() && stop.empty(); ++i) {
    const std::string a = pieces[i], b = pieces[i + 1];
    if (a.size() >= 3 && b.size() >= 3 && ascii(a.substr(a.size() - 2)) && ascii(b.substr(0, 2)))
      stop = a.substr(a.size() - 2) + b.substr(0, 2);
  }
  if (stop.empty()) GTEST_SKIP() << "no two adjacent pieces of 3+ bytes in: " << text;
  const size_t first = text.find(stop);
  ASSERT_NE(first, std::string::npos);
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    json body = base;
    body["stop"] = json::array({"no such text", stop});
    body["stream"] = stream;
    Reply r = post(port, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    std::string got, finish;
    if (stream) {
      bool done = false;
      for (const json& e : sse_events(r.body, &done)) {
        got += e["choices"][0]["text"].get<std::string>();
        if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
      }
    } else {
      got = r.j()["choices"][0]["text"];
      finish = r.j()["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(got, text.substr(0, first));  // the stop string itself is not sent
    EXPECT_EQ(finish, "stop");
  }
  // A plain string works too.
  json body = base;
  body["stop"] = stop;
  EXPECT_EQ(post(port, "/v1/completions", body).j()["choices"][0]["text"], text.substr(0, first));
}

TEST_F(Serve, EchoLogprobsEqualToyEval) {
  const std::string text = "The cat sat on the mat and looked at the dog.";
  Reply r = post(port, "/v1/completions",
                 json{{"model", "tiny"}, {"prompt", text}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = r.j()["choices"][0]["logprobs"];
  EXPECT_EQ(r.j()["choices"][0]["text"], text);
  const auto ev = run_toy("eval " + model_.string() + " --text " + shell_quote(text) + " --top-k 3 --json");
  ASSERT_EQ(ev.code, 0) << ev.err;
  const json e = json::parse(ev.out);
  ASSERT_EQ(lp["token_logprobs"].size(), e["tokens"].size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  for (size_t i = 1; i < e["tokens"].size(); ++i) {
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), e["tokens"][i]["logprob"].get<double>(), 1e-5) << i;
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
    const double best = e["tokens"][i]["top"][0]["logprob"];
    double server_best = -1e9;
    for (auto& [k, v] : lp["top_logprobs"][i].items()) server_best = std::max(server_best, v.get<double>());
    EXPECT_NEAR(server_best, best, 1e-5);
  }
  // Offsets are increasing; generated tokens continue after the echoed text.
  Reply g = post(port, "/v1/completions",
                 json{{"model", "tiny"},
                      {"prompt", text},
                      {"max_tokens", 4},
                      {"echo", true},
                      {"logprobs", 0},
                      {"temperature", 0},
                      {"ignore_eos", true}});
  const json glp = g.j()["choices"][0]["logprobs"];
  ASSERT_EQ(glp["tokens"].size(), e["tokens"].size() + 4);
  EXPECT_EQ(glp["text_offset"][e["tokens"].size()], text.size());
}

TEST_F(Serve, ChatLogprobsAreGreedyChoices) {
  Reply r = post(port, "/v1/chat/completions",
                 json{{"model", "tiny"},
                      {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                      {"max_tokens", 5},
                      {"temperature", 0},
                      {"logprobs", true},
                      {"top_logprobs", 2},
                      {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json c = r.j()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(c.size(), 5u);
  std::string joined;
  for (const json& t : c) {
    EXPECT_NEAR(t["logprob"].get<double>(), t["top_logprobs"][0]["logprob"].get<double>(), 1e-9);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
    joined += t["token"].get<std::string>();
  }
  EXPECT_EQ(joined, r.j()["choices"][0]["message"]["content"]);
}

TEST_F(Serve, MaxTokensIsCappedAtTheContext) {
  Reply r = post(port, "/v1/completions",
                 json{{"model", "tiny"},
                      {"prompt", "Hello"},
                      {"max_tokens", 1000000000},
                      {"ignore_eos", true},
                      {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json u = r.j()["usage"];
  EXPECT_EQ(u["total_tokens"], 1024);  // the context (--ctx 1024) is full
  EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "length");
  // A prompt longer than the context is refused with 400, not cut.
  std::string longp;
  for (int i = 0; i < 1100; ++i) longp += " cat";
  r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", longp}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "context_length_exceeded");
  r = post(port, "/v1/chat/completions",
           json{{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", longp}}}}});
  EXPECT_EQ(r.status, 400);
}

// Every client mistake gets its documented status and an OpenAI error object.
TEST_F(Serve, ClientMistakes) {
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* param;  // expected error.param, "" for any
  };
  const std::string msgs = R"([{"role":"user","content":"Hi"}])";
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{not json", 400, ""},
      {"/v1/chat/completions", "", 400, ""},
      {"/v1/chat/completions", "[1, 2]", 400, ""},
      {"/v1/chat/completions", R"({"model":"tiny"})", 400, "messages"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":[]})", 400, "messages"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":"hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":[{"role":"wizard","content":"x"}]})", 400,
       "messages[0].role"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
       ""},
      {"/v1/chat/completions", R"({"model":5,"messages":)" + msgs + "}", 400, "model"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"temperature":"hot"})", 400,
       "temperature"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"temperature":7})", 400, "temperature"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"max_tokens":-1})", 400, "max_tokens"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"max_tokens":2.5})", 400, "max_tokens"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"stream":"yes"})", 400, "stream"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"stop":[1]})", 400, ""},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"n":0})", 400, "n"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"n":129})", 400, "n"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"top_logprobs":3})", 400, "top_logprobs"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":)" + msgs + R"(,"logit_bias":{"x":1}})", 400,
       "logit_bias"},
      {"/v1/completions", R"({"model":"tiny"})", 400, "prompt"},
      {"/v1/completions", R"({"model":"tiny","prompt":5})", 400, "prompt"},
      {"/v1/completions", R"({"model":"tiny","prompt":[1,-2]})", 400, "prompt"},
      {"/v1/completions", R"({"model":"tiny","prompt":[1,99999999]})", 400, "prompt"},
      {"/v1/completions", R"({"model":"tiny","prompt":["a","b"]})", 400, "prompt"},
      {"/v1/completions", R"({"model":"tiny","prompt":"x","logprobs":true})", 400, "logprobs"},
      {"/v1/completions", R"({"model":"tiny","prompt":"x","suffix":"y"})", 400, "suffix"},
      {"/v1/no-such-route", "{}", 404, ""},
      {"/tokenize", R"({"content":5})", 400, "content"},
      {"/detokenize", R"({"tokens":[-1]})", 400, "tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.body);
    Reply r = post(port, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    const json j = r.j();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code"));
    if (*c.param) {
      EXPECT_EQ(j["error"]["param"], c.param);
    }
  }
  EXPECT_EQ(get(port, "/nowhere").status, 404);
  EXPECT_EQ(get(port, "/v1/chat/completions").status, 405);  // a known route, the wrong method
  EXPECT_EQ(
      post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "still serving"}, {"max_tokens", 2}}).status,
      200);
}

// n > 1: choice i is the answer of n = 1 with seed + i, streamed (chunks carry their index) or not.
TEST_F(Serve, SeveralChoicesAreSeededPerChoice) {
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = std::string(path) == "/v1/chat/completions";
    auto ask = [&](int n, uint64_t seed, bool stream) {
      json q = {{"model", "tiny"}, {"max_tokens", 6}, {"temperature", 1},
                {"seed", seed},    {"n", n},          {"ignore_eos", true}};
      if (chat)
        q["messages"] = {{{"role", "user"}, {"content", "Tell me a story"}}};
      else
        q["prompt"] = "Once upon a time";
      if (stream) q.update({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
      const Reply r = post(port, path, q);
      EXPECT_EQ(r.status, 200) << r.body;
      std::vector<std::string> texts(static_cast<size_t>(n), "");
      int64_t completion_tokens = -1;
      if (!stream) {
        const json j = r.j();
        EXPECT_EQ(j["choices"].size(), size_t(n));
        for (const json& c : j["choices"])
          texts.at(c["index"].get<size_t>()) = chat ? c["message"]["content"] : c["text"];
        completion_tokens = j["usage"]["completion_tokens"];
      } else {
        bool done = false;
        for (const json& e : sse_events(r.body, &done)) {
          if (e["choices"].empty()) completion_tokens = e["usage"]["completion_tokens"];
          for (const json& c : e["choices"])
            texts.at(c["index"].get<size_t>()) += chat ? c["delta"].value("content", "") : c["text"].get<std::string>();
        }
        EXPECT_TRUE(done);
      }
      EXPECT_EQ(completion_tokens, 6 * n) << "usage counts every choice";
      return texts;
    };
    const std::vector<std::string> three = ask(3, 21, false);
    EXPECT_EQ(ask(3, 21, true), three);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(ask(1, 21 + uint64_t(i), false)[0], three[size_t(i)]) << "choice " << i;
    EXPECT_TRUE(three[0] != three[1] || three[1] != three[2]);
  }
}

// Structured output from the random-weight model: every answer under response_format json_schema
// parses and validates (python3's jsonschema, the reference validator) across schemas with
// nested objects, arrays, enums, numbers, anyOf, recursion and strings with escapes; json_object
// gives objects; a GBNF grammar gives its sentences; malformed grammars and schemas are 400s
// that say what is wrong.
TEST_F(Serve, StructuredOutputAlwaysValidates) {
  const std::vector<json> schemas = {
      json::parse(R"({"type": "object", "properties": {
          "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
          "score": {"type": "number"}, "kind": {"enum": ["cat", "dog", "say \"hi\"\n"]},
          "address": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 12},
                      "zip": {"type": ["string", "null"], "maxLength": 5}}, "required": ["street", "zip"],
                      "additionalProperties": false},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
          "ok": {"type": "boolean"}},
          "required": ["name", "age", "score", "kind", "address", "tags", "ok"], "additionalProperties": false})"),
      json::parse(R"({"type": "array", "items": {"type": "object", "properties": {
          "x": {"type": "number"}, "label": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]}},
          "required": ["x"]}, "minItems": 1, "maxItems": 3})"),
      json::parse(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"],
          "additionalProperties": false}}, "$ref": "#/$defs/node"})"),
      json::parse(R"({"type": "object", "properties": {"unit": {"const": "kg"}, "values": {"type": "array",
          "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}, "note": {"type": "string", "maxLength": 8}},
          "required": ["unit", "values"]})"),
  };
  const std::string lines = tmp("structured.jsonl");
  std::ofstream out(lines);
  int samples = 0;
  for (size_t k = 0; k < schemas.size(); ++k) {
    const json q = {
        {"model", "tiny"},
        {"messages", {{{"role", "user"}, {"content", "Give me JSON"}}}},
        {"max_tokens", 600},
        {"temperature", 1},
        {"seed", 100 + k},
        {"n", 10},
        {"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"strict", true}, {"schema", schemas[k]}}}}}};
    const Reply r = post(port, "/v1/chat/completions", q);
    ASSERT_EQ(r.status, 200) << r.body;
    const json answer = r.j();
    for (const json& c : answer["choices"]) {
      const std::string text = c["message"]["content"];
      EXPECT_EQ(c["finish_reason"], "stop") << text;
      out << json{{"schema", schemas[k]}, {"text", text}}.dump() << "\n";
      ++samples;
    }
  }
  out.close();
  EXPECT_EQ(samples, 40);
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") == 0) {
    const std::string script = tmp("validate.py");
    std::ofstream(script) << "import json, sys, jsonschema\n"
                             "n = 0\n"
                             "for line in open(sys.argv[1]):\n"
                             "    case = json.loads(line)\n"
                             "    jsonschema.validate(json.loads(case['text']), case['schema'])\n"
                             "    n += 1\n"
                             "print(n, 'valid')\n";
    const int code = std::system(("python3 " + script + " " + lines + " >" + lines + ".out 2>&1").c_str());
    const std::string result = toy::test::read_text(lines + ".out");
    EXPECT_EQ(code, 0) << result;
    EXPECT_NE(result.find("40 valid"), std::string::npos) << result;
  } else {
    ADD_FAILURE() << "python3 with the jsonschema module (Debian: python3-jsonschema) is needed";
  }

  // json_object, streamed: the deltas put together are one object. An object may hold strings
  // of any length, which a random model rarely closes: a bias towards tokens that close strings
  // and objects ('"}', '",', ...; still allowed only where the grammar says) ends it in budget.
  json bias = json::object();
  const json pieces = post(port, "/tokenize", json{{"content", "x\"}x\",x\"x}"}, {"with_pieces", true}}).j();
  for (const json& t : pieces["tokens"])
    if (t["piece"].get<std::string>().find('x') == std::string::npos) bias[std::to_string(t["id"].get<int>())] = 8;
  json q = {{"model", "tiny"},
            {"prompt", "JSON:"},
            {"max_tokens", 600},
            {"seed", 5},
            {"stream", true},
            {"logit_bias", bias},
            {"response_format", {{"type", "json_object"}}}};
  Reply r = post(port, "/v1/completions", q);
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  std::string text;
  for (const json& e : sse_events(r.body, &done)) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
  // A GBNF grammar: only its sentences, and the end once one is complete.
  q = {{"model", "tiny"}, {"prompt", "Answer:"}, {"max_tokens", 50},
       {"n", 8},          {"seed", 1},           {"grammar", "root ::= (\"yes\" | \"no\") \"!\""}};
  r = post(port, "/v1/completions", q);
  ASSERT_EQ(r.status, 200) << r.body;
  const json answers = r.j();
  ASSERT_EQ(answers["choices"].size(), 8u);
  for (const json& c : answers["choices"]) {
    EXPECT_TRUE(c["text"] == "yes!" || c["text"] == "no!") << c["text"];
    EXPECT_EQ(c["finish_reason"], "stop");
  }

  // Mistakes: 400 with what and where.
  auto error = [&](const json& extra) {
    json body = {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}};
    body.update(extra);
    const Reply e = post(port, "/v1/completions", body);
    EXPECT_EQ(e.status, 400) << e.body;
    return e.j()["error"];
  };
  json e = error({{"grammar", "root ::= \"a\" item"}});
  EXPECT_EQ(e["param"], "grammar");
  EXPECT_EQ(e["message"], "invalid 'grammar': grammar: line 1, column 14: undefined rule 'item'");
  e = error({{"grammar", "root ::= [a-"}});
  EXPECT_NE(e["message"].get<std::string>().find("unterminated character class"), std::string::npos) << e;
  e = error({{"response_format",
              {{"type", "json_schema"},
               {"json_schema", {{"name", "s"}, {"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}}}});
  EXPECT_EQ(e["param"], "response_format.json_schema.schema");
  EXPECT_EQ(e["message"], "invalid 'response_format.json_schema.schema': schema at /: 'pattern' is not supported");
  e = error({{"response_format", {{"type", "yaml"}}}});
  EXPECT_EQ(e["param"], "response_format.type");
  e = error({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}});
  EXPECT_EQ(e["param"], "grammar");
  e = error({{"response_format", {{"type", "json_schema"}}}});
  EXPECT_EQ(e["param"], "response_format.json_schema");
}

// A grammar whose states hold every way of parsing the text (nested optional parts that match
// the same text) is refused when its start shows it, from GBNF, a JSON Schema or a tool's
// parameters; one that shows it only later ends its answer with a 400 (an error event when
// streamed) at the step that exceeds the matcher's bounds, and the server goes on.
TEST_F(Serve, AmbiguousGrammarsAreRefusedOrEndWithAnError) {
  const std::string nested = R"((("a"{0,60}){0,60}){0,60})";
  auto ask = [&](const json& extra) {
    json body = {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 40}, {"seed", 3}};
    body.update(extra);
    return post(port, "/v1/completions", body);
  };
  Reply r = ask({{"grammar", "root ::= " + nested}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "invalid_grammar");
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("too ambiguous"), std::string::npos) << r.body;
  const json doubling = json::parse(R"({"$defs": {"a": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/a"}},
      {"type": "array", "maxItems": 5, "items": {"$ref": "#/$defs/a"}}]}}, "$ref": "#/$defs/a"})");
  r = ask({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", doubling}}}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "invalid_json_schema");
  const json tools = {{{"type", "function"},
                       {"function",
                        {{"name", "f"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"x", doubling}}},
                           {"required", {"x"}},
                           {"$defs", doubling["$defs"]}}}}}}};
  r = post(port, "/v1/chat/completions",
           json{{"model", "tiny"},
                {"messages", {{{"role", "user"}, {"content", "x"}}}},
                {"tools", tools},
                {"tool_choice", "required"},
                {"max_tokens", 8}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["param"], "tools");
  // 300 letters first: the probe at compile time (256 bytes) stops before the nested part.
  const std::string late = "root ::= [a-z]{300} " + nested;
  r = ask({{"grammar", late}, {"max_tokens", 400}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "grammar_too_complex");
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("too ambiguous"), std::string::npos) << r.body;
  r = ask({{"grammar", late}, {"max_tokens", 400}, {"stream", true}});
  EXPECT_EQ(r.status, 200) << r.body;
  bool done = false;
  const std::vector<json> events = sse_events(r.body, &done);
  EXPECT_FALSE(done);
  ASSERT_FALSE(events.empty()) << r.body;
  EXPECT_EQ(events.back()["error"]["code"], "grammar_too_complex") << r.body;
  EXPECT_EQ(ask({{"grammar", "root ::= \"yes\""}}).j()["choices"][0]["text"], "yes");
}

// Odd values in every field: a 4xx or a 200, never a 5xx (SDKs retry those), never a crash.
TEST_F(Serve, OddValuesInEveryFieldNeverGive5xx) {
  const std::vector<json> values = {nullptr,
                                    true,
                                    "x",
                                    -1,
                                    0,
                                    3.5,
                                    1e308,
                                    json::array(),
                                    json::object(),
                                    json::array({json::array()}),
                                    std::string(2000, 'z'),
                                    json::array({"a", 1})};
  const std::vector<std::string> fields = {"model",
                                           "prompt",
                                           "messages",
                                           "max_tokens",
                                           "max_completion_tokens",
                                           "temperature",
                                           "top_p",
                                           "top_k",
                                           "min_p",
                                           "seed",
                                           "stop",
                                           "stream",
                                           "stream_options",
                                           "logprobs",
                                           "top_logprobs",
                                           "echo",
                                           "n",
                                           "presence_penalty",
                                           "frequency_penalty",
                                           "logit_bias",
                                           "typical_p",
                                           "top_n_sigma",
                                           "xtc_probability",
                                           "xtc_threshold",
                                           "min_keep",
                                           "repeat_penalty",
                                           "repeat_last_n",
                                           "dry_multiplier",
                                           "dry_base",
                                           "dry_allowed_length",
                                           "dry_penalty_last_n",
                                           "dry_sequence_breakers",
                                           "mirostat",
                                           "mirostat_tau",
                                           "mirostat_eta",
                                           "samplers",
                                           "tools",
                                           "response_format",
                                           "suffix",
                                           "ignore_eos",
                                           "user"};
  int answered = 0;
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(path).find("chat") != std::string::npos;
    for (const std::string& f : fields)
      for (const json& v : values) {
        json body = {{"model", "tiny"}, {"max_tokens", 1}, {"temperature", 0}};
        if (chat)
          body["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
        else
          body["prompt"] = "Hi";
        body[f] = v;
        Reply r = post(port, path, body);
        SCOPED_TRACE(std::string(path) + " " + f + "=" + v.dump().substr(0, 40));
        ASSERT_NE(r.status, 0) << "no answer";
        EXPECT_LT(r.status, 500) << r.body;
        if (r.status != 200) {
          EXPECT_TRUE(r.j().contains("error")) << r.body;
        }
        ++answered;
      }
  }
  EXPECT_EQ(answered, 2 * int(fields.size() * values.size()));
  // Odd message shapes.
  for (const json& m :
       {json::array({nullptr}), json::array({json::array()}), json::array({{{"role", 5}, {"content", "x"}}}),
        json::array({{{"role", "user"}, {"content", 5}}}), json::array({{{"role", "user"}, {"content", nullptr}}}),
        json::array({{{"role", "user"}, {"content", {{{"type", "text"}}}}}}),
        json::array({{{"role", "user"}, {"content", "x"}, {"name", json::object()}}}),
        json::array({{{"role", "tool"}, {"content", "x"}}}),
        json::array({{{"role", "assistant"}, {"tool_calls", 7}}})}) {
    Reply r = post(port, "/v1/chat/completions", json{{"model", "tiny"}, {"messages", m}, {"max_tokens", 1}});
    EXPECT_NE(r.status, 0);
    EXPECT_LT(r.status, 500) << m.dump() << " -> " << r.body;
  }
}

// Issue #22 item 3: a /detokenize body nested 60,000 deep (120 KB) crashed the server (the
// error message dumped the client's JSON recursively). Every route refuses deep nesting while
// parsing, with a 400 that names the limit.
TEST(ServeLimits, DeeplyNestedJsonIsRefusedOnEveryRoute) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny");  // the default --max-body (1 MiB) takes 120 KB
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  for (const char* path : {"/detokenize", "/tokenize", "/v1/completions", "/v1/chat/completions"}) {
    for (const std::string& body :
         {deep, R"({"tokens":)" + deep + "}", R"({"model":"tiny","prompt":)" + deep + "}",
          R"({"model":"tiny","messages":[{"role":"user","content":"x","name":)" + deep + "}]}"}) {
      Reply r = post(port, path, body);
      SCOPED_TRACE(std::string(path) + " " + body.substr(0, 30));
      ASSERT_EQ(r.status, 400) << r.body;
      EXPECT_EQ(r.j()["error"]["code"], "json_too_deep");
      EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("64"), std::string::npos) << r.body;
    }
  }
  // Just inside the limit is fine (and the error for a bad token does not echo the value).
  const std::string ok = std::string(62, '[') + std::string(62, ']');
  Reply r = post(port, "/detokenize", R"({"tokens":[)" + ok + "]}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "invalid_value");
  EXPECT_EQ(r.body.find("[[["), std::string::npos) << r.body;
  EXPECT_TRUE(s.alive()) << s.log();
}

// Issue #37 item 1: an assistant turn's tool_calls[].function.arguments, a JSON string, was
// parsed without the depth limit and copied recursively: a string nested 100,000 deep (a 200 KB
// body nested 6 levels itself) overflowed the HTTP thread's stack (SIGSEGV). Now it is a 400.
TEST(ServeLimits, DeeplyNestedJsonInsideAStringIsRefused) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny");  // the default --max-body (1 MiB) takes 200 KB
  ASSERT_NE(s.port(), 0) << s.log();
  const auto chat = [](const std::string& arguments) {
    return json{
        {"model", "tiny"},
        {"max_tokens", 1},
        {"messages",
         {{{"role", "user"}, {"content", "Hi"}},
          {{"role", "assistant"},
           {"tool_calls",
            {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}}}},
          {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}}}}};
  };
  Reply r = post(s.port(), "/v1/chat/completions",
                 chat(R"({"a":)" + std::string(100000, '[') + std::string(100000, ']') + "}"));
  ASSERT_EQ(r.status, 400) << r.body.substr(0, 200) << s.log();
  EXPECT_EQ(r.j()["error"]["code"], "json_too_deep");
  EXPECT_EQ(r.j()["error"]["param"], "messages[1].tool_calls[0].function.arguments");
  // Arguments within the limit are taken (as an object for the template).
  r = post(s.port(), "/v1/chat/completions", chat(R"({"a":)" + std::string(60, '[') + std::string(60, ']') + "}"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(s.alive()) << s.log();
}

// Issue #22 item 4: `[[[…[1]…]]]` was unwrapped recursively with a copy per level (20,000
// levels: 50 s and 16.5 GB). Exactly the documented shapes are accepted.
TEST_F(Serve, OnlyTheDocumentedPromptShapesAreAccepted) {
  const std::vector<std::pair<json, int>> cases = {
      {"Hi", 200},
      {json::array({"Hi"}), 200},
      {json::array({15043, 29892}), 200},
      {json::array({json::array({15043, 29892})}), 200},
      {json::array({json::array({json::array({15043})})}), 400},  // one level too many
      {json::array({json::array({"Hi"})}), 400},
      {json::array({15043, "Hi"}), 400},
      {json::array({"Hi", 15043}), 400},
      {json::array({json::array({1}), "Hi"}), 400},
      {json::array({json::array({1}), json::array({2})}), 400},  // two prompts
      {json::array({"a", "b"}), 400},
      {json::array(), 400},
      {json::array({json::array()}), 400},
      {json::object(), 400},
      {json::array({1.5}), 400},
      {json::array({true}), 400},
      {json::array({json::object()}), 400},
  };
  for (const auto& [prompt, status] : cases) {
    Reply r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 1}});
    EXPECT_EQ(r.status, status) << prompt.dump() << " -> " << r.body;
    if (status == 400) {
      EXPECT_EQ(r.j()["error"]["param"], "prompt") << r.body;
    }
  }
  // As deep as the JSON limit allows: refused at once.
  const auto t0 = std::chrono::steady_clock::now();
  Reply r = post(port, "/v1/completions",
                 R"({"model":"tiny","prompt":)" + std::string(60, '[') + "1" + std::string(60, ']') + "}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// Issue #22 item 8: client type mistakes gave 500 (which the SDKs retry). A generated probe:
// for each route, a valid body that sets every field it reads, and for each field (nested ones
// too) every wrong JSON type in its place: a 4xx with an error object or a 200, never a 5xx.
TEST_F(Serve, AWrongTypeInAnyFieldOfAnyRouteIsA4xx) {
  const json completion = json::parse(R"({"model":"tiny","prompt":"Hi","max_tokens":1,"temperature":0,"top_p":1,
      "top_k":0,"min_p":0,"presence_penalty":0,"frequency_penalty":0,"logit_bias":{"5":1},"seed":1,"n":1,
      "best_of":1,"stop":["x"],"stream":false,"logprobs":1,"echo":false,"suffix":"","ignore_eos":false,
      "response_format":{"type":"text"},"user":"u"})");
  json stream = completion;
  stream["stream"] = true;
  stream["stream_options"] = {{"include_usage", true}};
  const json chat = json::parse(R"({"model":"tiny","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi"}]}],"max_tokens":1,"max_completion_tokens":1,
      "temperature":0,"top_p":1,"top_k":0,"min_p":0,"presence_penalty":0,"frequency_penalty":0,
      "logit_bias":{"5":1},"seed":1,"n":1,"stop":"x","stream":false,"logprobs":true,"top_logprobs":1,
      "tools":[],"response_format":{"type":"text"},"ignore_eos":false,"user":"u"})");
  const std::vector<std::pair<std::string, json>> routes = {
      {"/v1/completions", completion},
      {"/v1/completions", stream},
      {"/v1/chat/completions", chat},
      {"/tokenize", json::parse(
                        R"({"content":"Hi","add_special":true,
                                                                    "with_pieces":true})")},
      {"/detokenize", json::parse(R"({"tokens":[1,2]})")},
      {"/v1/embeddings", json::parse(R"({"model":"tiny",
                                                                    "input":["Hi","there"],"encoding_format":"base64",
                                                                    "user":"u"})")},
      {"/v1/embeddings", json::parse(R"({"input":[[1,2],[3]]})")}};
  const std::vector<json> wrong = {nullptr, true, 5, -7, 2.5, -1e300, "x", json::array({1}), json::object({{"a", 1}})};
  int probes = 0;
  for (const auto& [path, valid] : routes) {
    ASSERT_EQ(post(port, path, valid).status, 200) << path << " " << valid.dump();
    const json flat = valid.flatten();  // "/messages/1/content/0/type" -> "text", ...
    std::vector<std::string> pointers;
    for (const auto& [leaf, _] : flat.items()) {
      // The leaf and every container above it (e.g. /messages/1/content/0 and /messages/1).
      for (std::string p = leaf; !p.empty(); p = p.substr(0, p.rfind('/')))
        if (std::find(pointers.begin(), pointers.end(), p) == pointers.end()) pointers.push_back(p);
    }
    for (const std::string& pointer : pointers)
      for (const json& v : wrong) {
        json body = valid;
        body[json::json_pointer(pointer)] = v;
        Reply r = post(port, path, body);
        SCOPED_TRACE(path + " " + pointer + " = " + v.dump());
        ASSERT_NE(r.status, 0) << "no answer";
        EXPECT_LT(r.status, 500) << r.body;
        if (r.status != 200) {
          EXPECT_TRUE(r.j().is_object() && r.j().contains("error")) << r.body;
        }
        ++probes;
      }
  }
  EXPECT_GT(probes, 400);
  // The cases of the issue, each a 400 naming the field.
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/tokenize", {{"content", "x"}, {"add_special", "yes"}}},
           {"/tokenize", {{"content", "x"}, {"with_pieces", 1}}},
           {"/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"response_format", {{"type", 5}}}}},
           {"/v1/chat/completions",
            {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}}}}}}) {
    Reply r = post(port, path, body);
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
  }
}

TEST_F(Serve, OversizedBodiesGet413) {
  std::string big(100 * 1024, 'a');  // over --max-body 64 KiB
  Reply r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", big}}.dump());
  EXPECT_EQ(r.status, 413);
  EXPECT_TRUE(r.j().contains("error")) << r.body;
  // The same on a raw socket, then a client that announces a huge body and hangs up.
  {
    RawConn c(port);
    c.send_all(http_post_text("/v1/completions", std::string(70 * 1024, ' ')));
    const std::string head = c.read_until("\r\n\r\n");
    EXPECT_NE(head.find(" 413 "), std::string::npos) << head;
  }
  {
    RawConn c(port);
    c.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{\"prompt\":");
  }
  EXPECT_EQ(post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "ok"}, {"max_tokens", 1}}).status, 200);
}

// Issue #37 item 8: a Content-Length over --max-body, or a negative one, was answered only after
// the whole --timeout (30 s here), the thread held waiting for the announced bytes. It is answered
// once the headers are read: well within RawConn's 5 s.
TEST_F(Serve, ABadContentLengthIsAnsweredAtOnce) {
  for (const auto& [length, status] :
       std::vector<std::pair<std::string, std::string>>{{"999999999", " 413 "},
                                                        {"123456789012345678901234", " 413 "},
                                                        {"-1", " 400 "},
                                                        {"-5000", " 400 "},
                                                        {"12abc", " 400 "}}) {
    RawConn c(port);
    const auto t0 = std::chrono::steady_clock::now();
    c.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + "\r\n\r\n{\"prompt\":");
    const std::string answer = c.read_until("}}");
    EXPECT_NE(answer.find(status), std::string::npos) << length << ": " << answer;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << length;
  }
}

// Issue #22 item 6: httplib checks --max-body against a Content-Length only; a chunked body of
// 50 MB was read whole. The limit holds for every transfer encoding.
TEST_F(Serve, ChunkedBodiesAreHeldToMaxBody) {
  RawConn c(port);
  ASSERT_TRUE(
      c.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                 "chunked\r\n\r\n"));
  std::thread sender([fd = c.fd] {  // 4 MB in 16 KiB chunks, until the server stops reading
    const std::string chunk = "4000\r\n" + std::string(16384, ' ') + "\r\n";
    for (int i = 0; i < 256; ++i)
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
  });
  const std::string head = c.read_until("\r\n\r\n");
  ::shutdown(c.fd, SHUT_RDWR);
  sender.join();
  EXPECT_NE(head.find(" 413 "), std::string::npos) << head.substr(0, 200);
  // A chunked body within the limit is read as usual.
  RawConn ok(port);
  const std::string body = json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1}}.dump();
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ok.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) +
              "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_NE(ok.read_until("\r\n\r\n").find(" 200 "), std::string::npos);
}

// Issue #22 item 9: `curl -d` sends application/x-www-form-urlencoded, which httplib capped at
// 8 KiB with a misleading 413. The body is JSON whatever the content type says; multipart is 415.
TEST_F(Serve, TheBodyIsJsonWhateverTheContentType) {
  const std::string body =
      json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"user", std::string(20000, 'u')}}.dump();
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    httplib::Client cl("127.0.0.1", port);
    auto r = cl.Post("/v1/completions", body, type);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 200) << type << ": " << r->body;
  }
  httplib::Client cl("127.0.0.1", port);
  auto r = cl.Post("/v1/completions", "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--b--\r\n",
                   "multipart/form-data; boundary=b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415) << r->body;
  // Bodies on routes that take none, or that do not exist, are not read (even chunked).
  r = cl.Post("/v1/nowhere", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = cl.Put("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
}

// Issue #37 item 9: a request line httplib cannot parse (no CRLF, one word, an empty line) got 405
// naming an empty method, and the connection was kept open for the keep-alive timeout (5 s). Now
// it is 400 and closed after the answer.
TEST_F(Serve, AnUnparsableRequestLineIs400AndClosed) {
  for (const char* line : {"\r\n", "GET /health HTTP/1.1\n", "hello\r\n", "GET /health HTTP/9.9\r\n"}) {
    RawConn c(port);
    const auto t0 = std::chrono::steady_clock::now();
    c.send_all(std::string(line) + "Host: x\r\n\r\n");
    const std::string answer = c.read_until("never sent");  // to the end: the server closes
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500)) << line;
    EXPECT_NE(answer.find("HTTP/1.1 400 "), std::string::npos) << line << answer;
    EXPECT_NE(answer.find("\"invalid_http_request\""), std::string::npos) << line << answer;
  }
}

// Issue #37 item 9: the duplicate check of `lora` was quadratic (40,000 entries: 1 s of CPU on an
// HTTP thread). A list is at most as long as the server has adapters (none here), and checked in
// one pass.
TEST_F(Serve, ALoraListLongerThanTheAdaptersIsRefused) {
  json lora = json::array();
  for (int i = 0; i < 2000; ++i) lora.push_back({{"id", i}, {"scale", 1}});
  Reply r = post(port, "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 1}, {"lora", lora}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("lists 2000 adapters; the server has 0"), std::string::npos) << r.body;
  r = post(port, "/v1/completions", json{{"prompt", "Hi"}, {"max_tokens", 1}, {"lora", json::array()}});
  EXPECT_EQ(r.status, 200) << r.body;
}

// Issue #22 item 18: the server's small mistakes.
TEST_F(Serve, HttpDetails) {
  Reply r = get(port, "/v1/models/");
  EXPECT_EQ(r.status, 404) << r.body;  // no id: no such route (was 405)
  {
    RawConn c(port);  // a method nobody takes: 405 with a code (was 400, code null)
    c.send_all("BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string answer = c.read_until("}}");
    EXPECT_NE(answer.find(" 405 "), std::string::npos) << answer;
    EXPECT_NE(answer.find("\"method_not_allowed\""), std::string::npos) << answer;
  }
  // max_tokens beyond 2^40 is capped (at the context), as documented, not refused.
  for (const json& big : {json(int64_t(1) << 50), json(uint64_t(1) << 63), json(1e30)}) {
    r = post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", big}, {"stop", "a"}});
    EXPECT_EQ(r.status, 200) << big.dump() << " " << r.body;
  }
  // A float seed must be an integer in range (2^63 overflowed int64).
  for (const char* seed : {"9223372036854775808.0", "1e19", "-1e19", "0.5"}) {
    r = post(port, "/v1/completions",
             std::string(R"({"model":"tiny","prompt":"Hi","max_tokens":1,"seed":)") + seed + "}");
    EXPECT_EQ(r.status, 400) << seed << " " << r.body;
    EXPECT_EQ(r.j()["error"]["param"], "seed") << r.body;
  }
  EXPECT_EQ(post(port, "/v1/completions", std::string(R"({"model":"tiny","prompt":"Hi","max_tokens":1,"seed":4.0e18})"))
                .status,
            200);
  // logit_bias keys: canonical decimal token ids of the vocabulary.
  for (const char* key : {" 5", "5 ", "+5", "05", "5.0", "0x5", "", "-1", "99999999", "32000"}) {
    r = post(port, "/v1/completions",
             json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"logit_bias", {{key, 1}}}});
    EXPECT_EQ(r.status, 400) << "'" << key << "' " << r.body;
  }
  EXPECT_EQ(
      post(port, "/v1/completions",
           json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1}, {"logit_bias", {{"0", 1}, {"31999", -1}}}})
          .status,
      200);
}

TEST_F(Serve, ClientThatVanishesMidStreamFreesItsSlot) {
  for (int round = 0; round < 2; ++round) {
    {
      auto blocked = hold_a_slot(port);
      ASSERT_TRUE(wait_busy(port, 1)) << health(port).dump();
    }  // the client disconnects without reading
    EXPECT_TRUE(wait_busy(port, 0)) << "the slot was not freed: " << health(port).dump();
  }
  // A client that reads a little, then goes away.
  {
    RawConn c(port);
    c.send_all(http_post_text(
        "/v1/completions",
        json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}}.dump()));
    c.read_until("data: ");
  }
  EXPECT_TRUE(wait_busy(port, 0));
  EXPECT_EQ(post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "ok"}, {"max_tokens", 1}}).status, 200);
}

TEST_F(Serve, ClientThatVanishesBeforeANonStreamedAnswerFreesItsSlot) {
  // A long answer (logprobs make each token slower), asked for without streaming; the client
  // hangs up while it is generated. The server notices the closed socket and stops.
  {
    RawConn c(port);
    c.send_all(http_post_text(
        "/v1/completions",
        json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1000}, {"ignore_eos", true}, {"logprobs", 20}}
            .dump()));
    ASSERT_TRUE(wait_busy(port, 1)) << health(port).dump();
  }
  EXPECT_TRUE(wait_busy(port, 0)) << "the slot was not freed: " << health(port).dump();
  // Its log line says it was cut short: fewer tokens than asked for, "client went away".
  std::string line;
  for (size_t at = 0; (at = server_->log().find("/v1/completions slot", at)) != std::string::npos; ++at)
    line = server_->log().substr(at, server_->log().find('\n', at) - at);
  EXPECT_NE(line.find("client went away"), std::string::npos) << line;
  EXPECT_EQ(line.find("completion 1000 tokens"), std::string::npos) << line;
  EXPECT_EQ(post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "ok"}, {"max_tokens", 1}}).status, 200);
}

TEST_F(Serve, AClientThatStopsReadingDoesNotHoldBackTheOthers) {
  // One slot generates for a client that reads nothing (its text piles up, then its request sits
  // out the decode steps); the other slot's requests still get their answers at once.
  auto blocked = hold_a_slot(port);
  ASSERT_TRUE(wait_busy(port, 1));
  const json q = {{"model", "tiny"}, {"prompt", "The cat"}, {"max_tokens", 24}, {"temperature", 0}};
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Reply r = post(port, "/v1/completions", q.dump(), /*timeout_s=*/10);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  }
  EXPECT_EQ(health(port)["slots_processing"], 1);  // the reader-less request still holds its slot
  blocked.reset();
  EXPECT_TRUE(wait_busy(port, 0));
}

TEST_F(Serve, ManyConcurrentClientsGetIndependentAnswers) {
  // Each client asks for the greedy continuation of its own prompt; concurrent answers must
  // equal the ones given alone. Beyond 2 slots + 4 queued, a client may get 503.
  const std::vector<std::string> prompts = {"Once upon a time", "The cat", "In a galaxy far away", "Hello"};
  std::vector<std::string> alone;
  for (const auto& p : prompts)
    alone.push_back(
        post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", p}, {"max_tokens", 12}, {"temperature", 0}})
            .j()["choices"][0]["text"]);
  constexpr int kClients = 24;
  std::vector<std::future<Reply>> futures;
  for (int i = 0; i < kClients; ++i)
    futures.push_back(std::async(std::launch::async, [&, i] {
      return post(port, "/v1/completions",
                  json{{"model", "tiny"},
                       {"prompt", prompts[size_t(i) % prompts.size()]},
                       {"max_tokens", 12},
                       {"temperature", 0},
                       {"stream", i % 2 == 1}});
    }));
  int ok = 0, busy = 0;
  for (int i = 0; i < kClients; ++i) {
    Reply r = futures[size_t(i)].get();
    if (r.status == 503) {
      ++busy;
      EXPECT_EQ(r.j()["error"]["code"], "server_busy");
      continue;
    }
    ASSERT_EQ(r.status, 200) << r.body;
    ++ok;
    std::string text;
    if (i % 2 == 1) {
      bool done = false;
      for (const json& e : sse_events(r.body, &done)) text += e["choices"][0]["text"].get<std::string>();
    } else {
      text = r.j()["choices"][0]["text"];
    }
    EXPECT_EQ(text, alone[size_t(i) % prompts.size()]) << "client " << i;
  }
  EXPECT_GE(ok, 6);
  EXPECT_EQ(ok + busy, kClients);
  // Many bare connections at once (the listen backlog), then the server still answers.
  std::vector<std::future<int>> pings;
  for (int i = 0; i < 64; ++i)
    pings.push_back(std::async(std::launch::async, [&] { return get(port, "/health").status; }));
  for (auto& f : pings) EXPECT_EQ(f.get(), 200);
  EXPECT_TRUE(wait_busy(port, 0));
}

// ---------------------------------------------------------------------------------------------
// A server of its own with four slots: concurrent requests are decoded as one batch, and each
// answer is the one it gets alone.

TEST(ServeBatch, ConcurrentRequestsAreBatchedAndAnswerAsAlone) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --parallel 4 --ctx 512");
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();
  // Greedy and seeded sampling, streamed and not, with logprobs and penalties: everything a
  // request keeps for itself.
  const std::vector<json> requests = {
      {{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 48}, {"temperature", 0}, {"logprobs", 3}},
      {{"model", "tiny"},
       {"prompt", "The cat sat"},
       {"max_tokens", 40},
       {"temperature", 0.9},
       {"top_p", 0.9},
       {"seed", 7},
       {"stream", true}},
      {{"model", "tiny"},
       {"prompt", "In a galaxy far away, a very long time ago"},
       {"max_tokens", 56},
       {"temperature", 1.2},
       {"seed", 8},
       {"frequency_penalty", 0.5},
       {"logprobs", 2}},
      {{"model", "tiny"},
       {"prompt", "Hello"},
       {"max_tokens", 44},
       {"temperature", 0.7},
       {"seed", 9},
       {"stream", true},
       {"ignore_eos", true}},
  };
  std::vector<std::string> alone;
  for (const json& q : requests) {
    const Reply r = post(port, "/v1/completions", q);
    ASSERT_EQ(r.status, 200) << r.body;
    alone.push_back(answer(r, q.value("stream", false)));
  }
  const json before = health(port);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<Reply>> futures;
    for (const json& q : requests)
      futures.push_back(std::async(std::launch::async, [&, q] { return post(port, "/v1/completions", q); }));
    for (size_t i = 0; i < requests.size(); ++i) {
      const Reply r = futures[i].get();
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(answer(r, requests[i].value("stream", false)), alone[i]) << "request " << i << ", round " << round;
    }
  }
  // Steps fed more than one token each: the requests really were batched.
  const json after = health(port);
  const int64_t steps = after["decode_steps"].get<int64_t>() - before["decode_steps"].get<int64_t>();
  const int64_t tokens = after["decode_tokens"].get<int64_t>() - before["decode_tokens"].get<int64_t>();
  ASSERT_GT(steps, 0);
  std::printf("  %lld decode steps fed %lld tokens: mean batch %.2f\n", (long long)steps, (long long)tokens,
              double(tokens) / double(steps));
  EXPECT_GT(tokens, steps + steps / 2);
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
}

// Speculative decoding (-md, --spec-type ngram): four concurrent requests (greedy, seeded
// sampling, logprobs, penalties, streamed or not, one with its own speculative.n_max) get the
// answers a server without speculation gives each alone, and /metrics counts the guesses.
namespace {
void check_speculation(const std::string& family) {
  TOY_REQUIRE_FIXTURE(target, "models/" + family + "/" + family + "-f32.gguf");
  TOY_REQUIRE_FIXTURE(draft, "models/" + family + "/" + family + "-q8_0.gguf");
  const std::vector<json> requests = {
      {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"logprobs", 2}, {"ignore_eos", true}},
      {{"prompt", "The cat sat"},
       {"max_tokens", 40},
       {"temperature", 0.9},
       {"seed", 7},
       {"stream", true},
       {"ignore_eos", true}},
      {{"prompt", "In a galaxy far away"},
       {"max_tokens", 48},
       {"temperature", 1.1},
       {"seed", 8},
       {"frequency_penalty", 0.5},
       {"speculative.n_max", 3},
       {"ignore_eos", true}},
      {{"prompt", "one two one two one two"},
       {"max_tokens", 32},
       {"temperature", 0},
       {"stream", true},
       {"ignore_eos", true}},
  };
  std::vector<std::string> alone;
  {
    ServerProcess plain(target.string(), "--parallel 1 --ctx 256");
    ASSERT_NE(plain.port(), 0) << plain.log();
    for (const json& q : requests) {
      const Reply r = post(plain.port(), "/v1/completions", q);
      ASSERT_EQ(r.status, 200) << r.body;
      alone.push_back(answer(r, q.value("stream", false)));
      if (!q.value("stream", false)) {  // timings without a draft: no draft_n
        EXPECT_TRUE(r.j()["timings"].contains("predicted_ms")) << r.body;
        EXPECT_FALSE(r.j()["timings"].contains("draft_n")) << r.body;
      }
    }
  }
  double accepted = 0;
  for (const std::string& spec : {"-md " + draft.string() + " --draft-p-min 0 --draft-max 5",
                                  std::string("--spec-type ngram --spec-ngram-size-n 1")}) {
    SCOPED_TRACE(spec);
    ServerProcess s(target.string(), "--parallel 4 --ctx 256 " + spec);
    ASSERT_NE(s.port(), 0) << s.log();
    for (int round = 0; round < 2; ++round) {
      std::vector<std::future<Reply>> futures;
      for (const json& q : requests)
        futures.push_back(std::async(std::launch::async, [&, q] { return post(s.port(), "/v1/completions", q); }));
      for (size_t i = 0; i < requests.size(); ++i) {
        const Reply r = futures[i].get();
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(answer(r, requests[i].value("stream", false)), alone[i]) << "request " << i << ", round " << round;
      }
    }
    const std::string metrics = get(s.port(), "/metrics").body;
    auto metric = [&](const std::string& name) {
      const size_t at = metrics.find("\n" + name + " ");
      return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + name.size() + 2));
    };
    EXPECT_GT(metric("toy_draft_tokens_total"), metric("toy_draft_tokens_accepted_total")) << metrics;
    accepted += metric("toy_draft_tokens_accepted_total");
    // llama-server's timings: in the answer, and in a stream's last chunk of each choice.
    json q = requests[3];
    q["stream"] = false;
    const json one = post(s.port(), "/v1/completions", q).j();
    const json& t = one["timings"];
    EXPECT_EQ(t["predicted_n"], one["usage"]["completion_tokens"]) << one.dump();
    EXPECT_EQ(t["prompt_n"].get<int>() + t["cache_n"].get<int>(), one["usage"]["prompt_tokens"].get<int>());
    EXPECT_GT(t["predicted_per_second"].get<double>(), 0);
    EXPECT_GT(t["draft_n"].get<int>(), 0) << t.dump();
    EXPECT_LE(t["draft_n_accepted"].get<int>(), t["draft_n"].get<int>());
    q["stream"] = true;
    const std::string events = post(s.port(), "/v1/completions", q).body;
    const size_t end = events.rfind("\"finish_reason\":\"");
    ASSERT_NE(end, std::string::npos) << events;
    EXPECT_NE(events.find("\"draft_n_accepted\":", end), std::string::npos) << events.substr(end);
    // A request's limits are checked.
    for (const json& bad : {json{{"speculative.n_max", 0}}, json{{"speculative.n_min", 9}, {"speculative.n_max", 4}},
                            json{{"speculative.p_min", 1.5}}, json{{"speculative.n_max", "8"}}}) {
      json q = {{"prompt", "Hi"}, {"max_tokens", 4}};
      q.update(bad);
      EXPECT_EQ(post(s.port(), "/v1/completions", q).status, 400) << bad.dump();
    }
    EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
  }
  EXPECT_GT(accepted, 0);  // guesses were kept, and (above) cut
}

}  // namespace

TEST(ServeSpeculative, FourStreamsAnswerAsWithoutADraft) { check_speculation("smollm2"); }
TEST(ServeSpeculative, FourStreamsOfAHybridAnswerAsWithoutADraft) { check_speculation("qwen35"); }

// ---------------------------------------------------------------------------------------------
// LoRA adapters (--lora, --lora-scaled): llama-server's per-request `lora` field and GET/POST
// /lora-adapters. Adapter 0 is the reference's trained adapter A; adapter 1 is A with B doubled,
// so that by W + s·(α/r)·B·A it is A at twice the scale. Every answer is checked against
// `toy eval --lora-scaled A s` (itself checked against PyTorch in test_lora.cpp): scale 0 is the
// base, and the scales of two adapters add up. `device`: the flag that puts the server (and the
// `toy eval` it is checked against) on a device, or "" for the CPU.
namespace {
void check_lora_scales(const std::string& device) {
  TOY_REQUIRE_FIXTURE(base, "models/smollm2/smollm2-f32.gguf");
  TOY_REQUIRE_FIXTURE(adapter, "train/lora-smollm2-final.gguf");
  const std::string A = adapter.string(), A2 = tmp("lora_doubled.gguf");
  {
    toy::LoraAdapter doubled = toy::read_lora(A);
    for (auto& [name, p] : doubled.pairs) p.B = toy::scale(p.B.clone(), 2.0f);
    toy::write_lora(doubled, A2);
  }
  ServerProcess s(base.string(),
                  "--name smol --parallel 2 --ctx 256 --lora " + A + " --lora-scaled " + A2 + " 0.5" + device);
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();

  Reply l = get(port, "/lora-adapters");
  ASSERT_EQ(l.status, 200) << l.body;
  ASSERT_EQ(l.j().size(), 2u) << l.body;
  EXPECT_EQ(l.j()[0], (json{{"id", 0}, {"path", A}, {"scale", 1.0}}));
  EXPECT_EQ(l.j()[1], (json{{"id", 1}, {"path", A2}, {"scale", 0.5}}));

  // The prompt's log-probabilities as the server scores them (echo), and as `toy eval` does.
  const std::vector<int> ids = {1, 17, 42, 99, 123, 200, 301, 77, 5, 480, 33, 260};
  std::string id_list;
  for (int id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  auto served = [&](const json& lora) {
    json q = {{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}};
    if (!lora.is_null()) q["lora"] = lora;
    const Reply r = post(port, "/v1/completions", q);
    EXPECT_EQ(r.status, 200) << r.body;
    const json answer = r.j();  // kept: the loop below reads into it
    std::vector<double> lp;
    for (const json& v : answer["choices"][0]["logprobs"]["token_logprobs"])
      lp.push_back(v.is_null() ? 0.0 : double(v));
    return lp;
  };
  auto evaluated = [&](const std::string& flags) {
    const auto e = run_toy("eval " + base.string() + " --ids " + id_list + " --json " + flags + device);
    EXPECT_EQ(e.code, 0) << e.err;
    const json scored = json::parse(e.out);
    std::vector<double> lp;
    for (const json& t : scored["tokens"]) lp.push_back(t["logprob"].is_null() ? 0.0 : double(t["logprob"]));
    return lp;
  };
  auto expect_near = [](const std::vector<double>& got, const std::vector<double>& want, double tol,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << ", token " << i;
  };
  const std::vector<double> plain = evaluated(""), half = evaluated("--lora-scaled " + A + " 0.5"),
                            twice = evaluated("--lora-scaled " + A + " 2");
  // The adapter moves the scores well beyond the tolerances below.
  double moved = 0;
  for (size_t i = 0; i < plain.size(); ++i) moved = std::max(moved, std::abs(twice[i] - plain[i]));
  EXPECT_GT(moved, 0.05);

  // No `lora`: the global scales, 1·A + 0.5·(2·A) = 2·A. The same math in another order: 1e-4.
  expect_near(served(nullptr), twice, 1e-4, "global scales");
  expect_near(served(json::array()), plain, 1e-5, "lora []: the base");
  expect_near(served(json::parse(R"([{"id": 0, "scale": 0}, {"id": 1, "scale": 0.0}])")), plain, 1e-5,
              "scales 0: the base");
  expect_near(served(json::parse(R"([{"id": 0, "scale": 0.5}])")), half, 1e-5, "A at 0.5");
  expect_near(served(json::parse(R"([{"id": 1, "scale": 1}])")), twice, 1e-4, "doubled B at 1 = A at 2");

  // Two requests with other scales at once decode in separate batches and answer as alone.
  const std::vector<json> requests = {
      {{"prompt", ids}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}, {"lora", json::array()}},
      {{"prompt", ids},
       {"max_tokens", 24},
       {"temperature", 0},
       {"ignore_eos", true},
       {"lora", json::parse(R"([{"id": 0, "scale": 2}])")}},
  };
  std::vector<std::string> alone;
  for (const json& q : requests) alone.push_back(post(port, "/v1/completions", q).j()["choices"][0]["text"]);
  EXPECT_NE(alone[0], alone[1]);
  std::vector<std::future<Reply>> futures;
  for (const json& q : requests)
    futures.push_back(std::async(std::launch::async, [&, q] { return post(port, "/v1/completions", q); }));
  for (size_t i = 0; i < requests.size(); ++i) {
    const Reply r = futures[i].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j()["choices"][0]["text"], alone[i]) << "request " << i;
  }

  // POST /lora-adapters sets the global scales; adapters it leaves out get 0.
  Reply set = post(port, "/lora-adapters", json::parse(R"([{"id": 1, "scale": 0.25}])"));
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.j(), (json{{"success", true}}));
  l = get(port, "/lora-adapters");
  EXPECT_EQ(l.j()[0]["scale"], 0.0);
  EXPECT_EQ(l.j()[1]["scale"], 0.25);
  expect_near(served(nullptr), half, 1e-4, "global 0.25·(2·A)");
  ASSERT_EQ(post(port, "/lora-adapters", json::array()).status, 200);
  expect_near(served(nullptr), plain, 1e-5, "global scales all 0");

  // Client mistakes: 400 naming the field, and the server goes on.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("x")", "'lora'"},
      {R"({"id": 0, "scale": 1})", "'lora'"},
      {R"([1])", "'lora[0]'"},
      {R"([{"id": 2, "scale": 1}])", "no LoRA adapter has id 2"},
      {R"([{"id": -1, "scale": 1}])", "'lora[0].id'"},
      {R"([{"id": 0.5, "scale": 1}])", "'lora[0].id'"},
      {R"([{"id": 0}])", R"(needs \"id\" and \"scale\")"},
      {R"([{"id": 0, "scale": "1"}])", "'lora[0].scale'"},
      {R"([{"id": 0, "scale": 1e9}])", "'lora[0].scale'"},
      {R"([{"id": 0, "scale": 1}, {"id": 0, "scale": 2}])", "listed twice"},
      {R"([{"id": 0, "scale": 1}, {"id": 1, "scale": 1}, {"id": 2, "scale": 1}])",
       "lists 3 adapters; the server has 2"},
  };
  for (const auto& [text, message] : bad) {
    const json lora = json::parse(text);
    const Reply r = post(port, "/v1/completions", json{{"prompt", ids}, {"max_tokens", 1}, {"lora", lora}});
    EXPECT_EQ(r.status, 400) << lora.dump() << ": " << r.body;
    EXPECT_NE(r.body.find(message), std::string::npos) << lora.dump() << ": " << r.body;
    const Reply g = post(port, "/lora-adapters", lora);
    EXPECT_EQ(g.status, 400) << lora.dump() << ": " << g.body;
  }
  EXPECT_EQ(post(port, "/lora-adapters", std::string("{")).status, 400);
  EXPECT_EQ(get(port, "/lora-adapters").j()[1]["scale"], 0.0);  // unchanged by the refused ones
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();

  // An adapter that does not fit the base: exit 3 before listening, naming it.
  TOY_REQUIRE_FIXTURE(tiny, kModel);
  const auto r =
      run_toy("serve " + tiny.string() + " --host not-an-address --port 0 --lora " + A + device);  // never listens
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find(A), std::string::npos) << r.err;
}
}  // namespace

TEST(ServeLora, PerRequestAndGlobalScalesAsTheMathSays) { check_lora_scales(""); }

#ifdef TOY_VULKAN
// The same on vulkan:0 (lavapipe in CI): each set of scales a model over the base's device weights,
// only its adapters uploaded (Model::share_params).
TEST(ServeLora, PerRequestAndGlobalScalesOnVulkan) {
  TOY_REQUIRE_VULKAN();
  check_lora_scales(" --device vulkan");
}
#endif

// ---------------------------------------------------------------------------------------------
// Prompt cache: a prompt that starts with what the slot holds (the previous prompt and the tokens
// generated after it) skips those tokens, and answers bit for bit as without the cache.

namespace {

void check_prompt_cache(const fs::path& model) {
  ServerProcess s(model.string(), "--name tiny --parallel 1 --ctx 256");
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();
  const std::vector<int32_t> prompt =
      post(port, "/tokenize", json{{"content", "Once upon a time, in a land far"}, {"add_special", true}})
          .j()["tokens"];
  const int64_t P = int64_t(prompt.size());
  auto ask = [&](const std::vector<int32_t>& ids, bool cache, bool stream = false) {
    json q = {{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 12},   {"temperature", 0.9},
              {"seed", 5},       {"logprobs", 3}, {"ignore_eos", true}, {"cache_prompt", cache}};
    if (stream) q.update({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
    const Reply r = post(port, "/v1/completions", q);
    EXPECT_EQ(r.status, 200) << r.body;
    if (!stream) return r.j();
    bool done = false;  // the streamed answer, put together as one non-streamed choice
    json out = {
        {"choices", {{{"text", ""}, {"logprobs", {{"tokens", json::array()}, {"token_logprobs", json::array()}}}}}}};
    for (const json& e : sse_events(r.body, &done)) {
      if (e["choices"].empty()) {
        out["usage"] = e["usage"];
        continue;
      }
      const json& c = e["choices"][0];
      out["choices"][0]["text"] = out["choices"][0]["text"].get<std::string>() + c["text"].get<std::string>();
      if (!c["logprobs"].is_null())
        for (const char* k : {"tokens", "token_logprobs"})
          for (const json& x : c["logprobs"][k]) out["choices"][0]["logprobs"][k].push_back(x);
    }
    EXPECT_TRUE(done);
    return out;
  };
  auto cached = [](const json& a) { return a["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(); };
  auto same = [](const json& a, const json& b) {  // text and logprobs, to the last bit (JSON numbers round-trip)
    EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
    EXPECT_EQ(a["choices"][0]["logprobs"]["tokens"], b["choices"][0]["logprobs"]["tokens"]);
    EXPECT_EQ(a["choices"][0]["logprobs"]["token_logprobs"], b["choices"][0]["logprobs"]["token_logprobs"]);
  };

  const json cold = ask(prompt, false);
  EXPECT_EQ(cached(cold), 0);
  const json warm = ask(prompt, true);  // all but the last token (whose logits are needed) reused
  EXPECT_EQ(cached(warm), P - 1);
  same(warm, cold);
  const json streamed = ask(prompt, true, /*stream=*/true);
  EXPECT_EQ(cached(streamed), P - 1);
  same(streamed, cold);

  // The slot now holds the prompt and the tokens generated after it (fed one by one in the decode
  // loop): a prompt that continues the text reuses those rows too.
  const std::string text = "Once upon a time, in a land far" + warm["choices"][0]["text"].get<std::string>();
  std::vector<int32_t> longer = post(port, "/tokenize", json{{"content", text}, {"add_special", true}}).j()["tokens"];
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), longer.begin()));
  longer.insert(longer.end(), {450, 300});  // ids of both models' vocabularies
  const json reused = ask(longer, true);
  EXPECT_GT(cached(reused), P) << "rows of generated tokens were reused";
  EXPECT_LE(cached(reused), int64_t(longer.size()) - 2);
  const json fresh = ask(longer, false);
  EXPECT_EQ(cached(fresh), 0);
  same(reused, fresh);
  // A prompt that diverges early reuses only the common part, and still answers as without.
  std::vector<int32_t> other = prompt;
  other[2] = 400;
  const json diverged = ask(other, true);
  EXPECT_EQ(cached(diverged), 2);
  same(diverged, ask(other, false));
  EXPECT_NE(s.log().find("(" + std::to_string(P - 1) + " cached)"), std::string::npos)
      << "the log counts reused tokens";
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
}

}  // namespace

TEST(ServeCache, APromptPrefixIsReusedAndAnswersAsWithout) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  check_prompt_cache(model);
}

// Issue #37 item 3: on the embedded story model the cached answer differed in the 7th digit of
// its log-probabilities (prompts of 8 tokens or more took another attention path).
TEST(ServeCache, TheEmbeddedModelAnswersAsWithout) {
  check_prompt_cache(fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf");
}

// ---------------------------------------------------------------------------------------------
// Monitoring: /metrics counts every request by status and the tokens of completions, /props and
// /slots show the settings and the slots, the log has a line per request (refused ones too) and a
// warning for ignored fields; any model name is served.

TEST(ServeMonitoring, MetricsPropsSlotsLogAndModelNames) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --parallel 2 --ctx 256 --api-key sesame");
  ASSERT_NE(s.port(), 0) << s.log();
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  c.set_bearer_token_auth("sesame");
  auto metric = [&](const std::string& line_start) {  // the value of the sample line that starts so
    const auto r = c.Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    const std::string text = r ? r->body : "";
    const size_t at = text.find("\n" + line_start + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + 1 + line_start.size() + 1));
  };
  // Any model name is served (one model is loaded); answers name the served model.
  for (const char* name : {"tiny", "llama-2-tiny-random", "gpt-4o"}) {
    const json q = {{"model", name},      {"prompt", "Hello there"}, {"max_tokens", 5}, {"temperature", 0},
                    {"ignore_eos", true}, {"frobnicate", 1},         {"user", "me"}};
    const auto r = c.Post("/v1/completions", q.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    EXPECT_EQ(json::parse(r->body)["model"], "tiny");
  }
  EXPECT_EQ(c.Get("/v1/models/llama-2-tiny-random.gguf")->status, 200);  // the file's name is the model's id too
  EXPECT_EQ(c.Get("/v1/models/gpt-4o")->status, 404);
  EXPECT_EQ(c.Post("/v1/completions", R"({"prompt":5})", "application/json")->status, 400);
  httplib::Client keyless("127.0.0.1", s.port());
  EXPECT_EQ(keyless.Get("/v1/models")->status, 401);

  EXPECT_EQ(metric("toy_requests_total{status=\"200\"}"), 4);  // 3 completions, a model lookup
  EXPECT_EQ(metric("toy_requests_total{status=\"400\"}"), 1);
  EXPECT_EQ(metric("toy_requests_total{status=\"401\"}"), 1);
  EXPECT_EQ(metric("toy_requests_total{status=\"404\"}"), 1);
  EXPECT_EQ(metric("toy_completions_total"), 3);
  EXPECT_EQ(metric("toy_generated_tokens_total"), 15);
  // The same prompt three times on slot 0: fed once whole, then all but its last token reused.
  const double P = metric("toy_prompt_cached_tokens_total") / 2 + 1;
  EXPECT_EQ(metric("toy_prompt_cache_hits_total"), 2);
  EXPECT_EQ(metric("toy_prompt_tokens_total"), P + 2);
  EXPECT_GT(metric("toy_generation_tokens_per_second"), 0);
  EXPECT_GT(metric("toy_prompt_tokens_per_second"), 0);
  EXPECT_EQ(metric("toy_slots_total"), 2);
  EXPECT_EQ(metric("toy_slots_busy"), 0);
  EXPECT_EQ(metric("toy_requests_waiting"), 0);

  const auto props = c.Get("/props");
  ASSERT_TRUE(props && props->status == 200);
  const json p = json::parse(props->body);
  EXPECT_EQ(p["total_slots"], 2);
  EXPECT_EQ(p["model_alias"], "tiny");
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 256);
  EXPECT_TRUE(p["chat_template"].is_string());
  const auto slots = c.Get("/slots");
  ASSERT_TRUE(slots && slots->status == 200);
  const json sl = json::parse(slots->body);
  ASSERT_EQ(sl.size(), 2u);
  EXPECT_EQ(sl[0]["is_processing"], false);
  EXPECT_EQ(sl[0]["n_cached_tokens"], P + 4);  // the prompt and 4 of the 5 generated tokens (the last is not fed)
  EXPECT_EQ(sl[1]["n_cached_tokens"], 0);
  EXPECT_EQ(keyless.Get("/metrics")->status, 401);  // monitoring is behind the key like the API

  const std::string log = s.log();
  EXPECT_NE(log.find("POST /v1/completions 200"), std::string::npos) << log;
  EXPECT_NE(log.find("POST /v1/completions 400"), std::string::npos) << log;
  EXPECT_NE(log.find("GET /v1/models 401"), std::string::npos) << log;
  EXPECT_NE(log.find("GET /v1/models/gpt-4o 404"), std::string::npos) << log;
  size_t warnings = 0;
  for (size_t at = 0; (at = log.find("ignored unknown request fields: frobnicate, user\n", at)) != std::string::npos;
       ++at)
    ++warnings;
  EXPECT_EQ(warnings, 3u) << log;
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
}

// ---------------------------------------------------------------------------------------------
// POST /v1/embeddings

namespace {

// The vectors of an embeddings answer, by index; base64 ones decoded (little-endian float32).
std::vector<std::vector<float>> embedding_vectors(const json& answer) {
  std::vector<std::vector<float>> out;
  for (const json& d : answer["data"]) {
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], out.size());
    if (d["embedding"].is_array()) {
      out.push_back(d["embedding"].get<std::vector<float>>());
      continue;
    }
    const std::string b64 = d["embedding"];
    const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes;
    for (size_t i = 0; i + 4 <= b64.size(); i += 4) {
      uint32_t group = 0;
      int pad = 0;
      for (size_t k = 0; k < 4; ++k) {
        const size_t at = digits.find(b64[i + k]);
        pad += b64[i + k] == '=';
        group = group << 6 | uint32_t(at == std::string::npos ? 0 : at);
      }
      for (int k = 0; k < 3 - pad; ++k) bytes += char(group >> (16 - 8 * k) & 0xff);
    }
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    out.push_back(std::move(v));
  }
  return out;
}

double l2_norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double(x) * x;
  return std::sqrt(sum);
}

}  // namespace

// The shapes OpenAI's API takes, both encodings, usage and the model's id; every client mistake a
// 400 that names the field. (What the numbers are: ServeEmbeddings below, against llama.cpp.)
TEST_F(Serve, EmbeddingsShapesEncodingsAndMistakes) {
  const json tok = post(port, "/tokenize", json{{"content", "Hello world"}, {"add_special", true}}).j();
  const std::vector<int32_t> hello = tok["tokens"].get<std::vector<int32_t>>();  // BOS Hello world
  const Reply one = post(port, "/v1/embeddings", json{{"model", "text-embedding-3-small"}, {"input", "Hello world"}});
  ASSERT_EQ(one.status, 200) << one.body;
  const json a = one.j();
  EXPECT_EQ(a["object"], "list");
  EXPECT_EQ(a["model"], "tiny");  // the served id, as completions answer
  EXPECT_EQ(a["usage"], json({{"prompt_tokens", hello.size()}, {"total_tokens", hello.size()}}));
  const std::vector<float> e = embedding_vectors(a).at(0);
  ASSERT_GT(e.size(), 1u);
  EXPECT_NEAR(l2_norm(e), 1.0, 1e-6);

  // Every input shape; the text and its ids give the same vector, and each vector is its input's
  // alone (the same as asked by itself).
  const Reply many =
      post(port, "/v1/embeddings", json{{"input", {hello, {hello[0], hello[1]}, hello}}, {"dimensions", e.size()}});
  ASSERT_EQ(many.status, 200) << many.body;
  const auto m = embedding_vectors(many.j());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], e);
  EXPECT_EQ(m[2], e);
  EXPECT_NE(m[1], e);
  EXPECT_EQ(many.j()["usage"]["prompt_tokens"], 2 * hello.size() + 2);
  const Reply ids = post(port, "/embeddings", json{{"input", hello}, {"encoding_format", "float"}});  // the alias
  ASSERT_EQ(ids.status, 200) << ids.body;
  EXPECT_EQ(embedding_vectors(ids.j()).at(0), e);
  const Reply texts =
      post(port, "/v1/embeddings", json{{"input", {"Hello world", "Hello"}}, {"encoding_format", "base64"}});
  ASSERT_EQ(texts.status, 200) << texts.body;
  EXPECT_TRUE(texts.j()["data"][0]["embedding"].is_string());
  EXPECT_EQ(embedding_vectors(texts.j()).at(0), e);  // base64 carries the float32 bits
  EXPECT_EQ(post(port, "/v1/embeddings", json{{"input", "Hi"}, {"frobnicate", 1}}).status, 200);  // logged, ignored

  const int64_t n_vocab = 32000;
  for (const auto& [body, param] : std::vector<std::pair<json, std::string>>{
           {json::object(), "input"},
           {{{"input", nullptr}}, "input"},
           {{{"input", ""}}, "input"},
           {{{"input", json::array()}}, "input"},
           {{{"input", {"a", ""}}}, "input[1]"},
           {{{"input", json::array({json::array()})}}, "input[0]"},
           {{{"input", {{1, 2}, json::array()}}}, "input[1]"},
           {{{"input", 5}}, "input"},
           {{{"input", {1, "a"}}}, "input"},
           {{{"input", {"a", 1}}}, "input[1]"},
           {{{"input", {{1, 2}, 3}}}, "input[1]"},
           {{{"input", json::array({{1, -2}})}}, "input[0]"},
           {{{"input", json::array({true})}}, "input"},
           {{{"input", json::array({n_vocab})}}, "input"},
           {{{"input", {json::array({1}), json::array({n_vocab})}}}, "input[1]"},
           {{{"input", std::vector<int>(1025, 1)}}, "input"},  // the context is 1024
           {{{"input", std::vector<std::string>(2049, "a")}}, "input"},
           {{{"input", "a"}, {"encoding_format", "hex"}}, "encoding_format"},
           {{{"input", "a"}, {"encoding_format", 1}}, "encoding_format"},
           {{{"input", "a"}, {"dimensions", e.size() - 1}}, "dimensions"},
           {{{"input", "a"}, {"dimensions", "all"}}, "dimensions"},
           {{{"input", "a"}, {"model", 5}}, "model"},
           {{{"input", "a"}, {"user", 5}}, "user"}}) {
    const Reply r = post(port, "/v1/embeddings", body);
    EXPECT_EQ(r.status, 400) << body.dump().substr(0, 200) << " -> " << r.body;
    EXPECT_EQ(r.j()["error"]["param"], param) << body.dump().substr(0, 200) << " -> " << r.body;
  }
  const Reply too_long = post(port, "/v1/embeddings", json{{"input", std::vector<int>(1025, 1)}});
  EXPECT_EQ(too_long.j()["error"]["code"], "context_length_exceeded") << too_long.body;
  EXPECT_NE(too_long.j()["error"]["message"].get<std::string>().find("1025 tokens"), std::string::npos);
  EXPECT_EQ(post(port, "/v1/embeddings", std::string("[1]")).status, 400);
  EXPECT_EQ(post(port, "/v1/embeddings", std::string("{")).status, 400);
  EXPECT_EQ(get(port, "/v1/embeddings").status, 405);
}

// The numbers, against llama.cpp (node-llama-cpp 3.21.1, bench/peer/embed.mjs) on the story
// model: llama.cpp's final hidden states (after the output norm, as llama-server pools them),
// pooled here by the definition of each pooling and normalised, equal toy serve's vectors. The
// hidden state of each position is llama.cpp's last-token vector of the prefix ending there
// (attention is causal). Runs where node and bench/peer/node_modules are (`cd bench/peer && npm i`).
TEST(ServeEmbeddings, EqualLlamaCppsHiddenStatesPooled) {
  const fs::path peer = fs::path(TOY_SOURCE_DIR) / "bench" / "peer";
  if (std::system("node --version >/dev/null 2>&1") != 0 ||
      !fs::exists(peer / "node_modules" / "node-llama-cpp" / "package.json"))
    GTEST_SKIP() << "node-llama-cpp is not installed: run `cd bench/peer && npm i` for this check";
  const std::string model = (fs::path(TOY_SOURCE_DIR) / "models" / "toy-stories.gguf").string();
  ServerProcess mean(model, "--name stories");  // mean pooling: the default for a file without pooling_type
  ServerProcess last(model, "--name stories --pooling last");
  ASSERT_NE(mean.port(), 0) << mean.log();
  ASSERT_NE(last.port(), 0) << last.log();
  const std::string text = "Once upon a time, there was a little cat.";
  const std::vector<int32_t> ids =
      post(mean.port(), "/tokenize", json{{"content", text}, {"add_special", true}}).j()["tokens"];
  const std::vector<int32_t> other = {1, 300, 301, 42};
  ASSERT_GT(ids.size(), 5u);

  // llama.cpp: the last-token hidden state of every prefix of `ids`, then of `other`.
  std::string lists;
  for (size_t t = 1; t <= ids.size(); ++t) {
    lists += " ";
    for (size_t k = 0; k < t; ++k) lists += (k ? "," : "") + std::to_string(ids[k]);
  }
  for (size_t k = 0; k < other.size(); ++k) lists += (k ? "," : " ") + std::to_string(other[k]);
  const std::string out = tmp("llama_embed.json");
  const int rc = std::system(
      ("cd " + peer.string() + " && timeout 300 node embed.mjs " + model + lists + " >" + out + " 2>&1").c_str());
  const std::string llama_text = toy::test::read_text(out);
  ASSERT_EQ(rc, 0) << llama_text;
  const auto hidden = json::parse(llama_text).get<std::vector<std::vector<float>>>();  // [T + 1][D]
  ASSERT_EQ(hidden.size(), ids.size() + 1);
  const size_t D = hidden[0].size();
  auto normalised = [](std::vector<double> v) {
    double sum = 0;
    for (double x : v) sum += x * x;
    std::vector<float> out;
    for (double x : v) out.push_back(float(x / std::sqrt(sum)));
    return out;
  };
  std::vector<double> mean_ids(D, 0.0);
  for (size_t t = 0; t < ids.size(); ++t)
    for (size_t d = 0; d < D; ++d) mean_ids[d] += hidden[t][d] / double(ids.size());
  const std::vector<float> want_mean = normalised(mean_ids);
  const std::vector<float> want_last_ids = normalised({hidden[ids.size() - 1].begin(), hidden[ids.size() - 1].end()});
  const std::vector<float> want_last_other = normalised({hidden.back().begin(), hidden.back().end()});

  const Reply m = post(mean.port(), "/v1/embeddings", json{{"input", text}});  // text: BOS added, as tokenized above
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.j()["usage"]["prompt_tokens"], ids.size());
  const Reply l = post(last.port(), "/v1/embeddings", json{{"input", {ids, other}}});
  ASSERT_EQ(l.status, 200) << l.body;
  const auto got_mean = embedding_vectors(m.j()), got_last = embedding_vectors(l.j());
  ASSERT_EQ(got_mean.at(0).size(), D);
  ASSERT_EQ(got_last.size(), 2u);
  // F32 weights and KV cache on both sides: as close as the logits (tests/test_models.cpp, F32).
  EXPECT_LE(toy::test::nmse(want_mean, got_mean[0]), 1e-8);
  EXPECT_LE(toy::test::nmse(want_last_ids, got_last[0]), 1e-8);
  EXPECT_LE(toy::test::nmse(want_last_other, got_last[1]), 1e-8);
  EXPECT_GT(toy::test::nmse(want_mean, got_last[0]), 1e-3);  // the poolings differ: each check can fail
}

// ---------------------------------------------------------------------------------------------
// A server of its own: one slot, one queue place, to see the queue fill.

TEST(ServeQueue, FullQueueGets503AndWaitersAreServed) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --parallel 1 --queue 1 --timeout 30");
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();
  auto blocker = hold_a_slot(port);
  ASSERT_TRUE(wait_busy(port, 1));
  const json small = {{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 2}};
  auto waiter = std::async(std::launch::async, [&] { return post(port, "/v1/completions", small); });
  for (int i = 0; i < 100 && health(port).value("requests_waiting", 0) != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(health(port)["requests_waiting"], 1);
  Reply refused = post(port, "/v1/completions", small);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.j()["error"]["code"], "server_busy");
  EXPECT_EQ(get(port, "/health").status, 200);  // cheap routes still answer
  blocker.reset();                              // the slot frees, the waiter goes
  EXPECT_EQ(waiter.get().status, 200);
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
}

TEST(ServeLifecycle, SigtermStopsGracefully) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny");
  ASSERT_NE(s.port(), 0) << s.log();
  // A request in flight when the signal arrives still gets its whole answer.
  auto inflight = std::async(std::launch::async, [&] {
    return post(
        s.port(), "/v1/completions",
        json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 400}, {"ignore_eos", true}, {"temperature", 0}});
  });
  wait_busy(s.port(), 1);
  EXPECT_EQ(s.stop(SIGTERM), 0) << s.log();
  Reply r = inflight.get();
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status == 200) {
    EXPECT_EQ(r.j()["usage"]["completion_tokens"], 400);
  }
  EXPECT_NE(s.log().find("stopped"), std::string::npos) << s.log();
}

// Issue #37 item 6: a request with n > 1 gave its slot back between choices and asked for it
// again: on SIGTERM the running request got 503 (no slot for its second choice) while the queued
// one got 200, the reverse of the docs. A request keeps its slot for all its choices.
TEST(ServeLifecycle, ARequestKeepsItsSlotForAllItsChoices) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --parallel 1 --queue 1");
  ASSERT_NE(s.port(), 0) << s.log();
  const int port = s.port();
  auto running = hold_a_slot(port, /*n=*/2);  // blocked in its first choice until we read
  ASSERT_TRUE(wait_busy(port, 1));
  auto queued = std::async(std::launch::async, [&] {
    return post(port, "/v1/completions", json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 2}});
  });
  for (int i = 0; i < 100 && health(port).value("requests_waiting", 0) != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(health(port)["requests_waiting"], 1);
  // Both choices, 6000 tokens with 20 alternatives each, take 20 s on an idle 2-core machine, 70 s on a loaded one.
  auto stopped = std::async(std::launch::async, [&] { return s.stop(SIGTERM, 600); });
  const Reply q = queued.get();  // refused at once
  EXPECT_EQ(q.status, 503) << q.body;
  EXPECT_EQ(q.j()["error"]["code"], "shutting_down") << q.body;
  const std::string stream = running->read_until("data: [DONE]");  // both choices, whole
  EXPECT_NE(stream.find("data: [DONE]"), std::string::npos)
      << stream.substr(stream.size() - std::min<size_t>(stream.size(), 500));
  EXPECT_EQ(stream.find("data: {\"error\""), std::string::npos) << s.log();
  size_t finished = 0;
  for (size_t at = 0; (at = stream.find("\"finish_reason\":\"length\"", at)) != std::string::npos; ++at) ++finished;
  EXPECT_EQ(finished, 2u);
  EXPECT_EQ(stopped.get(), 0) << s.log();
}

TEST(ServeLifecycle, BadFlagsAndFiles) {
  EXPECT_EQ(run_toy("serve /nonexistent.gguf --port 0").code, 3);
  TOY_REQUIRE_FIXTURE(model, kModel);
  EXPECT_EQ(run_toy("serve " + model.string() + " --parallel 0").code, 2);
  EXPECT_EQ(run_toy("serve " + model.string() + " --port 70000").code, 2);
}

TEST(ServeLifecycle, ChatTemplateErrorsAreClear) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const std::string dir = tmp("dir");
  fs::create_directories(dir);
  std::ofstream(dir + "/raises.jinja")
      << "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message') }}"
         "{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>";
  std::ofstream(dir + "/broken.jinja") << "{% for m in messages %}{{ m.content }";
  const json user = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const json asst = {{"model", "tiny"}, {"messages", {{{"role", "assistant"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  {
    ServerProcess s(model.string(), "--name tiny --chat-template " + dir + "/raises.jinja");
    ASSERT_NE(s.port(), 0) << s.log();
    EXPECT_EQ(post(s.port(), "/v1/chat/completions", user).status, 200);
    Reply r = post(s.port(), "/v1/chat/completions", asst);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.j()["error"]["code"], "chat_template_error");
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("must start with a user message"), std::string::npos)
        << r.body;
  }
  {
    ServerProcess s(model.string(), "--name tiny --chat-template " + dir + "/broken.jinja");
    ASSERT_NE(s.port(), 0) << s.log();
    EXPECT_NE(s.log().find("does not parse"), std::string::npos) << s.log();  // said at start-up
    Reply r = post(s.port(), "/v1/chat/completions", user);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.j()["error"]["code"], "chat_template_error");
    EXPECT_EQ(post(s.port(), "/v1/completions", json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 2}}).status,
              200);
  }
}

TEST(ServeLifecycle, ApiKey) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --api-key sesame");
  ASSERT_NE(s.port(), 0) << s.log();
  EXPECT_EQ(get(s.port(), "/v1/models").status, 401);
  EXPECT_EQ(get(s.port(), "/health").status, 200);
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/v1/models", {{"Authorization", "Bearer sesame"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // The scheme is case-insensitive (RFC 7235); the key is not, and must match whole.
  for (const auto& [header, status] : std::vector<std::pair<std::string, int>>{{"bearer sesame", 200},
                                                                               {"BEARER sesame", 200},
                                                                               {"Bearer  sesame", 200},
                                                                               {"Bearer Sesame", 401},
                                                                               {"Bearer sesam", 401},
                                                                               {"Bearer sesame2", 401},
                                                                               {"Bearer", 401},
                                                                               {"Basic sesame", 401},
                                                                               {"Bearersesame", 401}}) {
    r = c.Get("/v1/models", {{"Authorization", header}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << header;
  }
  // Issue #37 item 9: everything after a NUL byte was ignored (the header value was read as a C
  // string): the whole value must match.
  for (const auto& [header, status] :
       std::vector<std::pair<std::string, std::string>>{{std::string("Bearer sesame\0junk", 18), " 401 "},
                                                        {std::string("Bearer sesame\0", 14), " 401 "},
                                                        {"Bearer sesame", " 200 "}}) {
    RawConn raw(s.port());
    raw.send_all("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: " + header + "\r\n\r\n");
    const std::string answer = raw.read_until("\r\n\r\n");
    EXPECT_NE(answer.find(status), std::string::npos) << answer;
  }
}

// `count` slow clients of `port`, from the loopback address `first` (all of them) or, with
// `distinct`, from `first`, `first + 1`, …: each trickles a request, a byte every 200 ms for at
// most 8 s, until stop(). The constructor returns after 500 ms, when the server has them all.
class SlowClients {
 public:
  SlowClients(int port, int count, uint32_t first, bool distinct) {
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in from{}, to{};
      from.sin_family = to.sin_family = AF_INET;
      from.sin_addr.s_addr = htonl(first + (distinct ? uint32_t(i) : 0));
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      to.sin_port = htons(uint16_t(port));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
          ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
        ADD_FAILURE() << "slow client " << i << ": " << std::strerror(errno);
      fds_.push_back(fd);
    }
    trickle_ = std::thread([this] {
      const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(1000, 'a');
      for (size_t k = 0; k < 40 && !done_; ++k) {
        for (int fd : fds_) ::send(fd, request.data() + k, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ~SlowClients() {
    stop();
    for (int fd : fds_) ::close(fd);
  }
  const std::vector<int>& fds() const { return fds_; }
  void stop() {
    done_ = true;
    if (trickle_.joinable()) trickle_.join();
  }

 private:
  std::vector<int> fds_;
  std::atomic<bool> done_{false};
  std::thread trickle_;
};

// /health from 127.0.0.1, ten times 200 ms apart: each answered 200 within `bound`.
void expect_health_answered_within(int port, std::chrono::milliseconds bound) {
  for (int i = 0; i < 10; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(5, 0);
    c.set_connection_timeout(5, 0);
    auto r = c.Get("/health");
    EXPECT_TRUE(r) << "no answer under load";
    EXPECT_EQ(r ? r->status : 0, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, bound);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Issue #22 item 7: ~50 clients sending a byte a second held every HTTP thread (--timeout bounded
// each read, not the request), so even /health starved. Now one address holds at most
// --conns-per-client connections, and a request must arrive whole within --timeout.
TEST(ServeLifecycle, SlowClientsDoNotStarveTheServer) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  // One slot and no queue: 1 + 0 + 32 HTTP threads before the fix, fewer than the slow clients.
  ServerProcess s(model.string(), "--name tiny --parallel 1 --queue 0 --timeout 3");
  ASSERT_NE(s.port(), 0) << s.log();
  // 50 slow clients from another loopback address (127.0.0.2), each trickling a request;
  // /health from 127.0.0.1 answers at once, again and again.
  SlowClients slow(s.port(), 50, 0x7f000002, /*distinct=*/false);
  expect_health_answered_within(s.port(), std::chrono::milliseconds(1000));
  // Within --timeout (3 s) of their first byte every slow client has been answered and closed:
  // 429 beyond the first 16 (the default --conns-per-client), the connection closed for those 16.
  int refused = 0, closed = 0;
  for (int fd : slow.fds()) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, size_t(n));
    if (got.find(" 429 ") != std::string::npos) ++refused;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;  // not left open until our 5 s timeout
  }
  slow.stop();
  EXPECT_EQ(refused, 34);
  EXPECT_EQ(closed, 50);
  size_t logged = 0;  // the request log has a line for each refusal too
  const std::string log = s.log();
  for (size_t at = 0; (at = log.find("connection refused 429 (127.0.0.2)", at)) != std::string::npos; ++at) ++logged;
  EXPECT_EQ(logged, 34u);
  EXPECT_EQ(get(s.port(), "/health").status, 200);
}

// Issue #37 item 10: the per-address limit does not bound slow clients from many addresses: 150
// of them, each trickling its headers, held every HTTP thread (1 + 0 + 64) for the whole --timeout
// (30 s, the default), and /health got no answer. At most 32 connections wait for headers at once
// (a new one closes the longest-waiting), so /health is answered at once.
TEST(ServeLifecycle, SlowClientsFromManyAddressesDoNotStarveTheServer) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --parallel 1 --queue 0");
  ASSERT_NE(s.port(), 0) << s.log();
  SlowClients slow(s.port(), 150, 0x7f000100, /*distinct=*/true);  // from 127.0.1.0 … 127.0.1.149
  // Before the fix: no answer until the slow clients' 30 s were up.
  expect_health_answered_within(s.port(), std::chrono::seconds(3));
  slow.stop();
  EXPECT_TRUE(s.alive()) << s.log();
}

// Issue #37 item 7: a connection over the per-address limit got its 429 and was closed at once;
// a client still sending its request then got a reset (a broken pipe) instead of the answer. The
// refusal is a lingering close: the client sends its whole body and reads the 429.
TEST(ServeLifecycle, ARefusedClientStillSendingReadsIts429) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess s(model.string(), "--name tiny --conns-per-client 1");
  ASSERT_NE(s.port(), 0) << s.log();
  RawConn held(s.port());  // the one connection 127.0.0.1 may hold, admitted once it is answered
  held.send_all("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NE(held.read_until("}").find(" 200 "), std::string::npos);
  const std::string body = json{{"model", "tiny"}, {"prompt", std::string(512 * 1024, 'a')}}.dump();
  const std::string request = http_post_text("/v1/completions", body);
  const size_t head = request.size() - body.size();
  for (int i = 0; i < 4; ++i) {
    RawConn c(s.port());
    ASSERT_TRUE(c.send_all(request.substr(0, head)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the 429 goes out meanwhile
    EXPECT_TRUE(c.send_all(body)) << "reset while sending, refusal " << i << ": " << std::strerror(errno);
    const std::string answer = c.read_until("}}");
    EXPECT_NE(answer.find(" 429 "), std::string::npos) << answer;
  }
}

// Issue #22 item 10: a chat template inside a GGUF that doubles a list into itself cost ~3 GB and
// 8 s per chat request, rendered before the --parallel/--queue limits applied. Now its render fails
// at the template memory budget, quickly, and only once the request holds a slot.
TEST(ServeLifecycle, AHostileChatTemplateIsBoundedAndRendersOnlyWithASlot) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  auto f = toy::gguf::GgufFile::open(model.string());
  toy::gguf::GgufWriter w = toy::gguf::copy_of(*f);
  w.set("tokenizer.chat_template",
        toy::gguf::Value::of_string("{% set ns = namespace(a=[]) %}{% for i in range(100000) %}"
                                    "{% set ns.a = ns.a + [ns.a] %}{% endfor %}{{ messages[0].content }}"));
  const std::string hostile = tmp("hostile.gguf");
  w.write(hostile);
  f.reset();
  ServerProcess s(hostile, "--name tiny --parallel 1 --queue 0");
  ASSERT_NE(s.port(), 0) << s.log();
  const json chat = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 1}};
  {
    // The one slot busy and no queue: the chat request is refused before its template runs.
    auto c = std::make_unique<RawConn>(s.port(), /*rcvbuf=*/4096);
    c->send_all(http_post_text("/v1/completions", json{{"model", "tiny"},
                                                       {"prompt", "Hello"},
                                                       {"max_tokens", 3000},
                                                       {"ignore_eos", true},
                                                       {"logprobs", 20},
                                                       {"stream", true}}
                                                      .dump()));
    c->read_until("data: ");
    ASSERT_TRUE(wait_busy(s.port(), 1));
    Reply r = post(s.port(), "/v1/chat/completions", chat);
    EXPECT_EQ(r.status, 503) << r.body;
  }
  ASSERT_TRUE(wait_busy(s.port(), 0));
  const auto t0 = std::chrono::steady_clock::now();
  Reply r = post(s.port(), "/v1/chat/completions", chat);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "chat_template_error");
  EXPECT_NE(r.body.find("MiB of values, the limit"), std::string::npos) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_EQ(post(s.port(), "/v1/completions", json{{"model", "tiny"}, {"prompt", "Hi"}, {"max_tokens", 1}}).status,
            200);
  fs::remove(hostile);
}

// Issue #19: httplib's default SO_REUSEPORT let a second server bind a port in use, and the
// kernel then dealt connections between the two, so a keyless server answered every other
// request meant for an --api-key one. A port in use must be an error (exit 4) at start.
TEST(ServeLifecycle, APortInUseIsAnErrorAndIsNeverShared) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  ServerProcess keyed(model.string(), "--name tiny --api-key sesame");
  ASSERT_NE(keyed.port(), 0) << keyed.log();
  const std::string port = std::to_string(keyed.port());
  // A second server on that port (bounded: before the fix it started and served until killed).
  const std::string err = tmp("second.err");
  const int status = std::system(("timeout 20 " + toy_bin() + " serve " + model.string() + " --host 127.0.0.1 --port " +
                                  port + " --name tiny >/dev/null 2>" + err)
                                     .c_str());
  EXPECT_EQ(WEXITSTATUS(status), 4) << toy::test::read_text(err);
  EXPECT_NE(toy::test::read_text(err).find("already in use"), std::string::npos) << toy::test::read_text(err);
  // Were a keyless server sharing the port, about half of these would get 200.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(get(keyed.port(), "/v1/models").status, 401);
}

// ---------------------------------------------------------------------------------------------
// Tool calls: the three formats parsed out of answers (and left as text when they are not calls),
// the held-back text of a streamed answer, and over HTTP with each format's real template: a
// forced call from the random-weight model always names the function and its arguments parse and
// satisfy the `parameters` schema; streamed calls come as OpenAI's deltas; the conversation with
// the call and its result renders back through the template.

TEST(ServeTools, ParsesEachFormatAndLeavesOtherTextAlone) {
  using namespace toy::serve;
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
          {"type": "function", "function": {"name": "add"}}])");
  ToolAnswer a = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
      ToolFormat::Hermes, tools, 1);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.content, "Let me check.");
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(a.calls[1].arguments, R"({"a":1})");  // arguments sent as a string are taken too
  EXPECT_EQ(a.calls[0].id.size(), 9u);
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  a = parse_tool_calls("<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 2}}", ToolFormat::Llama3, tools, 1);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, R"({"a":2})");
  EXPECT_EQ(a.content, "");
  a = parse_tool_calls(
      "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Oslo\"}, \"id\": \"abcdefghi\"}]",
      ToolFormat::Mistral, tools, 1);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[1].name, "get_weather");
  // Not calls: plain text, an undeclared function, broken JSON, a call cut short.
  for (const char* text : {"Hello there", "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
                           "<tool_call>{\"name\": \"add\", \"arguments\": {</tool_call>",
                           "<tool_call>{\"name\": \"add\", \"arguments\": {}}"}) {
    a = parse_tool_calls(text, ToolFormat::Hermes, tools, 1);
    EXPECT_TRUE(a.calls.empty()) << text;
    EXPECT_EQ(a.content, text);
  }
  // Issue #36: calls finished before one that max_tokens cut are kept (they were dropped, and the
  // raw text came back as content); the cut one is left out of both, and `cut` says so.
  const std::string first = "{\"name\": \"add\", \"arguments\": {\"a\": 1}}";
  for (const auto& [text, f] : std::vector<std::pair<std::string, ToolFormat>>{
           {"Sure.\n<tool_call>" + first + "</tool_call>\n<tool_call>{\"name\": \"get_wea", ToolFormat::Hermes},
           {"[TOOL_CALLS][" + first + ", {\"name\": \"add\", \"argu", ToolFormat::Mistral},
           {"[TOOL_CALLS][" + first + ", ", ToolFormat::Mistral}}) {
    a = parse_tool_calls(text, f, tools, 1);
    ASSERT_EQ(a.calls.size(), 1u) << text;
    EXPECT_EQ(a.calls[0].arguments, R"({"a":1})");
    EXPECT_TRUE(a.cut) << text;
    EXPECT_EQ(a.content, f == ToolFormat::Hermes ? "Sure." : "") << text;
  }
  EXPECT_FALSE(parse_tool_calls("[" + first + "]", ToolFormat::Mistral, tools, 1).cut);
  EXPECT_TRUE(parse_tool_calls("[" + first + "] and more", ToolFormat::Mistral, tools, 1).calls.empty());
  EXPECT_TRUE(parse_tool_calls("{\"name\": \"nope\", \"parameters\": {}}", ToolFormat::Llama3, tools, 1).calls.empty());
  EXPECT_TRUE(parse_tool_calls("[1, 2]", ToolFormat::Mistral, tools, 1).calls.empty());
  // Issue #37 item 1: a call in the answer nested deeper than the request limit (64) is not a call
  // (it was parsed without the limit and copied recursively: 200,000 levels overflowed the stack).
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const std::string& text :
       {"<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": " + deep + "}}</tool_call>",
        "<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": " + deep + "}\"}</tool_call>"}) {
    a = parse_tool_calls(text, ToolFormat::Hermes, tools, 1);
    EXPECT_TRUE(a.calls.empty());
    EXPECT_TRUE(a.content == text);  // not printed: 400 KB
  }
  EXPECT_TRUE(parse_tool_calls("[{\"name\": \"add\", \"arguments\": " + deep + "}]", ToolFormat::Mistral, tools, 1)
                  .calls.empty());

  // Streaming: content goes out until a call may begin; the rest is held.
  ToolCallStream h(ToolFormat::Hermes, tools, 1);
  EXPECT_EQ(h.push("Sure <tool").content, "Sure ");
  EXPECT_EQ(h.push("_c").content, "");
  EXPECT_EQ(h.push("all>{\"name\"").content, "");
  EXPECT_EQ(h.held(), "<tool_call>{\"name\"");
  ToolCallStream not_a_call(ToolFormat::Hermes, tools, 1);
  EXPECT_EQ(not_a_call.push("a <").content, "a ");
  EXPECT_EQ(not_a_call.push("b> text").content, "<b> text");
  ToolCallStream l(ToolFormat::Llama3, tools, 1);
  EXPECT_EQ(l.push("  ").content, "");
  EXPECT_EQ(l.push("{\"name\"").content, "");
  ToolCallStream plain(ToolFormat::Llama3, tools, 1);
  EXPECT_EQ(plain.push(" Hi").content, " Hi");
  EXPECT_EQ(plain.push(" {x}").content, " {x}");
}

// A streamed call goes out as it is written, as OpenAI streams it: its id and name (arguments "")
// as soon as the name is whole, then its arguments piece by piece; the pieces put together are the
// arguments of the whole answer's parse, in every format, for several calls.
// A model's answer may hold a million blanks inside a call's header; the scan of it must not
// recurse per blank (std::regex did: a stack overflow, the server down).
TEST(ServeTools, AMillionBlanksInACallAreScannedWithoutRecursion) {
  using namespace toy::serve;
  const nlohmann::ordered_json tools =
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "add"}}])");
  const std::string blanks(1'000'000, ' ');
  const std::string call =
      "{" + blanks + "\"name\":" + blanks + "\"add\"," + blanks + "\"arguments\":" + blanks + "{\"a\": 1}}";
  for (const ToolFormat f : {ToolFormat::Hermes, ToolFormat::Llama3, ToolFormat::Mistral}) {
    const std::string text = f == ToolFormat::Hermes   ? "<tool_call>" + call + "</tool_call>"
                             : f == ToolFormat::Llama3 ? "<|python_tag|>" + call
                                                       : "[TOOL_CALLS][" + call + "]";
    const ToolAnswer a = parse_tool_calls(text, f, tools, 1);
    ASSERT_EQ(a.calls.size(), 1u) << int(f);
    EXPECT_EQ(a.calls[0].arguments, R"({"a":1})");
    const std::vector<PartialCall> shown = partial_tool_calls(text.substr(0, text.size() - 3), f, tools);
    ASSERT_EQ(shown.size(), 1u) << int(f);
    EXPECT_EQ(shown[0].name, "add");
  }
}

TEST(ServeTools, StreamedCallsGoOutTokenByToken) {
  using namespace toy::serve;
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "add"}}])");
  const std::string args =
      "{\"city\": \"Paris, \\\"la ville\\\" {}\", \"days\": [1, 2]}";  // a quote and braces in a string
  for (const auto& [format, text] : std::vector<std::pair<ToolFormat, std::string>>{
           {ToolFormat::Hermes,
            "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args +
                "}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
           {ToolFormat::Mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + args +
                                     "}, {\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"abcdefghi\"}]"},
           {ToolFormat::Llama3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": " + args + "}"}}) {
    SCOPED_TRACE(tool_format_name(format));
    ToolCallStream stream(format, tools, 7);
    std::string content;
    std::vector<ToolCallDelta> deltas;
    for (size_t at = 0; at < text.size(); at += 3) {  // 3-byte "tokens"
      ToolCallStream::Update u = stream.push(text.substr(at, 3));
      content += u.content;
      deltas.insert(deltas.end(), u.calls.begin(), u.calls.end());
    }
    ToolAnswer whole = parse_tool_calls(text, format, tools, 7);
    const ToolAnswer parsed = whole;  // as a non-streamed answer gives it
    const size_t streamed = deltas.size();
    for (const ToolCallDelta& d : stream.finish(whole.calls)) deltas.push_back(d);
    ASSERT_EQ(whole.calls.size(), format == ToolFormat::Llama3 ? 1u : 2u);
    EXPECT_EQ(whole.calls[0].arguments, R"({"city":"Paris, \"la ville\" {}","days":[1,2]})");
    EXPECT_EQ(content, format == ToolFormat::Hermes ? "Let me look.\n" : "");
    EXPECT_EQ(streamed, deltas.size()) << "everything went out while the answer was written";
    std::vector<std::string> pieces(whole.calls.size());
    std::vector<int> fragments(whole.calls.size());
    for (const ToolCallDelta& d : deltas) {
      ASSERT_LT(d.index, whole.calls.size());
      if (!d.name.empty()) {  // the call's first delta, before any of its arguments
        EXPECT_EQ(d.name, whole.calls[d.index].name);
        EXPECT_EQ(d.id, parsed.calls[d.index].id);  // the same ids streamed or not
        EXPECT_EQ(pieces[d.index], "");
        EXPECT_EQ(d.arguments, "");
      } else {
        pieces[d.index] += d.arguments;
        ++fragments[d.index];
      }
    }
    for (size_t i = 0; i < whole.calls.size(); ++i) EXPECT_EQ(pieces[i], whole.calls[i].arguments);
    EXPECT_GT(fragments[0], 10);
  }
  // A call cut short stays as it went out; the whole answer has no call then.
  ToolCallStream cut(ToolFormat::Hermes, tools, 7);
  const ToolCallStream::Update u = cut.push("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\"");
  ASSERT_EQ(u.calls.size(), 2u);
  EXPECT_EQ(u.calls[1].arguments, "{\"a\"");
  std::vector<ToolCall> none;
  EXPECT_TRUE(cut.finish(none).empty());
  EXPECT_EQ(cut.calls_started(), 1u);
}

TEST(ServeTools, ForcedCallsInEveryTemplateFormat) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
       "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                      "unit": {"enum": ["C", "F"]}, "days": {"type": "integer"}},
                      "required": ["city", "unit", "days"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
       "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}])");
  auto valid_weather = [](const json& args) {
    return args.is_object() && args.size() == 3 && args["city"].is_string() &&
           (args["unit"] == "C" || args["unit"] == "F") && args["days"].is_number_integer();
  };
  for (const char* name :
       {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407"}) {
    SCOPED_TRACE(name);
    TOY_REQUIRE_FIXTURE(tpl, std::string("chat-templates/") + name + ".jinja");
    ServerProcess s(model.string(), "--name tiny --ctx 2048 --chat-template " + tpl.string());
    ASSERT_NE(s.port(), 0) << s.log();
    const json user = {{"role", "user"}, {"content", "What is the weather in Paris?"}};
    json q = {{"model", "tiny"},   {"messages", {user}},
              {"tools", tools},    {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
              {"max_tokens", 300}, {"n", 6},
              {"seed", 3}};
    Reply r = post(s.port(), "/v1/chat/completions", q);
    ASSERT_EQ(r.status, 200) << r.body;
    json first_call;
    const json answer = r.j();
    ASSERT_EQ(answer["choices"].size(), 6u);
    for (const json& c : answer["choices"]) {
      ASSERT_EQ(c["finish_reason"], "tool_calls") << c;
      EXPECT_TRUE(c["message"]["content"].is_null()) << c;
      ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c;  // parallel calls, if any, would all be get_weather
      const json& call = c["message"]["tool_calls"][0];
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["function"]["name"], "get_weather");
      EXPECT_TRUE(valid_weather(json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false))) << call;
      if (first_call.is_null()) first_call = call;
    }
    // required: any declared function; streamed as OpenAI's deltas.
    q["tool_choice"] = "required";
    q["parallel_tool_calls"] = false;
    q["n"] = 1;
    q["stream"] = true;
    r = post(s.port(), "/v1/chat/completions", q);
    ASSERT_EQ(r.status, 200) << r.body;
    bool done = false;
    std::string id, fn, args, finish;
    int fragments = 0;
    for (const json& e : sse_events(r.body, &done)) {
      const json& c = e["choices"][0];
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      if (!c["delta"].contains("tool_calls")) continue;
      const json& d = c["delta"]["tool_calls"][0];
      EXPECT_EQ(d["index"], 0);
      if (d.contains("id")) {  // the first delta: id, type, name, and no arguments yet
        id = d["id"], fn = d["function"]["name"];
        EXPECT_EQ(d["type"], "function");
        EXPECT_EQ(d["function"]["arguments"], "");
        EXPECT_EQ(args, "");
      } else {
        ++fragments;
      }
      args += d["function"]["arguments"].get<std::string>();
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(id.size(), 9u);
    // Token by token: pieces of a few bytes (the whole call at the end came in 24-byte pieces).
    EXPECT_GE(fragments * 12, int(args.size())) << fragments << " pieces: " << args;
    q["stream"] = false;  // the same call, not streamed: the same id and arguments
    const json whole = post(s.port(), "/v1/chat/completions", q).j()["choices"][0]["message"]["tool_calls"][0];
    EXPECT_EQ(whole["id"], id);
    EXPECT_EQ(whole["function"]["arguments"], args);
    const json parsed = json::parse(args, nullptr, false);
    if (fn == "get_weather")
      EXPECT_TRUE(valid_weather(parsed)) << args;
    else
      EXPECT_TRUE(fn == "add" && parsed["a"].is_number() && parsed["b"].is_number()) << fn << " " << args;
    // The call and its result go back through the template.
    json history = {user,
                    {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {first_call}}},
                    {{"role", "tool"}, {"tool_call_id", first_call["id"]}, {"content", "{\"temp\": 21}"}}};
    r = post(s.port(), "/v1/chat/completions",
             json{{"model", "tiny"}, {"messages", history}, {"tools", tools}, {"max_tokens", 4}});
    EXPECT_EQ(r.status, 200) << r.body;
    // tool_choice none: no call parsing, the answer is text.
    r = post(
        s.port(), "/v1/chat/completions",
        json{{"model", "tiny"}, {"messages", {user}}, {"tools", tools}, {"tool_choice", "none"}, {"max_tokens", 4}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(r.j()["choices"][0]["message"].contains("tool_calls"));
  }
  // Mistakes: 400 naming the field.
  ServerProcess s(model.string(), "--name tiny");
  ASSERT_NE(s.port(), 0) << s.log();
  auto status_param = [&](const json& extra) {
    json q = {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
    q.update(extra);
    const Reply r = post(s.port(), "/v1/chat/completions", q);
    return std::make_pair(r.status, r.j()["error"]["param"]);
  };
  EXPECT_EQ(status_param({{"tool_choice", "required"}}), std::make_pair(400, json("tool_choice")));
  EXPECT_EQ(status_param({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}}),
            std::make_pair(400, json("tool_choice")));
  EXPECT_EQ(status_param({{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}}),
            std::make_pair(400, json("tools[0].function.name")));
  json bad_params = tools;
  bad_params[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  EXPECT_EQ(status_param({{"tools", bad_params}, {"tool_choice", "required"}}), std::make_pair(400, json("tools")));
  EXPECT_EQ(status_param({{"tools", tools}, {"tool_choice", "required"}, {"grammar", "root ::= \"x\""}}),
            std::make_pair(400, json("tool_choice")));
}

// ---------------------------------------------------------------------------------------------
// The official OpenAI SDK (node), installed into the build tree on first use.

namespace {
// Runs tests/serve/sdk_test.mjs against `toy serve MODEL --name smol --parallel 4 EXTRA`. The SDK
// is installed once into build/serve_sdk under a lock (ctest runs the CPU and the device variants
// at once); each variant runs its script and writes its log in its own folder below, where node
// finds the shared node_modules one level up.
void run_sdk_test(const std::string& label, const std::string& extra) {
  TOY_REQUIRE_FIXTURE(model, kModel);
  if (std::system("node --version >/dev/null 2>&1") != 0 || std::system("npm --version >/dev/null 2>&1") != 0 ||
      std::system("flock --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "node, npm and flock are needed for the OpenAI SDK test";
  const fs::path dir = fs::path(TOY_BINARY_DIR) / "serve_sdk";
  const fs::path run = dir / label;
  fs::create_directories(run);
  const std::string install = "cd " + dir.string() + " && flock npm.lock sh -c 'cp " +
                              (fs::path(TOY_SOURCE_DIR) / "tests" / "serve" / "package.json").string() +
                              " . && { [ -f node_modules/openai/package.json ] || timeout 300 npm install --no-audit "
                              "--no-fund >npm.log 2>&1; }'";
  if (std::system(install.c_str()) != 0)
    GTEST_SKIP() << "npm install openai failed (no registry access?): see " << (dir / "npm.log").string();
  fs::copy_file(fs::path(TOY_SOURCE_DIR) / "tests" / "serve" / "sdk_test.mjs", run / "sdk_test.mjs",
                fs::copy_options::overwrite_existing);
  ServerProcess s(model.string(), "--name smol --parallel 4" + extra);
  ASSERT_NE(s.port(), 0) << s.log();
  const auto r = std::system(
      ("cd " + run.string() + " && timeout 300 node sdk_test.mjs " + s.url() + "/v1 smol >sdk.log 2>&1").c_str());
  const std::string out = toy::test::read_text(run / "sdk.log");
  EXPECT_EQ(r, 0) << out << "\nserver log:\n" << s.log();
  EXPECT_NE(out.find("checks passed"), std::string::npos) << out;
}
}  // namespace

TEST(ServeSdk, OfficialOpenAINodeSdk) { run_sdk_test("cpu", ""); }

#ifdef TOY_VULKAN
// The same checks with the model on vulkan:0 (lavapipe in CI), four slots decoding in one batch.
TEST(ServeSdk, OfficialOpenAINodeSdkOnVulkan) {
  TOY_REQUIRE_VULKAN();
  run_sdk_test("vulkan", " --device vulkan");
}
#endif
