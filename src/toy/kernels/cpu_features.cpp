// kernels/cpu_features.cpp — run-time SIMD detection and the TOY_SIMD and TOY_FLOAT_TILE overrides.
#include "toy/kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace toy::kernels {
namespace {

Simd best_simd() {
  if (cpu_has_avx512vnni()) return Simd::avx512vnni;
  return cpu_has_avx2() ? Simd::avx2 : Simd::scalar;
}

Simd initial_simd() {
  const char* env = std::getenv("TOY_SIMD");
  if (env && std::strcmp(env, "scalar") == 0) return Simd::scalar;
  if (env && std::strcmp(env, "avx2") == 0 && cpu_has_avx2()) return Simd::avx2;
  return best_simd();
}

std::atomic<Simd>& active() {
  static std::atomic<Simd> s{initial_simd()};
  return s;
}

FloatTile initial_float_tile() {
  const char* env = std::getenv("TOY_FLOAT_TILE");
  if (env && std::strcmp(env, "avx2") == 0) return FloatTile::avx2;
  if (env && std::strcmp(env, "avx512") == 0) return FloatTile::avx512;
  return FloatTile::calibrate;
}

std::atomic<FloatTile>& active_float_tile() {
  static std::atomic<FloatTile> t{initial_float_tile()};
  return t;
}

#if defined(__x86_64__) || defined(__i386__)
// A CPU may have AVX-512 while the OS does not save its state on a context switch: XCR0 must
// enable the SSE and AVX state (bits 1, 2), the opmask registers (5), the upper halves of
// zmm0-15 (6) and zmm16-31 (7). (xgetbv as inline assembly: the _xgetbv intrinsic needs the
// xsave target.)
bool os_saves_avx512_state() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return false;
  uint32_t xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr uint32_t kNeeded = 0b1110'0110;
  return (xcr0_lo & kNeeded) == kNeeded;
}
#endif

}  // namespace

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  // F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know "f16c").
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && [] {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;  // leaf 7, sub-leaf 0: the extended features
    if (!cpu_has_avx2() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool features = (ebx & bit_AVX512F) && (ebx & bit_AVX512BW) && (ebx & bit_AVX512VL) && (ecx & bit_AVX512VNNI);
    return features && os_saves_avx512_state();
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned eax, ebx, ecx, edx;  // leaf 7, sub-leaf 1: EAX bit 5 is AVX512_BF16
    return cpu_has_avx512vnni() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
  }();
  return has;
#else
  return false;
#endif
}

Simd simd() { return active().load(std::memory_order_relaxed); }

void set_simd(Simd s) {
  if (s == Simd::avx2 && !cpu_has_avx2()) throw std::invalid_argument("set_simd: this CPU lacks AVX2/FMA/F16C");
  if (s == Simd::avx512vnni && !cpu_has_avx512vnni())
    throw std::invalid_argument("set_simd: this CPU (or OS) lacks AVX512F/BW/VL/VNNI");
  active().store(s, std::memory_order_relaxed);
}

FloatTile float_tile() { return active_float_tile().load(std::memory_order_relaxed); }

void set_float_tile(FloatTile t) { active_float_tile().store(t, std::memory_order_relaxed); }

std::string simd_level() {
  switch (simd()) {
    case Simd::avx512vnni:
      return "avx512vnni+avx2+fma+f16c";
    case Simd::avx2:
      return "avx2+fma+f16c";
    default:
      return "scalar";
  }
}

std::string cpu_simd_features() {
  std::string s;
  if (cpu_has_avx2()) s += "avx2 fma f16c";
  if (cpu_has_avx512vnni()) s += " avx512f avx512bw avx512vl avx512vnni";
  if (cpu_has_avx512bf16()) s += " avx512bf16";
  return s;
}

}  // namespace toy::kernels
