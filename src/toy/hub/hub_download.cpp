// hub/hub_download.cpp — one file from the Hugging Face hub into the shared cache layout (libcurl).
//
// The protocol is the one huggingface_hub's hf_hub_download speaks:
//   1. HEAD {endpoint}/{repo}/resolve/{revision}/{file}, not following absolute redirects (an LFS
//      file answers 302 to a CDN, and the facts are on that first answer): X-Repo-Commit is the
//      commit, X-Linked-Etag (LFS: the sha256 of the bytes) or ETag names the blob, X-Linked-Size or
//      Content-Length is its size.
//   2. Lock the blob (.locks/<repo folder>/<etag>.lock, as huggingface_hub), so that a second
//      download of it waits and then finds it done. GET the same URL, following redirects, into
//      blobs/<etag>.incomplete; an existing .incomplete is resumed with "Range: bytes=<have>-",
//      and a dropped connection is retried the same way.
//   3. Check the size and, when the etag is one, the sha256 of the file on disk; then rename the
//      blob into place, link snapshots/<commit>/<file> -> ../../blobs/<etag>, and write refs/<revision>.
// Names from the server (commit, ETag) and from the caller (revision, file) are checked before
// they become path components.
// Every step that changes the cache is a rename, so a reader never sees a partial file.
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "toy/hub/hub.h"
#include "toy/io/output_file.h"
#include "toy/io/progress.h"

namespace toy::hub {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// Percent-encodes everything but unreserved characters (and '/' when keep_slash).
std::string quote(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string r;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'))
      r += char(c);
    else {
      r += '%';
      r += hex[c >> 4];
      r += hex[c & 15];
    }
  }
  return r;
}

// A relative path of plain components: what may be joined under a directory of the cache.
bool is_relative_path(const std::string& s) {
  if (s.empty() || s.size() > 1024 || s.front() == '/') return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f || c == '\\') return false;  // NUL, newlines, escapes; '\\' is a separator elsewhere
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('/', start);
    if (end == std::string::npos) end = s.size();
    const std::string_view part(s.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool is_commit(const std::string& s) {  // the hub's commit ids: 40 lower-case hex digits
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

bool is_etag(const std::string& s) {  // one path component (blobs/<etag>)
  return !s.empty() && s.size() <= 128 && s != "." && s != ".." && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

bool is_sha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(static_cast<unsigned char>(c));
         });
}

struct CurlHandle {
  CURL* h;
  curl_slist* headers = nullptr;
  CurlHandle() : h(curl_easy_init()) {
    if (!h) throw HubError(HubError::Local, "libcurl could not be initialised");
  }
  ~CurlHandle() {
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
  }
  void header(const std::string& line) { headers = curl_slist_append(headers, line.c_str()); }
};

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, of the last response
  std::string body;                            // error bodies only (kept short)
  std::string get(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0)
    r->headers.clear();  // a new response (after a redirect)
  else if (auto colon = line.find(':'); colon != std::string::npos)
    r->headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return size * n;
}

