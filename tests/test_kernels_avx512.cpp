// tests/test_kernels_avx512.cpp — the 512-bit F32/F16/BF16 prompt tiles (kernels/matmul_avx512.cpp)
// give the AVX2 kernel's bits: natively on a CPU with AVX-512, and everywhere (with AVX2) on the
// same source compiled against SIMDe's portable AVX-512 (tests/avx512_emulated.cpp); and so do the
// VNNI quantized tiles (kernels/matmul_vnni.cpp, emulated by tests/vnni_emulated.cpp), which
// KernelMatmul.VnniPathIsBitIdenticalToAvx2 checks natively.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "helpers.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/internal.h"
#include "toy/kernels/kernels.h"
#include "toy/tensor/quant.h"

using namespace toy;
using namespace toy::kernels;

#if defined(TOY_HAVE_SIMDE)
namespace toy::kernels::detail::emulated {  // tests/avx512_emulated.cpp
NamedKernel avx512_float_column_kernel(DType wt);
void pack_row_pairs(const Act& a, float* out, int64_t p0, int64_t p1);
NamedKernel vnni_column_kernel(DType wt);  // tests/vnni_emulated.cpp
}  // namespace toy::kernels::detail::emulated
#endif

namespace {

// Restores the SIMD path and the float tile a test changes.
struct TileState {
  Simd path = simd();
  FloatTile tile = float_tile();
  ~TileState() {
    set_simd(path);
    set_float_tile(tile);
  }
};

// x [M, K] rounded to the weights' precision (as matmul_wt does) and W [N, K] of type t.
struct RandomProduct {
  std::vector<float> x;
  std::vector<uint8_t> w;
  RandomProduct(DType t, int64_t M, int64_t N, int64_t K, uint32_t seed) : x(test::randn(size_t(M * K), seed)) {
    const std::vector<float> wf = test::randn(size_t(N * K), seed + 1);
    w.resize(size_t(N * row_bytes(t, K)));
    quantize(t, wf.data(), w.data(), N * K);
    if (t != DType::F32) {
      std::vector<uint16_t> h(x.size());
      quantize(t, x.data(), h.data(), int64_t(x.size()));
      dequantize(t, h.data(), x.data(), int64_t(x.size()));
    }
  }
};

}  // namespace

// The emulated 512-bit tile against the AVX2 kernel, bit for bit: full 8×6 tiles and the partial
// ones (M and n not multiples of the tile, an odd M's zero-padded pair), K tails, and K < 8 (no
// vector step at all). Also that the emulated FMA is fused, as the instruction is: x·w − round(x·w)
// survives one rounding and vanishes with two.
TEST(KernelMatmul, Avx512FloatTileIsBitIdenticalToAvx2Emulated) {
#if !defined(TOY_HAVE_SIMDE)
  GTEST_SKIP() << "SIMDe's headers (Debian's libsimde-dev, installed by scripts/setup.sh) were not found at "
                  "configure time: the emulated 512-bit tile is not built";
#else
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C: no AVX2 kernel to compare with";
  using detail::Act;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const detail::NamedKernel avx2 = detail::avx2_column_kernel(t);
    const detail::NamedKernel avx512 = detail::emulated::avx512_float_column_kernel(t);
    ASSERT_TRUE(avx512.run && avx512.row_pairs) << name(t);
    for (int64_t K : {3, 8, 13, 57, 64, 200})
      for (int64_t M : {4, 5, 8, 9, 17, 30})
        for (int64_t N : {1, 5, 6, 7, 13}) {
          const RandomProduct p(t, M, N, K, uint32_t(1000 * M + 10 * N + K));
          const Act rows{p.x.data(), K * 4, M, K};
          std::vector<float> pairs(size_t((M + 1) / 2 * 2 * (K / 8 * 8)));
          detail::emulated::pack_row_pairs(rows, pairs.data(), 0, (M + 1) / 2);
          Act paired = rows;
          paired.pairs = pairs.data();
          std::vector<float> want(size_t(M * N)), got(size_t(M * N), NAN);
          avx2.run(rows, p.w.data(), row_bytes(t, K), want.data(), N, N);
          avx512.run(paired, p.w.data(), row_bytes(t, K), got.data(), N, N);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
              << name(t) << " M " << M << " N " << N << " K " << K << ": " << want[0] << " vs " << got[0];
        }
  }
  // Fused: lane 0 takes x = −round(a²) against w = 1 at k = 0, then a·a at k = 8.
  const float a = 1.0f + 0x1p-12f, a2 = a * a;
  const int64_t M = 4, K = 16;
  std::vector<float> x(size_t(M * K), 0.0f), w(size_t(K), 0.0f), pairs(size_t(M * K)), y(size_t(M), NAN);
  w[0] = 1.0f, w[8] = a;
  for (int64_t m = 0; m < M; ++m) x[size_t(m * K)] = -a2, x[size_t(m * K + 8)] = a;
  const Act rows{x.data(), K * 4, M, K};
  detail::emulated::pack_row_pairs(rows, pairs.data(), 0, M / 2);
  Act paired = rows;
  paired.pairs = pairs.data();
  detail::emulated::avx512_float_column_kernel(DType::F32)
      .run(paired, reinterpret_cast<const uint8_t*>(w.data()), K * 4, y.data(), 1, 1);
  ASSERT_NE(double(a) * a - a2, 0.0);
  for (int64_t m = 0; m < M; ++m) EXPECT_EQ(y[size_t(m)], float(double(a) * a - a2)) << "row " << m;
