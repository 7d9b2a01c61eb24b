// hub/hub_scan.cpp — finding GGUF files in the Hugging Face cache, Ollama, LM Studio and ./models.
//
// Every directory walk tolerates what real caches contain: symlinks into blobs/, broken links
// left by an interrupted download, unreadable files, stray non-GGUF files and corrupt JSON. Such
// entries become `Skipped` notes; only the caller decides whether to print them.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "toy/hub/hub.h"
#include "toy/io/file_type.h"
#include "toy/io/gguf.h"

namespace toy::hub {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

fs::path home() { return fs::path(env("HOME")); }

bool ends_with_gguf(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".gguf";
}

// Files under `dir` (following directory symlinks is off: caches link files, not folders),
// at most `max_depth` levels down, hidden folders skipped. Iteration errors end that branch.
std::vector<fs::path> walk(const fs::path& dir, int max_depth) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code e2;
    if (it->is_directory(e2) && !it->is_symlink(e2)) {
      if (it.depth() + 1 >= max_depth || p.filename().string().rfind('.', 0) == 0) it.disable_recursion_pending();
      continue;
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Why a path cannot be listed, or "" when it looks like a readable GGUF file.
std::string problem_with(const fs::path& p) {
  std::error_code ec;
  const auto link = fs::symlink_status(p, ec);
  if (ec) return "cannot stat: " + ec.message();
  if (fs::is_symlink(link) && !fs::exists(p, ec)) return "broken symlink";
  if (!fs::is_regular_file(p, ec)) return "not a regular file";
  std::ifstream in(p, std::ios::binary);
  if (!in) return "unreadable (permission denied?)";
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() < 4 || std::memcmp(magic, "GGUF", 4) != 0) return "not a GGUF file";
  return "";
}

// Records `p` once (by its resolved path) as a model or as a skipped note.
struct Collector {
  Scan scan;
  std::set<std::string> seen;

  void add(const std::string& source, const std::string& name, const fs::path& p) {
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(p, ec);
    const std::string key = ec ? p.string() : real.string();
    if (!seen.insert(key).second) return;
    if (std::string why = problem_with(p); !why.empty()) {
      scan.skipped.push_back({p.string(), why});
      return;
    }
    try {
      FoundModel m = describe_file(p.string());
      m.source = source;
      m.name = name;
      scan.models.push_back(std::move(m));
    } catch (const std::exception& e) {
      scan.skipped.push_back({p.string(), e.what()});
    }
  }
};

// models--org--name/snapshots/<commit>/<file…>
void scan_hf(const fs::path& cache, Collector& c) {
  std::error_code ec;
  if (!fs::is_directory(cache, ec)) return;
  std::vector<fs::path> repos;
  for (fs::directory_iterator it(cache, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec))
    if (it->path().filename().string().rfind("models--", 0) == 0) repos.push_back(it->path());
  std::sort(repos.begin(), repos.end());
  for (const fs::path& repo : repos) {
    std::string id = repo.filename().string().substr(8);
    for (size_t k; (k = id.find("--")) != std::string::npos;) id.replace(k, 2, "/");
    const fs::path snaps = repo / "snapshots";
    for (const fs::path& f : walk(snaps, 8)) {
      if (!ends_with_gguf(f)) continue;
      const fs::path rel = f.lexically_relative(snaps);  // <commit>/<file…>
      const fs::path file = rel.lexically_relative(*rel.begin());
      c.add("hf", id + "/" + file.generic_string(), f);
    }
  }
}

// manifests/<registry>/<namespace>/<name>/<tag> -> blobs/sha256-<hex>
void scan_ollama(const fs::path& root, Collector& c) {
  const fs::path manifests = root / "manifests";
  for (const fs::path& m : walk(manifests, 6)) {
    const std::vector<std::string> parts = [&] {
      std::vector<std::string> v;
      for (const auto& part : m.lexically_relative(manifests)) v.push_back(part.string());
      return v;
    }();
    std::string name;
    if (parts.size() == 4 && parts[0] == "registry.ollama.ai" && parts[1] == "library")
      name = parts[2] + ":" + parts[3];
    else if (parts.size() == 4 && parts[0] == "registry.ollama.ai")
      name = parts[1] + "/" + parts[2] + ":" + parts[3];
    else if (parts.size() >= 2) {
      for (size_t i = 0; i + 1 < parts.size(); ++i) name += (i ? "/" : "") + parts[i];
      name += ":" + parts.back();
    } else {
      name = m.filename().string();
    }
    std::string digest;
    try {
      std::ifstream in(m, std::ios::binary);
      if (!in) throw std::runtime_error("unreadable");
      const auto j = nlohmann::json::parse(in);
      for (const auto& layer : j.at("layers"))
        if (layer.at("mediaType").get<std::string>() == "application/vnd.ollama.image.model")
          digest = layer.at("digest").get<std::string>();
      if (digest.empty()) continue;  // an adapter, projector-only or other non-model manifest
      if (digest.rfind("sha256:", 0) != 0 || digest.size() != 71)
        throw std::runtime_error("bad digest '" + digest + "'");
    } catch (const std::exception& e) {
      c.scan.skipped.push_back({m.string(), std::string("corrupt manifest: ") + e.what()});
      continue;
    }
    const fs::path blob = root / "blobs" / ("sha256-" + digest.substr(7));
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(blob, ec))) {
      c.scan.skipped.push_back({m.string(), "manifest names a missing blob " + blob.string()});
      continue;
    }
    c.add("ollama", name, blob);
  }
}