// "scheme://host:port" of a URL, the port made explicit; "" when it does not parse. The token
// belongs to the endpoint's origin and is sent to no other.
std::string origin(const std::string& url) {
  std::string r;
  CURLU* u = curl_url();
  char *scheme = nullptr, *host = nullptr, *port = nullptr;
  if (u && curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
    r = lower(scheme) + "://" + lower(host) + ":" + port;
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
  return r;
}

void common_options(CurlHandle& c, const std::string& url, const FetchOptions& o, const std::string& token,
                    Response& r) {
  curl_easy_setopt(c.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.h, CURLOPT_PROTOCOLS_STR, "http,https");  // a redirect to file:// or ftp:// is refused
  curl_easy_setopt(c.h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c.h, CURLOPT_USERAGENT, "toy/" TOY_VERSION);
  curl_easy_setopt(c.h, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
  // A stalled transfer (no byte for 30 s) counts as dropped, and is resumed.
  curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c.h, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(c.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c.h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c.h, CURLOPT_HEADERDATA, &r);
  c.header("Accept-Encoding: identity");  // the hub's sizes and hashes are of the raw bytes
  // Only for `url` itself: libcurl drops a custom Authorization header when a redirect it follows
  // changes the scheme, host or port (CURLOPT_UNRESTRICTED_AUTH off), so the CDN never sees the token.
  curl_easy_setopt(c.h, CURLOPT_UNRESTRICTED_AUTH, 0L);
  if (!token.empty()) c.header("Authorization: Bearer " + token);
}

HubError transport_error(CURLcode rc, const std::string& url) {
  return HubError(HubError::Network, url + ": " + curl_easy_strerror(rc));
}

// Turns an HTTP error status into the message the user needs.
[[noreturn]] void throw_status(const Response& r, const std::string& repo, const std::string& file,
                               const std::string& rev, const std::string& url, bool have_token) {
  std::string detail = r.get("x-error-message");
  const std::string code = r.get("x-error-code");
  if (detail.empty() && !r.body.empty() && r.body.size() < 300) detail = trim(r.body);
  const std::string suffix = detail.empty() ? "" : " (" + detail + ")";
  if (r.status == 401 || r.status == 403) {
    std::string msg =
        "HTTP " + std::to_string(r.status) + ": not authorized to download " + file + " from " + repo + suffix + "; ";
    msg += have_token
               ? "the token in HF_TOKEN has no access to this repository (is it gated? accept its terms on the hub)"
               : "the repository may be gated, private or missing: set HF_TOKEN to an access token "
                 "(https://huggingface.co/settings/tokens)";
    throw HubError(HubError::Unauthorized, msg);
  }
  if (r.status == 404) {
    std::string what = code == "RepoNotFound"       ? "repository " + repo + " not found"
                       : code == "RevisionNotFound" ? "revision '" + rev + "' not found in " + repo
                                                    : file + " not found in " + repo + " at revision '" + rev + "'";
    throw HubError(HubError::NotFound, what + suffix + " (" + url + ")");
  }
  throw HubError(HubError::Network, url + ": HTTP " + std::to_string(r.status) + suffix);
}

// --- the metadata request -----------------------------------------------------------------

struct Meta {
  std::string commit, etag;
  int64_t size = -1;
};

Meta head(const std::string& url0, const FetchOptions& o, const std::string& token, const std::string& repo,
          const std::string& file, const std::string& rev) {
  std::string url = url0;
  const std::string home = origin(url0);
  for (int hop = 0; hop < 6; ++hop) {
    CurlHandle c;
    Response r;
    // Redirects are followed by hand here: the token goes to the endpoint's origin, never elsewhere.
    common_options(c, url, o, !home.empty() && origin(url) == home ? token : std::string(), r);
    curl_easy_setopt(c.h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c.h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
    if (CURLcode rc = curl_easy_perform(c.h); rc != CURLE_OK) throw transport_error(rc, url);
    curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status >= 400) throw_status(r, repo, file, rev, url, !token.empty());
    // A redirect that carries the file's facts (LFS -> CDN) is the answer; one without them
    // (a renamed repository) is followed.
    if (r.status >= 300 && r.status < 400 && r.get("x-repo-commit").empty()) {
      char* next = nullptr;
      curl_easy_getinfo(c.h, CURLINFO_REDIRECT_URL, &next);
      if (!next) throw HubError(HubError::Network, url + ": HTTP " + std::to_string(r.status) + " without a Location");
      url = next;
      continue;
    }
    Meta m;
    m.commit = r.get("x-repo-commit");
    m.etag = r.get("x-linked-etag").empty() ? r.get("etag") : r.get("x-linked-etag");
    if (m.etag.rfind("W/", 0) == 0) m.etag = m.etag.substr(2);
    m.etag.erase(std::remove(m.etag.begin(), m.etag.end(), '"'), m.etag.end());
    const std::string size =
        r.get("x-linked-size").empty() ? (r.status == 200 ? r.get("content-length") : "") : r.get("x-linked-size");
    if (!size.empty()) m.size = std::atoll(size.c_str());
    if (m.commit.empty())
      throw HubError(HubError::Network,
                     url + ": the server sent no X-Repo-Commit header (is HF_ENDPOINT a Hugging Face hub?)");
    // Both name directories in the cache: anything but the hub's forms could point outside it.
    if (!is_commit(m.commit))
      throw HubError(HubError::Network,
                     url + ": the server sent X-Repo-Commit '" + m.commit + "', not a commit id (40 hex digits)");
    if (m.etag.empty()) throw HubError(HubError::Network, url + ": the server sent no ETag for the file");
    if (!is_etag(m.etag))
      throw HubError(HubError::Network, url + ": the server sent ETag '" + m.etag +
                                            "', which cannot name a file (expected letters, digits, '-', '_', '.')");
    return m;
  }
  throw HubError(HubError::Network, url0 + ": too many redirects");
}

// --- the body -----------------------------------------------------------------------------

struct Transfer {
  std::FILE* out = nullptr;
  std::string path;  // the .incomplete file
  CURL* h = nullptr;
  Response* r = nullptr;
  uint64_t have = 0;  // bytes in the file
  bool started = false;
  bool restarted = false;  // the server ignored Range and sent everything
  bool too_long = false;   // the server sent more than the announced size (and was cut off)
  int64_t total = -1;      // the announced size (-1: none)
  Progress* bar = nullptr;
};

// Empties the .incomplete file (the server ignored our Range, or the file changed upstream).
void start_over(Transfer& t) {
  std::fflush(t.out);
  if (::ftruncate(::fileno(t.out), 0) != 0) throw HubError(HubError::Local, t.path + ": cannot truncate");
  t.have = 0;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->started) {
    t->started = true;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &t->r->status);
    if (t->r->status == 200 && t->have > 0) {  // the server ignored Range: take the whole body
      start_over(*t);
      t->restarted = true;
    }
  }
  if (t->r->status >= 300) {  // keep a little of an error body for the message
    if (t->r->body.size() < 4096) t->r->body.append(data, std::min<size_t>(bytes, 4096));
    return bytes;
  }
  if (t->total >= 0 && t->have + bytes > uint64_t(t->total)) {  // a hostile server could fill the disk
    t->too_long = true;
    return 0;  // aborts: CURLE_WRITE_ERROR
  }
  if (!t->out || std::fwrite(data, 1, bytes, t->out) != bytes) return 0;
  t->have += bytes;
  return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  t->bar->update(int64_t(t->have));
  return 0;
}

