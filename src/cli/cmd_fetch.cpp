// cli/cmd_fetch.cpp — `toy fetch REPO FILE`: download one file from the Hugging Face hub into its cache.
#include <unistd.h>

#include <iostream>

#include "cli/cli.h"
#include "toy/hub/hub.h"

namespace toy::cli {
namespace {

int run(const Args& a) {
  const std::string repo = *a.positional(0), file = *a.positional(1);
  hub::FetchOptions o;
  o.revision = a.str("revision");
  o.cache_dir = a.str("cache-dir");
  o.retries = int(a.integer("retries"));
  if (o.retries < 0 || o.retries > 100) throw UsageError("--retries must be between 0 and 100");
  o.progress = !a.flag("quiet") && ::isatty(2);
  try {  // malformed names are usage errors, before any network traffic
    hub::repo_folder(repo);
    hub::check_file_path(file);
    hub::check_revision(o.revision);
  } catch (const hub::HubError& e) {
    throw UsageError(e.what());
  }
  hub::FetchResult r;
  try {
    r = hub::fetch(repo, file, o);
  } catch (const hub::HubError& e) {
    switch (e.kind) {
      case hub::HubError::Local:
        throw std::runtime_error(e.what());
      case hub::HubError::NotFound:
        throw NetworkError(std::string("not found: ") + e.what());
      default:
        throw NetworkError(e.what());
    }
  }
  if (!a.flag("quiet")) {
    std::cerr << (r.already_cached ? "cached   " : "fetched  ") << repo << "/" << file << " @ "
              << r.commit.substr(0, 12) << ", " << r.bytes << " bytes" << (r.verified_sha256 ? ", sha256 verified" : "")
              << (r.resumed ? ", resumed" : "") << "\n";
  }
  std::cout << r.path << "\n";
  return kOk;
}

Registrar reg({
    .name = "fetch",
    .summary = "download a file from the Hugging Face hub into the local cache (resumable, checksummed)",
    .positionals = {{"REPO", "repository id, e.g. HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"},
                    {"FILE", "file in the repository, e.g. smollm2-135m-instruct-q8_0.gguf"}},
    .flags = {{"revision", FlagType::String, "main", "branch, tag or commit to download from"},
              {"cache-dir", FlagType::Path, "",
               "cache directory (default: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)"},
              {"retries", FlagType::Int, "3", "times to resume after a dropped connection"},
              {"quiet", FlagType::Bool, "", "no progress bar and no summary line on stderr", 'q'}},
    .run = run,
    .details =
        "Prints the path of the downloaded file (a snapshot link into the cache) on stdout.\n"
        "Environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (for gated or private repositories).\n"
        "An interrupted download resumes where it stopped when the same command runs again.\n"
        "exit codes: 4 for network failures, 'not found' (404), 'not authorized' (401/403) and checksum mismatches.\n"
        "example: toy fetch bartowski/SmolLM2-135M-Instruct-GGUF SmolLM2-135M-Instruct-Q8_0.gguf",
});

}  // namespace
}  // namespace toy::cli
