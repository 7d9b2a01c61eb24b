// kernels/cpu_features.cpp — run-time SIMD detection and the TOY_SIMD override.
#include "toy/kernels/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace toy::kernels {
namespace {

Simd initial_simd() {
  const char* env = std::getenv("TOY_SIMD");
  if (env && std::strcmp(env, "scalar") == 0) return Simd::scalar;
  return cpu_has_avx2() ? Simd::avx2 : Simd::scalar;
}

std::atomic<Simd>& active() {
  static std::atomic<Simd> s{initial_simd()};
  return s;
}

}  // namespace

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

Simd simd() { return active().load(std::memory_order_relaxed); }

void set_simd(Simd s) {
  if (s == Simd::avx2 && !cpu_has_avx2()) throw std::invalid_argument("set_simd: this CPU lacks AVX2/FMA/F16C");
  active().store(s, std::memory_order_relaxed);
}

std::string simd_level() { return simd() == Simd::avx2 ? "avx2+fma+f16c" : "scalar"; }

}  // namespace toy::kernels