// Whether a failed attempt is worth resuming (the connection broke after it was made).
bool resumable(CURLcode rc) {
  return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
         rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_SEND_ERROR || rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM;
}

// GETs the body into t.out, resuming with Range after a dropped connection (up to o.retries times).
void transfer(const std::string& url, const FetchOptions& o, const std::string& token, Transfer& t, const Meta& m,
              const std::string& repo, const std::string& file) {
  for (int attempt = 0;; ++attempt) {
    if (m.size >= 0 && t.have == uint64_t(m.size)) break;         // an earlier run got everything
    if (m.size >= 0 && t.have > uint64_t(m.size)) start_over(t);  // stale leftovers
    CurlHandle c;
    Response r;
    t.h = c.h;
    t.r = &r;
    t.started = false;
    common_options(c, url, o, token, r);
    if (t.have > 0) c.header("Range: bytes=" + std::to_string(t.have) + "-");
    curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
    curl_easy_setopt(c.h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c.h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c.h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c.h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c.h, CURLOPT_XFERINFODATA, &t);
    const CURLcode rc = curl_easy_perform(c.h);
    std::fflush(t.out);
    curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &r.status);
    if (rc == CURLE_OK && r.status == 416 && t.have > 0 && attempt < o.retries) {  // past the end: the file changed
      start_over(t);
      continue;
    }
    if (rc == CURLE_OK && r.status >= 400) throw_status(r, repo, file, o.revision, url, !token.empty());
    if (rc == CURLE_OK) break;
    if (rc == CURLE_WRITE_ERROR && t.too_long)
      throw HubError(HubError::Checksum, file + ": the server sent more than the " + std::to_string(m.size) +
                                             " bytes it announced; the partial file was removed");
    if (rc == CURLE_WRITE_ERROR) throw HubError(HubError::Local, t.path + ": write failed (disk full?)");
    if (!resumable(rc) || attempt >= o.retries)
      throw HubError(HubError::Network, url + ": " + curl_easy_strerror(rc) + " after " + std::to_string(t.have) +
                                            (m.size >= 0 ? " of " + std::to_string(m.size) : "") +
                                            " bytes; run the same command again to resume");
  }
}

