// cli/cmd_fetch.cpp — `toy fetch REPO FILE`: download one file from the Hugging Face hub into its cache.
#include <iostream>

#include "cli/cli.h"
#include "cli/common.h"
#include "toy/hub/hub.h"

namespace toy::cli {
namespace {

int run(const Args& a) {
  // REPO may carry a quantization, as llama.cpp's -hf: org/repo:Q4_K_M picks the file.
  std::string repo = *a.positional(0), quant;
  if (repo.rfind("hf:", 0) == 0) repo = repo.substr(3);
  if (const size_t colon = repo.find(':'); colon != std::string::npos) {
    quant = repo.substr(colon + 1);
    repo = repo.substr(0, colon);
  }
  if (a.positional(1) && !quant.empty()) throw UsageError("give FILE or REPO:QUANT, not both");
  hub::FetchOptions o;
  o.revision = a.str("revision");
  o.cache_dir = a.str("cache-dir");
  o.retries = int(a.integer("retries"));
  if (o.retries < 0 || o.retries > 100) throw UsageError("--retries must be between 0 and 100");
  o.progress = !a.flag("quiet");
  try {  // malformed names are usage errors, before any network traffic
    hub::repo_folder(repo);
    if (a.positional(1)) hub::check_file_path(*a.positional(1));
    hub::check_revision(o.revision);
  } catch (const hub::HubError& e) {
    throw UsageError(e.what());
  }
  const std::string file = a.positional(1) ? *a.positional(1) : hub_file(*a.positional(0), repo, quant, o);
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
    .positionals = {{"REPO", "repository id, e.g. HuggingFaceTB/SmolLM2-135M-Instruct-GGUF, or REPO:QUANT"},
                    {"FILE", "file in the repository (default: the GGUF file REPO:QUANT selects, or the only one)",
                     false}},
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
        "Without FILE, the repository's file list picks the GGUF file of quantization QUANT (Q4_K_M, q8_0, ...;\n"
        "the only GGUF file when there is one), as llama.cpp's -hf does. The progress goes to stderr: a bar\n"
        "on a terminal, a line every 10% elsewhere.\n"
        "examples:\n  toy fetch bartowski/SmolLM2-135M-Instruct-GGUF SmolLM2-135M-Instruct-Q8_0.gguf\n"
        "  toy fetch bartowski/SmolLM2-135M-Instruct-GGUF:Q8_0",
});

}  // namespace
}  // namespace toy::cli
