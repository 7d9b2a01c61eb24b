// tests/test_fetch.cpp — `toy fetch` against a local imitation of the Hugging Face hub.
//
// The fake hub (httplib on 127.0.0.1, ephemeral port, in a thread) answers the resolve endpoint as
// huggingface.co does: an LFS file gets a 302 to a "CDN" URL with X-Repo-Commit, X-Linked-Etag
// (the sha256) and X-Linked-Size; a small git file gets a 200 with its git ETag. The CDN honours
// Range requests and can drop the connection mid-body. No internet is needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "fixtures.h"
#include "toy/hub/hub.h"
#include "toy/io/gguf.h"

namespace fs = std::filesystem;
using Env = toy::test::ScopedEnv;
using toy::test::read_text;
using toy::test::run_toy;

namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

// A real (tiny) GGUF so that `toy list` can read what was fetched.
std::string model_bytes(uint32_t file_type = 0) {
  const fs::path p = fs::path(testing::TempDir()) / ("toy_fetch_model_" + std::to_string(::getpid()) + ".gguf");
  std::vector<float> w(4096);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 97) * 0.01f;
  toy::gguf::GgufWriter g;
  g.set("general.architecture", toy::gguf::Value::of_string("llama"));
  g.set("general.file_type", toy::gguf::Value::of_u32(file_type));
  g.add_tensor("token_embd.weight", {64, 64}, toy::DType::F32, w.data());
  g.write(p.string());
  std::string bytes = read_text(p);
  fs::remove(p);
  return bytes;
}

struct FakeHub {
  httplib::Server svr;
  std::thread thread;
  int port = 0;
  std::string model = model_bytes();
  std::string model_q4 = model_bytes(15);  // tiny-Q4_K_M.gguf: other bytes, so another blob
  std::string config = "{\"model_type\": \"llama\"}\n";
  std::string announced_sha = toy::hub::sha256_hex(model);                // what X-Linked-Etag claims
  std::string token;                                                      // required bearer token ("" = open)
  std::string commit = kCommit;                                           // what X-Repo-Commit claims
  std::string git_etag = "\"5d41402abc4b2a76b9719d911017c592aaaaaaaa\"";  // config.json's ETag header
  std::atomic<int> drops{0};                                              // CDN requests to cut short
  std::atomic<int> slow_ms{0};                                            // CDN: pause between 1 KiB pieces
  std::atomic<int> cdn_status{0};                                         // CDN: answer with this error status
  int64_t size_delta = 0;                                                 // X-Linked-Size = model size + this
  std::string redirect_to;                                                // resolve: 302 to this origin, without facts
  std::string cdn_base;                                                   // origin of the CDN URL ("" = this server)
  std::vector<std::string> auths;                                         // Authorization header of every request
  std::atomic<int> cdn_requests{0}, head_requests{0};
  std::mutex mu;
  std::vector<std::string> ranges;  // Range headers the CDN saw