void download(const std::string& url, const FetchOptions& o, const std::string& token, const std::string& incomplete,
              const Meta& m, const std::string& repo, const std::string& file, FetchResult& res) {
  Transfer t;
  t.path = incomplete;
  Progress bar(fs::path(file).filename().string(), std::max<int64_t>(m.size, 0), Progress::Unit::Bytes, "", o.progress);
  t.bar = &bar;
  t.total = m.size;
  bar.starting_at(int64_t(t.have));
  t.out = std::fopen(incomplete.c_str(), "ab");
  if (!t.out) throw HubError(HubError::Local, incomplete + ": cannot write (" + std::strerror(errno) + ")");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(t.out, std::fclose);
  std::fseek(t.out, 0, SEEK_END);  // bytes of an earlier attempt are kept, and resumed from
  t.have = uint64_t(std::ftell(t.out));
  res.resumed = t.have > 0;
  try {
    transfer(url, o, token, t, m, repo, file);
    bar.update(int64_t(t.have));
    bar.finish();
  } catch (const HubError&) {
    // Bytes received are kept for the next run to resume from; an empty file is not.
    closer.reset();
    std::error_code ec;
    if (t.too_long || fs::file_size(incomplete, ec) == 0) fs::remove(incomplete, ec);
    throw;
  }

  if (t.restarted) res.resumed = false;
  closer.reset();
  // What counts is the file on disk, not the bytes this process saw go by.
  const uint64_t on_disk = fs::file_size(incomplete);
  if (m.size >= 0 && on_disk != uint64_t(m.size)) {
    fs::remove(incomplete);
    throw HubError(HubError::Checksum, file + ": received " + std::to_string(on_disk) + " bytes, the hub announced " +
                                           std::to_string(m.size) + "; the partial file was removed");
  }
  if (is_sha256(m.etag)) {
    const std::string got = sha256_file(incomplete);
    if (got != m.etag) {
      fs::remove(incomplete);
      throw HubError(HubError::Checksum,
                     file + ": sha256 mismatch: expected " + m.etag + ", got " + got + "; the file was not kept");
    }
    res.verified_sha256 = true;
  }
  res.bytes = on_disk;
}

// An exclusive lock on one blob for as long as it lives: a second `toy fetch` (or huggingface_hub,
// which locks the same file) of the same blob waits, then finds it in place.
class BlobLock {
 public:
  explicit BlobLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw HubError(HubError::Local, path.string() + ": cannot create the lock file (" + std::strerror(errno) + ")");
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        ::close(fd_);
        throw HubError(HubError::Local, path.string() + ": cannot lock (" + std::strerror(errno) + ")");
      }
  }
  ~BlobLock() { ::close(fd_); }  // closing releases the lock
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

// snapshots/<commit>/<file> -> relative link to blobs/<etag> (a copy where links are refused).
void link_snapshot(const fs::path& blob, const fs::path& pointer) {
  fs::create_directories(pointer.parent_path());
  const fs::path target = blob.lexically_relative(pointer.parent_path());
  const fs::path tmp = pointer.string() + ".tmp-link." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) fs::copy_file(blob, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, pointer);
}

}  // namespace

void check_revision(const std::string& revision) {
  if (!is_relative_path(revision))
    throw HubError(HubError::Local,
                   "'" + revision + "' is not a revision (a branch, tag or commit such as main, v1.0, refs/pr/1)");
}

void check_file_path(const std::string& file) {
  if (!is_relative_path(file)) throw HubError(HubError::Local, "'" + file + "' is not a file path inside a repository");
}

std::string repo_folder(const std::string& repo) {
  const bool ok = !repo.empty() && repo.size() < 200 && repo.front() != '/' && repo.back() != '/' &&
                  std::count(repo.begin(), repo.end(), '/') <= 1 && repo.find("..") == std::string::npos &&
                  repo.find("--") == std::string::npos && std::all_of(repo.begin(), repo.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
                  });
  if (!ok)
    throw HubError(
        HubError::Local,
        "'" + repo + "' is not a repository id (expected ORG/NAME, e.g. HuggingFaceTB/SmolLM2-135M-Instruct-GGUF)");
  std::string f = "models--" + repo;
  if (auto k = f.find('/'); k != std::string::npos) f.replace(k, 1, "--");
  return f;
}

namespace {

// The endpoint without a trailing '/' and the token, from the options or the environment.
std::pair<std::string, std::string> endpoint_and_token(const FetchOptions& o) {
  std::string endpoint = o.endpoint.empty() ? env("HF_ENDPOINT") : o.endpoint;
  if (endpoint.empty()) endpoint = "https://huggingface.co";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  std::string token = o.token.empty() ? env("HF_TOKEN") : o.token;
  if (token.empty()) token = env("HUGGING_FACE_HUB_TOKEN");
  static const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!curl_ready) throw HubError(HubError::Local, "libcurl could not be initialised");
  return {endpoint, token};
}

