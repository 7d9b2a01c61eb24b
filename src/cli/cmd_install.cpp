// cli/cmd_install.cpp — `toy install [--prefix P]`: install the library for other projects, then
// report what this machine offers and run a short self-test against hand-derived numbers.
//
// Installing is `cmake --install <the build tree this binary came from> --prefix P` (the rules are
// in cmake/install.cmake): bin/toy, lib/libtoy_*.a, include/toy/**.h and lib/cmake/toy, so that a
// project created by `toy new` finds the library with find_package(toy).
#include <curl/curl.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/cli.h"
#include "cli/new_templates.h"
#include "toy/hub/hub.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/primitives/primitives.h"

namespace toy::cli {
namespace {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command, returning its exit status and combined output.
std::pair<int, std::string> capture(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "cannot run: " + cmd};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

void install(const std::string& prefix) {
  const fs::path build = TOY_BINARY_DIR;
  if (!fs::exists(build / "cmake_install.cmake"))
    throw std::runtime_error("this toy binary's build tree " + build.string() +
                             " is gone; install from a build directory with: cmake --install BUILD --prefix " + prefix);
  std::cout << "installing into " << prefix << " (cmake --install " << build.string() << ")\n";
  const auto [code, out] =
      capture("cmake --install " + shell_quote(build.string()) + " --prefix " + shell_quote(prefix));
  if (code != 0) {
    std::cerr << out;
    throw std::runtime_error("cmake --install failed (exit " + std::to_string(code) + ")" +
                             (code == 127 ? ": is cmake on PATH?" : ""));
  }
  size_t files = 0;
  for (size_t at = 0; (at = out.find("-- ", at)) != std::string::npos; at += 3) ++files;
  for (const char* must : {"bin/toy", "lib/cmake/toy/toyConfig.cmake", "include/toy/tensor/tensor.h"})
    if (!fs::exists(fs::path(prefix) / must))
      throw std::runtime_error("install incomplete: " + (fs::path(prefix) / must).string() + " is missing");
  std::cout << "  ok    " << files
            << " files: bin/toy, lib/libtoy_*.a, include/toy/, lib/cmake/toy/ (find_package(toy) -> toy::toy)\n"
            << "        projects: toy new NAME, then cmake -S NAME -B NAME/build -DCMAKE_PREFIX_PATH=" << prefix
            << "\n";
}

// --- self-test: small computations whose results were worked out by hand ---------------------

struct Result {
  std::string name;
  bool ok;
  std::string detail;
};

bool close(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * std::max(1.0f, std::fabs(want[i])))) return false;
  return true;
}

std::string show(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size() && i < 6; ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.7g", i ? ", " : "", v[i]);
    s += b;
  }
  return s + (v.size() > 6 ? ", …]" : "]");
}

Result check(const std::string& name, const std::vector<float>& got, const std::vector<float>& want) {
  const bool ok = close(got, want);
  return {name, ok, ok ? show(got) : "got " + show(got) + ", want " + show(want)};
}

// A matmul large enough for the SIMD kernels: integer-valued inputs, so the exact product is
// representable and every path (scalar, AVX2, any thread count) must give it bit for bit.
Result matmul_paths() {
  const int64_t M = 33, N = 70, K = 96;
  std::vector<float> x(size_t(M * K)), w(size_t(N * K)), want(size_t(M * N));
  for (int64_t i = 0; i < M * K; ++i) x[size_t(i)] = float((i * 7) % 11 - 5);
  for (int64_t i = 0; i < N * K; ++i) w[size_t(i)] = float((i * 5) % 9 - 4);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(m * K + k)]) * w[size_t(n * K + k)];
      want[size_t(m * N + n)] = float(s);
    }
  const Tensor X = Tensor::from({M, K}, x), W = Tensor::from({N, K}, w);
  const int threads = kernels::num_threads();
  std::vector<std::string> paths;
  bool ok = true;
  for (int t : {1, threads}) {
    kernels::set_num_threads(t);
    ok &= linear(X, W).to_vector() == want;
    paths.push_back(std::to_string(t) + " thread" + (t > 1 ? "s" : ""));
  }
  if (kernels::cpu_has_avx2()) {
    const kernels::Simd before = kernels::simd();
    kernels::set_simd(kernels::Simd::scalar);
    ok &= linear(X, W).to_vector() == want;
    kernels::set_simd(before);
    paths.push_back("scalar");
  }
  kernels::set_num_threads(threads);
  std::string detail = "[33, 96] x [70, 96]^T exact on ";
  for (size_t i = 0; i < paths.size(); ++i) detail += (i ? ", " : "") + paths[i];
  return {"matmul (every kernel path)", ok, detail};
}

