// hub/hub.h — where GGUF models live on this machine, and how to fetch one from the Hugging Face hub.
//
// Discovery (`toy list`) reads the layouts other tools write, without changing them:
//   Hugging Face cache  $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
//                       else ~/.cache/huggingface/hub:
//                       models--org--name/{blobs/<etag>, snapshots/<commit>/<file> -> ../../blobs/<etag>,
//                       refs/<revision> = <commit>}
//   Ollama              $OLLAMA_MODELS, else ~/.ollama/models: manifests/<registry>/<ns>/<name>/<tag>
//                       (JSON; the layer with mediaType application/vnd.ollama.image.model names the
//                       GGUF by digest "sha256:<hex>", stored as blobs/sha256-<hex>)
//   LM Studio           ~/.lmstudio/models, ~/.cache/lm-studio/models (publisher/repo/*.gguf)
//   local               ./models, ./data
// Files that cannot be read or are not GGUF become notes, never errors.
//
// Download (`toy fetch`) writes the same Hugging Face cache layout, so `toy list` (and
// huggingface_hub, llama.cpp -hf, ...) find what toy fetched. Not here: uploads, the hub's
// JSON API beyond a repository's file list (search, model cards), xet storage.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace toy::hub {

// ---------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), incremental: the hub names LFS blobs by the sha256 of their bytes.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex();  // finishes; lower-case, 64 characters
 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};
std::string sha256_hex(std::string_view bytes);
std::string sha256_file(const std::string& path);  // throws std::runtime_error when unreadable

// ---------------------------------------------------------------------------------------
// Discovery.

struct Location {
  std::string source;  // "hf", "ollama", "lmstudio", "local"
  std::string dir;     // the directory scanned
};
// Every place looked at, in order, whether or not it exists (reads the environment).
std::vector<Location> search_locations();
std::string hf_hub_cache();  // the Hugging Face cache directory (reads the environment)

struct FoundModel {
  std::string source;        // "hf", "ollama", "lmstudio", "local"
  std::string name;          // "org/name/file.gguf", "llama3.2:1b", "publisher/repo/file.gguf"
  std::string path;          // the path a user would pass to toy (snapshot link, blob, file)
  std::string architecture;  // general.architecture, "" when absent
  uint64_t parameters = 0;   // sum of tensor elements
  std::string dtype;         // "Q4_K_M" from general.file_type, else the dominant tensor type
  uint64_t bytes = 0;        // file size
};
struct Skipped {
  std::string path;
  std::string reason;  // "broken symlink", "not a GGUF file: …", "corrupt manifest: …"
};
struct Scan {
  std::vector<FoundModel> models;
  std::vector<Skipped> skipped;
};
// Scans `locations` (default: search_locations()); a file reached twice (two snapshots, a
// symlink) is listed once.
Scan scan(const std::vector<Location>& locations);
Scan scan();

// Reads one GGUF's summary; throws (gguf::GgufError, std::runtime_error) when it cannot.
FoundModel describe_file(const std::string& path);

// ---------------------------------------------------------------------------------------
// Download.

// Failures, by what the user can do about them.
struct HubError : std::runtime_error {
  enum Kind { Network, NotFound, Unauthorized, Checksum, Local };
  Kind kind;
  HubError(Kind k, const std::string& what) : std::runtime_error(what), kind(k) {}
};

struct FetchOptions {
  std::string endpoint;   // "" -> $HF_ENDPOINT, else https://huggingface.co
  std::string token;      // "" -> $HF_TOKEN (sent as "Authorization: Bearer …")
  std::string cache_dir;  // "" -> hf_hub_cache()
  std::string revision = "main";
  int retries = 3;        // resumed attempts after a dropped connection
  bool progress = false;  // draw a progress bar on stderr
  long connect_timeout_s = 10;
};

struct FetchResult {
  std::string path;  // snapshots/<commit>/<file>: the path to use
  std::string blob;  // blobs/<etag>
  std::string commit;
  std::string etag;
  uint64_t bytes = 0;
  bool already_cached = false;
  bool resumed = false;  // some bytes came from an earlier, interrupted download
  bool verified_sha256 = false;
};

// Downloads {endpoint}/{repo}/resolve/{revision}/{file} into the cache: metadata from a HEAD
// request (X-Repo-Commit, X-Linked-Etag/ETag, X-Linked-Size/Content-Length), the body into
// blobs/<etag>.incomplete (resumed with a Range request when it exists), size and sha256 checked
// against what the hub reported, then renamed into place and linked from snapshots/. Throws HubError.
FetchResult fetch(const std::string& repo, const std::string& file, const FetchOptions& o);

// The files of a repository at o.revision (paths relative to its root), from the hub's API:
// GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true. Throws HubError.
std::vector<std::string> list_files(const std::string& repo, const FetchOptions& o);

// "org/name" -> "models--org--name" (throws HubError(Local) for a malformed repo id).
std::string repo_folder(const std::string& repo);

// Every name that becomes part of a path in the cache is checked before it is joined, whether it
// comes from the command line or from the server: a revision ("main", "v1.0", "refs/pr/1") and a
// file ("model.gguf", "dir/model.gguf") are relative paths of plain components (no "", ".", "..",
// control characters or backslashes); the server's commit is 40 hex digits and its ETag one
// component of [A-Za-z0-9._-]. These throw HubError(Local) naming the value.
void check_revision(const std::string& revision);
void check_file_path(const std::string& file);

}  // namespace toy::hub