size_t on_listing(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > (16u << 20)) return 0;  // a listing is kilobytes; refuse to buffer more than 16 MiB
  body->append(data, size * n);
  return size * n;
}

}  // namespace

std::vector<std::string> list_files(const std::string& repo, const FetchOptions& o) {
  repo_folder(repo);
  check_revision(o.revision);
  const auto [endpoint, token] = endpoint_and_token(o);
  const std::string url = endpoint + "/api/models/" + repo + "/tree/" + quote(o.revision, false) + "?recursive=true";
  CurlHandle c;
  Response r;
  std::string body;
  common_options(c, url, o, token, r);
  curl_easy_setopt(c.h, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(c.h, CURLOPT_HTTPHEADER, c.headers);
  curl_easy_setopt(c.h, CURLOPT_WRITEFUNCTION, on_listing);
  curl_easy_setopt(c.h, CURLOPT_WRITEDATA, &body);
  if (CURLcode rc = curl_easy_perform(c.h); rc != CURLE_OK) throw transport_error(rc, url);
  curl_easy_getinfo(c.h, CURLINFO_RESPONSE_CODE, &r.status);
  if (r.status >= 400) {
    r.body = body.substr(0, 300);
    throw_status(r, repo, "the file list", o.revision, url, !token.empty());
  }
  std::vector<std::string> files;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) throw HubError(HubError::Network, url + ": the answer is not a JSON list of files");
  for (const auto& e : j)
    if (e.is_object() && e.value("type", "") == "file" && e.contains("path") && e["path"].is_string())
      files.push_back(e["path"].get<std::string>());
  return files;
}

FetchResult fetch(const std::string& repo, const std::string& file, const FetchOptions& o) {
  const fs::path storage = fs::path(o.cache_dir.empty() ? hf_hub_cache() : o.cache_dir) / repo_folder(repo);
  check_file_path(file);
  check_revision(o.revision);
  const auto [endpoint, token] = endpoint_and_token(o);
  const std::string url = endpoint + "/" + repo + "/resolve/" + quote(o.revision, false) + "/" + quote(file, true);

  Meta m;
  try {
    m = head(url, o, token, repo, file, o.revision);
  } catch (const HubError& e) {
    // Offline, but this revision was fetched before: use the cached copy, as huggingface_hub does.
    std::ifstream ref(storage / "refs" / o.revision);
    std::string commit;
    if (e.kind == HubError::Network && ref >> commit && is_commit(commit)) {
      const fs::path pointer = storage / "snapshots" / commit / file;
      if (fs::exists(pointer)) {
        FetchResult r;
        r.path = pointer.string();
        r.blob = fs::canonical(pointer).string();
        r.commit = commit;
        r.bytes = fs::file_size(pointer);
        r.already_cached = true;
        return r;
      }
    }
    throw;
  }

  FetchResult res;
  res.commit = m.commit;
  res.etag = m.etag;
  const fs::path blob = storage / "blobs" / m.etag;
  const fs::path pointer = storage / "snapshots" / m.commit / file;
  res.blob = blob.string();
  res.path = pointer.string();
  // Without either, a body cut short (a chunked response that ends early) would pass as complete.
  std::error_code ec;
  if (m.size < 0 && !is_sha256(m.etag) && !fs::exists(blob, ec))
    throw HubError(HubError::Checksum, url + ": the server announced neither the size nor the sha256 of " + file +
                                           ", so a download could not be verified; nothing was downloaded");
  fs::create_directories(blob.parent_path());

  // huggingface_hub's lock for this blob: <cache>/.locks/<repo folder>/<etag>.lock.
  const BlobLock lock(storage.parent_path() / ".locks" / storage.filename() / (m.etag + ".lock"));
  if (fs::is_regular_file(blob, ec) && (m.size < 0 || fs::file_size(blob) == uint64_t(m.size))) {
    res.already_cached = true;
    res.bytes = fs::file_size(blob);
  } else {
    const std::string incomplete = blob.string() + ".incomplete";
    download(url, o, token, incomplete, m, repo, file, res);
    fs::rename(incomplete, blob);
  }
  link_snapshot(blob, pointer);
  if (o.revision != m.commit) {
    fs::create_directories(storage / "refs" / fs::path(o.revision).parent_path());
    write_output_file((storage / "refs" / o.revision).string(), m.commit);
  }
  return res;
}

}  // namespace toy::hub