#endif
}

// The same natively, through matmul_wt (which packs the pairs), where the CPU has AVX-512; and the
// kernel names and the choice that `toy bench --json` reports follow float_tile.
TEST(KernelMatmul, Avx512FloatTileIsBitIdenticalToAvx2) {
  TileState keep;
  if (!cpu_has_avx512vnni()) {
    EXPECT_EQ(float_tile_choice(), "avx2: the avx512vnni path is not in use");
    GTEST_SKIP() << "this CPU (or OS) lacks AVX512F/BW/VL/VNNI: no 512-bit tile to run natively";
  }
  set_simd(Simd::avx512vnni);
  set_float_tile(FloatTile::avx512);
  EXPECT_EQ(matmul_kernel_name(DType::F32), "avx512 fma 8x6");
  EXPECT_EQ(matmul_kernel_name(DType::F16), "avx512 f16c+fma 8x6");
  EXPECT_EQ(float_tile_choice(), "avx512: set");
  set_float_tile(FloatTile::avx2);
  EXPECT_EQ(matmul_kernel_name(DType::F32), "avx2 fma 4x3");
  EXPECT_EQ(float_tile_choice(), "avx2: set");
  set_float_tile(FloatTile::calibrate);
  const std::string chosen = matmul_kernel_name(DType::F32);
  EXPECT_TRUE(chosen == "avx2 fma 4x3" || chosen == "avx512 fma 8x6") << chosen;
  EXPECT_EQ(float_tile_choice().rfind("calibrated: F32 ", 0), 0u) << float_tile_choice();
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t K : {3, 13, 64, 200})
      for (int64_t M : {1, 4, 9, 30})
        for (int64_t N : {5, 13, 29}) {
          const RandomProduct p(t, M, N, K, uint32_t(1000 * M + 10 * N + K));
          std::vector<float> want(size_t(M * N)), got(size_t(M * N));
          set_simd(Simd::avx2);
          matmul_wt(p.x.data(), p.w.data(), t, want.data(), M, N, K);
          set_simd(Simd::avx512vnni);
          set_float_tile(FloatTile::avx512);
          matmul_wt(p.x.data(), p.w.data(), t, got.data(), M, N, K);
          if (t == DType::BF16 && cpu_has_avx512bf16()) continue;  // vdpbf16ps: its own bits
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
              << name(t) << " M " << M << " N " << N << " K " << K;
        }
}

// The VNNI quantized tiles under emulation against the AVX2 ones, bit for bit, on the activations
// matmul_wt makes (Q8_0 rows with block-major scales; Q8_K rows): full 4×4 / 4×1 tiles, partial
// ones and decode rows, 1–6 blocks.
TEST(KernelMatmul, VnniTilesAreBitIdenticalToAvx2Emulated) {
#if !defined(TOY_HAVE_SIMDE)
  GTEST_SKIP() << "SIMDe's headers (Debian's libsimde-dev, installed by scripts/setup.sh) were not found at "
                  "configure time: the emulated VNNI tiles are not built";
#else
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C: no AVX2 kernel to compare with";
  using detail::Act;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t blocks : {1, 3, 6})
      for (int64_t M : {1, 3, 4, 5, 17})
        for (int64_t N : {1, 3, 5, 13}) {
          const int64_t K = blocks * info(t).block_size;
          const std::vector<float> x = test::randn(size_t(M * K), uint32_t(1000 * M + 10 * N + K));
          const std::vector<float> wf = test::randn(size_t(N * K), uint32_t(K + N));
          std::vector<uint8_t> w(size_t(N * row_bytes(t, K)));
          quantize(t, wf.data(), w.data(), N * K);
          std::vector<uint8_t> xq;
          std::vector<float> scales(size_t(M * (K / 32)));
          Act a{nullptr, 0, M, K};
          if (activation_dtype(t) == DType::Q8_0) {
            xq.resize(size_t(M * K));
            for (int64_t m = 0; m < M; ++m)
              detail::avx2_quantize_q8_0(x.data() + m * K, reinterpret_cast<int8_t*>(xq.data() + m * K),
                                         scales.data() + m, M, K);
            a = Act{xq.data(), K, M, K, scales.data()};
          } else {
            const int64_t stride = row_bytes(DType::Q8_K, K);
            xq.resize(size_t(M * stride));
            for (int64_t m = 0; m < M; ++m) quantize(DType::Q8_K, x.data() + m * K, xq.data() + m * stride, K);
            a = Act{xq.data(), stride, M, K};
          }
          std::vector<float> want(size_t(M * N)), got(size_t(M * N), NAN);
          detail::avx2_column_kernel(t).run(a, w.data(), row_bytes(t, K), want.data(), N, N);
          detail::emulated::vnni_column_kernel(t).run(a, w.data(), row_bytes(t, K), got.data(), N, N);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
              << name(t) << " M " << M << " N " << N << " K " << K;
        }
#endif
}