  FakeHub() {
    svr.Get(R"(/([^/]+)/([^/]+)/resolve/([^/]+)/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.method == "HEAD") ++head_requests;
      {
        std::lock_guard<std::mutex> l(mu);
        auths.push_back(req.get_header_value("Authorization"));
      }
      if (!redirect_to.empty()) {  // a renamed repository: the facts are at the new place
        res.status = 302;
        res.set_header("Location", redirect_to + req.path);
        return;
      }
      const std::string repo = req.matches[1].str() + "/" + req.matches[2].str(), rev = req.matches[3],
                        file = req.matches[4];
      if (!token.empty() && req.get_header_value("Authorization") != "Bearer " + token) {
        res.status = 401;
        res.set_header("X-Error-Message", "Invalid credentials in Authorization header");
        return;
      }
      if (repo != "org/tiny") {
        res.status = 404;
        res.set_header("X-Error-Code", "RepoNotFound");
        return;
      }
      res.set_header("X-Repo-Commit", commit);
      if (file == "model.gguf" || file == "tiny-Q8_0.gguf") {
        res.status = 302;
        res.set_header("X-Linked-Etag", "\"" + announced_sha + "\"");
        res.set_header("X-Linked-Size", std::to_string(int64_t(model.size()) + size_delta));
        res.set_header("ETag", "\"abcdef\"");
        res.set_header("Location", cdn_base + "/cdn/" + announced_sha);
      } else if (file == "tiny-Q4_K_M.gguf") {  // served in place, its sha256 as the ETag
        res.set_header("ETag", "\"" + toy::hub::sha256_hex(model_q4) + "\"");
        res.set_content(model_q4, "application/octet-stream");
      } else if (file == "config.json") {
        res.set_header("ETag", git_etag);  // git blob sha1: no sha256 check
        res.set_content(config, "application/json");
      } else if (file == "chunked.txt") {  // no size, a git ETag: nothing to verify a body against
        res.set_header("ETag", git_etag);
        res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
          sink.write("cut short", 9);
          sink.done();
          return true;
        });
      } else {
        res.status = 404;
        res.set_header("X-Error-Code", "EntryNotFound");
        res.set_header("X-Error-Message", "Entry not found");
      }
    });
    // The repository's file list (GET /api/models/{repo}/tree/{revision}), as the hub answers it.
    svr.Get(R"(/api/models/([^/]+)/([^/]+)/tree/([^/]+))", [](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1].str() + "/" + req.matches[2].str() != "org/tiny") {
        res.status = 404;
        res.set_header("X-Error-Code", "RepoNotFound");
        return;
      }
      nlohmann::json files = nlohmann::json::array();
      for (const char* f : {"config.json", "tiny-Q8_0.gguf", "tiny-Q4_K_M.gguf", "mmproj-tiny-f16.gguf"})
        files.push_back({{"type", "file"}, {"path", f}, {"size", 1}});
      files.push_back({{"type", "directory"}, {"path", "extra"}});
      res.set_content(files.dump(), "application/json");
    });
    svr.Get(R"(/cdn/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      ++cdn_requests;
      {
        std::lock_guard<std::mutex> l(mu);
        ranges.push_back(req.get_header_value("Range"));
        auths.push_back(req.get_header_value("Authorization"));
      }
      if (cdn_status != 0) {
        res.status = cdn_status;
        res.set_content("denied", "text/plain");
        return;
      }
      const bool drop = drops > 0 && drops-- > 0;
      res.set_content_provider(model.size(), "application/octet-stream",
                               [this, drop](size_t offset, size_t length, httplib::DataSink& sink) {
                                 if (drop) {  // a third of what was asked, then the connection goes away
                                   sink.write(model.data() + offset, length / 3);
                                   return false;
                                 }
                                 if (slow_ms > 0) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
                                   length = std::min<size_t>(length, 1024);
                                 }
                                 sink.write(model.data() + offset, length);
                                 return true;
                               });
    });
    port = svr.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { svr.listen_after_bind(); });
    while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeHub() {
    svr.stop();
    thread.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// A port nothing listens on: bind, read the number, close.
int closed_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

struct FetchTest : testing::Test {
  Env env;
  fs::path cache;
  FakeHub hub;
  void SetUp() override {
    cache = fs::path(testing::TempDir()) / ("toy_fetch_cache_" + std::to_string(::getpid()) + "_" +
                                            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(cache);
    env.set("HF_HUB_CACHE", cache.string());
    env.set("HF_ENDPOINT", hub.endpoint());
    env.unset("HF_TOKEN");
    env.unset("HUGGING_FACE_HUB_TOKEN");
  }
  void TearDown() override { fs::remove_all(cache); }
  fs::path repo_dir() const { return cache / "models--org--tiny"; }
  fs::path blob() const { return repo_dir() / "blobs" / hub.announced_sha; }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

TEST_F(FetchTest, DownloadsIntoTheHubCacheLayout) {
  auto r = run_toy("fetch org/tiny model.gguf");
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path snap = repo_dir() / "snapshots" / kCommit / "model.gguf";
  EXPECT_EQ(trim(r.out), snap.string());
  ASSERT_TRUE(fs::is_symlink(snap));
  EXPECT_EQ(fs::read_symlink(snap), fs::path("../../blobs") / hub.announced_sha);
  EXPECT_EQ(read_text(snap), hub.model);
  EXPECT_EQ(read_text(repo_dir() / "refs" / "main"), kCommit);
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
  EXPECT_NE(r.err.find("sha256 verified"), std::string::npos) << r.err;
  EXPECT_EQ(hub.ranges.size(), 1u);
  EXPECT_EQ(hub.ranges[0], "");

  // Fetching again uses the cache: no second body transfer.
  auto again = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(trim(again.out), snap.string());
  EXPECT_EQ(hub.cdn_requests.load(), 1);
  EXPECT_NE(again.err.find("cached"), std::string::npos);

  // What toy fetches, toy list finds.
  auto l = run_toy("list --json");
  ASSERT_EQ(l.code, 0) << l.err;
  bool listed = false;
  const auto listing = nlohmann::json::parse(l.out);
  for (const auto& m : listing["models"])
    listed |= m["name"] == "org/tiny/model.gguf" && m["architecture"] == "llama" && m["path"] == snap.string();
  EXPECT_TRUE(listed) << l.out;

  // Offline (the endpoint refuses connections), the cached revision still resolves.
  env.set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(closed_port()));
  auto offline = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(offline.code, 0) << offline.err;
  EXPECT_EQ(trim(offline.out), snap.string());
}

TEST_F(FetchTest, SmallGitFileAndRevision) {
  auto r = run_toy("fetch org/tiny config.json --revision v1.0 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(read_text(trim(r.out)), hub.config);
  EXPECT_EQ(read_text(repo_dir() / "refs" / "v1.0"), kCommit);
  EXPECT_TRUE(fs::exists(repo_dir() / "blobs" / "5d41402abc4b2a76b9719d911017c592aaaaaaaa"));
}

TEST_F(FetchTest, DroppedConnectionResumesWithRange) {
  // First run: no retries, the connection drops: exit 4, the partial file stays.
  hub.drops = 1;
  auto first = run_toy("fetch org/tiny model.gguf --retries 0");
  EXPECT_EQ(first.code, 4) << first.err;
  EXPECT_NE(first.err.find("resume"), std::string::npos) << first.err;
  const fs::path part = blob().string() + ".incomplete";
  ASSERT_TRUE(fs::exists(part));
  const auto have = fs::file_size(part);
  EXPECT_GT(have, 0u);
  EXPECT_LT(have, hub.model.size());
  EXPECT_FALSE(fs::exists(blob()));

  // Second run continues from where the first stopped.
  auto second = run_toy("fetch org/tiny model.gguf");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(hub.ranges.back(), "bytes=" + std::to_string(have) + "-");
  EXPECT_EQ(read_text(trim(second.out)), hub.model);
  EXPECT_NE(second.err.find("resumed"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("sha256 verified"), std::string::npos) << second.err;
  EXPECT_FALSE(fs::exists(part));
}

TEST_F(FetchTest, DroppedConnectionIsRetriedInOneRun) {
  hub.drops = 2;
  auto r = run_toy("fetch org/tiny model.gguf");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(hub.cdn_requests.load(), 3);
  ASSERT_EQ(hub.ranges.size(), 3u);
  EXPECT_EQ(hub.ranges[0], "");
  EXPECT_EQ(hub.ranges[1].rfind("bytes=", 0), 0u);
  EXPECT_EQ(read_text(trim(r.out)), hub.model);
}

TEST_F(FetchTest, ChecksumMismatchKeepsNothing) {
  hub.announced_sha = toy::hub::sha256_hex("something else");
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("sha256 mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(blob()));
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
  EXPECT_FALSE(fs::exists(repo_dir() / "snapshots" / kCommit / "model.gguf"));
}

TEST_F(FetchTest, NotFound) {
  auto file = run_toy("fetch org/tiny nope.gguf");
  EXPECT_EQ(file.code, 4);
  EXPECT_NE(file.err.find("not found"), std::string::npos) << file.err;
  EXPECT_NE(file.err.find("nope.gguf"), std::string::npos) << file.err;
  auto repo = run_toy("fetch org/other model.gguf");
  EXPECT_EQ(repo.code, 4);
  EXPECT_NE(repo.err.find("repository org/other not found"), std::string::npos) << repo.err;
}

TEST_F(FetchTest, UnauthorizedMentionsHfToken) {
  hub.token = "hf_secret";
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("HF_TOKEN"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;

  env.set("HF_TOKEN", "hf_wrong");
  auto wrong = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(wrong.code, 4);
  EXPECT_NE(wrong.err.find("HF_TOKEN"), std::string::npos) << wrong.err;

  env.set("HF_TOKEN", "hf_secret");
  auto ok = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(read_text(trim(ok.out)), hub.model);
}

TEST_F(FetchTest, UnreachableHostIsANetworkError) {
  env.set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(closed_port()));
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("network"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(repo_dir() / "snapshots"));
}

TEST_F(FetchTest, BadArguments) {
  EXPECT_EQ(run_toy("fetch").code, 2);
  EXPECT_EQ(run_toy("fetch ../etc model.gguf").code, 2);
  EXPECT_EQ(run_toy("fetch a/b/c model.gguf").code, 2);
  EXPECT_EQ(run_toy("fetch org/tiny model.gguf --retries x").code, 2);
  EXPECT_EQ(run_toy("fetch org/tiny ../../x").code, 2);
  EXPECT_EQ(hub.head_requests.load(), 0);
}

// Every file under `dir`, relative, sorted: what a run left behind.
std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> r;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); ++it)
    r.push_back(fs::relative(it->path(), dir).string());
  std::sort(r.begin(), r.end());
  return r;
}

TEST_F(FetchTest, HostileCommitHeaderIsRefused) {
  // The commit names snapshots/<commit>/: a path there would put the file (link) anywhere.
  const fs::path outside = cache.parent_path() / ("toy_fetch_escape_" + std::to_string(::getpid()));
  fs::remove_all(outside);
  for (const std::string& commit : {"../../../" + outside.filename().string(), outside.string(), std::string("main"),
                                    std::string(kCommit.substr(0, 39)) + "/", std::string(kCommit) + "0"}) {
    hub.commit = commit;
    auto r = run_toy("fetch org/tiny config.json");
    EXPECT_EQ(r.code, 4) << commit << ": " << r.err;
    EXPECT_NE(r.err.find("X-Repo-Commit"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("40 hex digits"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(outside)) << commit;
    EXPECT_FALSE(fs::exists(repo_dir() / "snapshots")) << commit;
  }
}

TEST_F(FetchTest, HostileEtagIsRefusedWithoutDebris) {
  for (const char* etag : {"\"..\"", "\".\"", "\"../../x\"", "\"/tmp/x\"", "\"a/b\"", "\"\""}) {
    hub.git_etag = etag;
    auto r = run_toy("fetch org/tiny config.json");
    EXPECT_EQ(r.code, 4) << etag << ": " << r.err;
    EXPECT_NE(r.err.find("ETag"), std::string::npos) << r.err;
    EXPECT_EQ(tree(cache), std::vector<std::string>{}) << etag;
  }
}

TEST_F(FetchTest, HostileRevisionIsAUsageError) {
  const fs::path outside = cache.parent_path() / ("toy_fetch_rev_" + std::to_string(::getpid()));
  for (const std::string& rev : {outside.string(), std::string("../../x"), std::string("refs/../../x"),
                                 std::string("a//b"), std::string("."), std::string("a\\..\\b"), std::string("")}) {
    auto r = run_toy("fetch org/tiny config.json --revision '" + rev + "'");
    EXPECT_EQ(r.code, 2) << rev << ": " << r.err;
    EXPECT_NE(r.err.find("not a revision"), std::string::npos) << r.err;
  }
  EXPECT_EQ(hub.head_requests.load(), 0);
  EXPECT_FALSE(fs::exists(outside));
  // The library checks as well, NUL included (which a command line cannot carry).
  toy::hub::FetchOptions o;
  o.cache_dir = cache.string();
  o.endpoint = hub.endpoint();
  o.revision = std::string("main\0/../../x", 14);
  EXPECT_THROW(toy::hub::fetch("org/tiny", "config.json", o), toy::hub::HubError);
  o.revision = "main";
  EXPECT_THROW(toy::hub::fetch("org/tiny", std::string("config.json\0", 12), o), toy::hub::HubError);
  EXPECT_EQ(hub.head_requests.load(), 0);
  // Branch names with slashes and pull-request refs stay valid.
  EXPECT_NO_THROW(toy::hub::check_revision("refs/pr/1"));
  EXPECT_NO_THROW(toy::hub::check_revision("feature/x.y-z"));
}

TEST_F(FetchTest, ConcurrentFetchesOfOneBlob) {
  // Two processes fetch the same file at once: the second waits for the first's lock and finds
  // the blob done; without the lock both appended to one .incomplete file.
  hub.slow_ms = 10;
  // One shell runs both, the first in the background; each file gets the stderr, then the exit code.
  const std::string out = cache.string() + "_run",
                    fetch = toy::test::toy_bin() + " fetch org/tiny model.gguf >/dev/null";
  ASSERT_EQ(std::system(("(" + fetch + " 2>" + out + "_a; echo $? >>" + out + "_a) & " + fetch + " 2>" + out +
                         "_b; echo $? >>" + out + "_b; wait")
                            .c_str()),
            0);
  const std::string a = read_text(out + "_a"), b = read_text(out + "_b");
  fs::remove(out + "_a");
  fs::remove(out + "_b");
  const auto exit_code = [](const std::string& log) { return log.substr(log.rfind('\n', log.size() - 2) + 1); };
  EXPECT_EQ(exit_code(a), "0\n") << a;
  EXPECT_EQ(exit_code(b), "0\n") << b;
  EXPECT_EQ(read_text(blob()), hub.model);
  EXPECT_EQ(hub.cdn_requests.load(), 1);
  EXPECT_NE((a + b).find("cached"), std::string::npos) << a << b;
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
}

TEST_F(FetchTest, ChecksumIsOfTheFileOnDisk) {
  // A resumed download whose earlier bytes were damaged on disk: the stream is right, the file is
  // not, and the file is what gets used.
  hub.drops = 1;
  ASSERT_EQ(run_toy("fetch org/tiny model.gguf --retries 0").code, 4);
  const fs::path part = blob().string() + ".incomplete";
  ASSERT_TRUE(fs::exists(part));
  {
    std::fstream f(part, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put('X');
  }
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("sha256 mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(blob()));
}

TEST_F(FetchTest, TokenStaysWithTheHubOnRedirects) {
  // The HEAD follows a redirect without facts (a renamed repository) by hand, and the GET follows
  // the hub's redirect to a CDN: neither may carry HF_TOKEN to another origin (here: another port).
  FakeHub other;
  hub.redirect_to = other.endpoint();
  env.set("HF_TOKEN", "hf_secret");
  auto r = run_toy("fetch org/tiny model.gguf");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_text(trim(r.out)), other.model);
  ASSERT_FALSE(hub.auths.empty());
  for (const auto& a : hub.auths) EXPECT_EQ(a, "Bearer hf_secret");
  ASSERT_GE(other.auths.size(), 2u);  // HEAD, GET (and the CDN)
  for (const auto& a : other.auths) EXPECT_EQ(a, "") << "the token went to another host";

  // The hub answers itself, its CDN is elsewhere.
  fs::remove_all(cache);
  hub.redirect_to.clear();
  hub.cdn_base = other.endpoint();
  other.auths.clear();
  hub.auths.clear();
  const int cdn_before = other.cdn_requests;
  auto cdn = run_toy("fetch org/tiny model.gguf");
  ASSERT_EQ(cdn.code, 0) << cdn.err;
  EXPECT_EQ(other.cdn_requests - cdn_before, 1);
  for (const auto& a : other.auths) EXPECT_EQ(a, "") << "the token went to the CDN";
  for (const auto& a : hub.auths) EXPECT_EQ(a, "Bearer hf_secret");
}

TEST_F(FetchTest, MoreBytesThanAnnouncedAreCutOff) {
  hub.size_delta = -1000;  // the body goes on past the announced size
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("more than the " + std::to_string(hub.model.size() - 1000) + " bytes"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(blob()));
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
}

TEST_F(FetchTest, NothingToVerifyAgainstIsRefused) {
  auto r = run_toy("fetch org/tiny chunked.txt");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("neither the size nor the sha256"), std::string::npos) << r.err;
  EXPECT_EQ(tree(cache), std::vector<std::string>{});
}

TEST_F(FetchTest, HttpErrorsLeaveNoEmptyPartialFile) {
  hub.cdn_status = 403;
  auto r = run_toy("fetch org/tiny model.gguf");
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
  hub.cdn_status = 500;
  EXPECT_EQ(run_toy("fetch org/tiny model.gguf").code, 4);
  EXPECT_FALSE(fs::exists(blob().string() + ".incomplete"));
  // An empty FILE is a usage error, before any request.
  EXPECT_EQ(run_toy("fetch org/tiny ''").code, 2);
}

TEST(Sha256, KnownVectors) {
  using toy::hub::sha256_hex;
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Incremental updates in odd pieces give the same digest.
  toy::hub::Sha256 s;
  const std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); i += 37) s.update(text.data() + i, std::min<size_t>(37, text.size() - i));
  EXPECT_EQ(s.hex(), sha256_hex(text));
}

TEST_F(FetchTest, QuantizationSelectorsAndModelReferences) {
  // llama.cpp's -hf habit: the file list picks the GGUF file of a quantization (not the projector).
  auto r = run_toy("fetch org/tiny:q8_0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(trim(r.out), (repo_dir() / "snapshots" / kCommit / "tiny-Q8_0.gguf").string());
  EXPECT_NE(r.err.find("tiny-Q8_0.gguf: 100%"), std::string::npos) << r.err;  // the plain progress form
  // Two candidates: an error naming both; no such quantization; both FILE and :QUANT.
  auto two = run_toy("fetch org/tiny");
  EXPECT_EQ(two.code, 3);
  EXPECT_NE(two.err.find("tiny-Q4_K_M.gguf"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("tiny-Q8_0.gguf"), std::string::npos) << two.err;
  EXPECT_EQ(two.err.find("mmproj"), std::string::npos) << two.err;
  EXPECT_EQ(run_toy("fetch org/tiny:Q2_K").code, 3);
  EXPECT_EQ(run_toy("fetch org/tiny:Q8_0 model.gguf").code, 2);
  EXPECT_EQ(run_toy("fetch org/nothere:Q8_0").code, 4);
  // A model reference anywhere a model is taken: fetched when missing, then found in the cache.
  auto d = run_toy("describe hf:org/tiny:Q4_K_M");
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_TRUE(fs::exists(repo_dir() / "snapshots" / kCommit / "tiny-Q4_K_M.gguf"));
  env.set("HF_ENDPOINT", "http://127.0.0.1:" + std::to_string(closed_port()));
  EXPECT_EQ(run_toy("describe org/tiny:Q4_K_M").code, 0);
  EXPECT_EQ(run_toy("describe hf:org/tiny:Q8_0").code, 0);
  EXPECT_EQ(run_toy("describe org/tiny").code, 3);  // two in the cache now
}