void scan_tree(const std::string& source, const fs::path& root, int depth, Collector& c) {
  for (const fs::path& f : walk(root, depth))
    if (ends_with_gguf(f)) c.add(source, f.lexically_relative(root).generic_string(), f);
}

}  // namespace

std::string hf_hub_cache() {
  if (auto v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (auto v = env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return v;  // the older name
  if (auto v = env("HF_HOME"); !v.empty()) return (fs::path(v) / "hub").string();
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return (fs::path(v) / "huggingface" / "hub").string();
  return (home() / ".cache" / "huggingface" / "hub").string();
}

std::vector<Location> search_locations() {
  std::vector<Location> l;
  l.push_back({"hf", hf_hub_cache()});
  const std::string ollama = env("OLLAMA_MODELS");
  l.push_back({"ollama", ollama.empty() ? (home() / ".ollama" / "models").string() : ollama});
  l.push_back({"lmstudio", (home() / ".lmstudio" / "models").string()});
  l.push_back({"lmstudio", (home() / ".cache" / "lm-studio" / "models").string()});
  l.push_back({"local", "models"});
  l.push_back({"local", "data"});
  return l;
}

Scan scan(const std::vector<Location>& locations) {
  Collector c;
  for (const Location& loc : locations) {
    if (loc.source == "hf")
      scan_hf(loc.dir, c);
    else if (loc.source == "ollama")
      scan_ollama(loc.dir, c);
    else if (loc.source == "lmstudio")
      scan_tree(loc.source, loc.dir, 6, c);
    else
      scan_tree(loc.source, loc.dir, 4, c);
  }
  return std::move(c.scan);
}

Scan scan() { return scan(search_locations()); }

FoundModel describe_file(const std::string& path) {
  auto f = gguf::GgufFile::open(path);
  FoundModel m;
  m.path = path;
  m.architecture = f->architecture();
  m.bytes = f->file_size();
  std::map<std::string, uint64_t> bytes_by_type;  // of matrices: vectors stay F32 in every file
  for (const auto& t : f->tensors()) {
    m.parameters += uint64_t(numel(t.shape));
    if (t.shape.size() >= 2) bytes_by_type[std::string(name(t.dtype))] += t.nbytes;
  }
  if (auto ft = f->opt_int("general.file_type")) m.dtype = gguf::file_type_name(*ft);
  if (m.dtype.empty() && !bytes_by_type.empty())
    m.dtype = std::max_element(bytes_by_type.begin(), bytes_by_type.end(), [](const auto& a, const auto& b) {
                return a.second < b.second;
              })->first;
  return m;
}

}  // namespace toy::hub