std::vector<Result> self_test() {
  std::vector<Result> r;
  auto guarded = [&](const std::string& name, const std::function<Result()>& f) {
    try {
      r.push_back(f());
    } catch (const std::exception& e) {
      r.push_back({name, false, e.what()});
    }
  };
  guarded("linear", [] {  // [[1,2],[3,4]]·[[5,6],[7,8]]ᵀ = [[1·5+2·6, 1·7+2·8], [3·5+4·6, 3·7+4·8]]
    return check("linear",
                 linear(Tensor::from({2, 2}, std::vector<float>{1, 2, 3, 4}),
                        Tensor::from({2, 2}, std::vector<float>{5, 6, 7, 8}))
                     .to_vector(),
                 {17, 23, 39, 53});
  });
  guarded("rms_norm", [] {  // [3, 4] / √((9 + 16)/2) = [3, 4] / √12.5
    return check("rms_norm",
                 rms_norm(Tensor::from({1, 2}, std::vector<float>{3, 4}), Tensor::full({2}, 1.0f), 0.0f).to_vector(),
                 {0.84852814f, 1.1313708f});
  });
  guarded("silu", [] {  // 1·σ(1) = 1/(1 + e⁻¹)
    return check("silu", silu(Tensor::from({1}, std::vector<float>{1})).to_vector(), {0.7310586f});
  });
  guarded("cross_entropy", [] {  // logits [0, ln 3]: p = [1/4, 3/4]; −ln(3/4)
    const std::vector<int32_t> target = {1};
    return check(
        "cross_entropy",
        {cross_entropy(Tensor::from({1, 2}, std::vector<float>{0, std::log(3.0f)}), Tensor::from_ids({1}, target))
             .item()},
        {0.28768207f});
  });
  guarded("autograd", [] {  // d/dx Σ x² = 2x
    Tensor x = Tensor::from({3}, std::vector<float>{1, 2, 3});
    x.requires_grad_();
    sum(x * x).backward();
    return check("autograd", x.grad().to_vector(), {2, 4, 6});
  });
  guarded("matmul (every kernel path)", matmul_paths);
  guarded("sha256", [] {  // FIPS 180-4, appendix B.1
    const std::string got = hub::sha256_hex("abc");
    const std::string want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    return Result{"sha256", got == want, got == want ? "\"abc\"" : got};
  });
  return r;
}

int run(const Args& a) {
  const std::string prefix = a.has("prefix") ? a.str("prefix") : default_install_prefix();
  if (!a.flag("check")) install(prefix);

  std::cout << "\nmachine:\n"
            << "  cpu       " << kernels::simd_level()
            << (kernels::cpu_has_avx2() ? "" : " (no AVX2: the portable kernels)") << "\n"
            << "  threads   " << kernels::num_threads() << " used, " << std::thread::hardware_concurrency()
            << " hardware\n"
            << "  backends  cpu (CUDA is not compiled in)\n"
            << "  network   " << curl_version() << "\n"
            << "  toy       " << TOY_VERSION << ", compiler " << __VERSION__ << "\n";

  std::cout << "\nself-test:\n";
  int failed = 0;
  for (const Result& r : self_test()) {
    std::printf("  %-5s %-28s %s\n", r.ok ? "ok" : "FAIL", r.name.c_str(), r.detail.c_str());
    failed += !r.ok;
  }
  std::fflush(stdout);
  if (failed) {
    std::cerr << "toy install: " << failed << " self-test check" << (failed > 1 ? "s" : "") << " failed\n";
    return kFailure;
  }
  std::cout << "\nall checks passed\n";
  return kOk;
}

Registrar reg({
    .name = "install",
    .summary = "install the toy library and CMake package, check the machine, run a self-test",
    .positionals = {},
    .flags = {{"prefix", FlagType::Path, "~/.local",
               "install under this directory (bin/, lib/, include/toy/, lib/cmake/toy/)"},
              {"check", FlagType::Bool, "", "only check the machine and run the self-test; install nothing"}},
    .run = run,
    .details =
        "Installs from the build tree this binary was built in (cmake --install BUILD --prefix P; needs cmake).\n"
        "Projects then find the library with find_package(toy) and -DCMAKE_PREFIX_PATH=P.\n"
        "exit codes: 1 when installing fails or a self-test check fails.\n"
        "examples:\n  toy install --prefix ~/.local\n  toy install --check",
});

}  // namespace
}  // namespace toy::cli
