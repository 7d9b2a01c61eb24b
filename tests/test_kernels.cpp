// tests/test_kernels.cpp — fast kernels against the naive references, thread pool, determinism.
//
// Every matmul_wt path (each weight dtype; scalar, AVX2 and AVX-512 VNNI), gemm (all transposes),
// attention's decode kernels, attention and the norms (forward and backward) are compared with
// references computed in double, on odd shapes.
// Results must be bit-identical for 1, 2 and 3 threads, row m of a matmul must not depend on how
// many rows come with it, and the VNNI path must give the AVX2 path's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

#include "helpers.h"
#include "toy/kernels/cpu_features.h"
#include "toy/kernels/kernels.h"
#include "toy/kernels/reference.h"
#include "toy/tensor/quant.h"

using namespace toy;
using namespace toy::kernels;
using test::randn;

namespace {

// Restores the thread count and SIMD path a test changes.
struct KernelState {
  int threads = num_threads();
  Simd path = simd();
  ~KernelState() {
    set_num_threads(threads);
    set_simd(path);
  }
};

// N rows of K weights of type t as random bytes with sane half scales: every bit pattern of the
// values and integer scales is a valid block, so this reaches the extremes (a Q8_0 weight −128, a
// Q5_0 value 31, the largest K-quant scales) that quantized weights rarely or never contain.
std::vector<uint8_t> random_blocks(DType t, int64_t N, int64_t K, uint32_t seed) {
  std::vector<uint8_t> w(static_cast<size_t>(N * row_bytes(t, K)));
  std::mt19937 rng(seed);
  for (uint8_t& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(1e-4f, 1e-3f);
  const int64_t blocks = N * K / info(t).block_size;
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* blk = w.data() + i * info(t).type_size;
    const uint16_t d = f32_to_fp16(scale(rng)), dmin = f32_to_fp16(scale(rng));
    if (t == DType::Q6_K) {
      std::memcpy(blk + offsetof(BlockQ6_K, d), &d, 2);
    } else if (t == DType::Q4_K || t == DType::Q5_K) {  // d and dmin lead the block
      std::memcpy(blk, &d, 2);
      std::memcpy(blk + 2, &dmin, 2);
    } else {  // Q4_0, Q5_0, Q8_0: d leads the block
      std::memcpy(blk, &d, 2);
    }
  }
  return w;
}

// N rows of K weights of type t: quantized from N(0, 0.02) values where toy can quantize,
// otherwise random blocks.
std::vector<uint8_t> random_weights(DType t, int64_t N, int64_t K, uint32_t seed) {
  if (!can_quantize(t)) return random_blocks(t, N, K, seed);
  std::vector<uint8_t> w(static_cast<size_t>(N * row_bytes(t, K)));
  auto f = randn(size_t(N * K), seed, 0.02f);
  quantize(t, f.data(), w.data(), N * K);
  return w;
}

// |fast − reference| allowed per element: f32 rounding of a K-term sum, relative to Σ|x·w|.
std::vector<double> tolerance(const float* x, const void* w, DType t, int64_t M, int64_t N, int64_t K) {
  std::vector<float> wn(static_cast<size_t>(K));
  std::vector<double> tol(static_cast<size_t>(M * N));
  for (int64_t n = 0; n < N; ++n) {
    dequantize(t, static_cast<const uint8_t*>(w) + n * row_bytes(t, K), wn.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(double(x[m * K + k]) * wn[size_t(k)]);
      tol[size_t(m * N + n)] = 4e-7 * std::sqrt(double(K)) * s + 1e-30;
    }
  }
  return tol;
}

std::vector<float> run_matmul(const std::vector<float>& x, const std::vector<uint8_t>& w, DType t, int64_t M, int64_t N,
                              int64_t K) {
  std::vector<float> y(static_cast<size_t>(M * N), -1.0f);
  matmul_wt(x.data(), w.data(), t, y.data(), M, N, K);
  return y;
}

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_0,
                              DType::Q4_1, DType::Q5_1, DType::Q8_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<Simd> paths() {
  std::vector<Simd> p = {Simd::scalar};
  if (cpu_has_avx2()) p.push_back(Simd::avx2);
  if (cpu_has_avx512vnni()) p.push_back(Simd::avx512vnni);
  return p;
}

const char* path_name(Simd s) {
  switch (s) {
    case Simd::avx512vnni:
      return "avx512vnni";
    case Simd::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Thread pool

TEST(KernelThreads, ParallelForCoversTheRangeInFixedChunks) {
  KernelState keep;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (int64_t n : {0, 1, 5, 100, 1000, 100000}) {
      for (int64_t grain : {1, 7, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        parallel_for(n, grain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
          std::lock_guard lk(mu);
          chunks.emplace_back(b, e);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)], 1) << "n " << n << " i " << i;
        std::sort(chunks.begin(), chunks.end());
        for (size_t c = 0; c + 1 < chunks.size(); ++c) {
          EXPECT_EQ(chunks[c].second, chunks[c + 1].first);
          EXPECT_EQ(chunks[c].second - chunks[c].first, chunks[0].second - chunks[0].first);  // equal chunks
        }
        if (!chunks.empty()) {
          EXPECT_GE(chunks[0].second - chunks[0].first, std::min(grain, n));
        }
        EXPECT_LE(chunks.size(), 256u);
      }
    }
  }
}

TEST(KernelThreads, NestedCallsAndExceptions) {
  KernelState keep;
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) parallel_for(100, 10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total, 800);
  EXPECT_THROW(parallel_for(100, 1,
                            [](int64_t b, int64_t) {
                              if (b == 50) throw std::runtime_error("chunk 50");
                            }),
               std::runtime_error);
  // The pool still works after an exception.
  std::atomic<int64_t> after{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { after += e - b; });
  EXPECT_EQ(after, 1000);
  EXPECT_THROW(set_num_threads(0), std::invalid_argument);
}

TEST(KernelThreads, SimdLevelNamesThePath) {
  KernelState keep;
  set_simd(Simd::scalar);
  EXPECT_EQ(simd_level(), "scalar");
  if (cpu_has_avx2()) {
    set_simd(Simd::avx2);
    EXPECT_EQ(simd_level(), "avx2+fma+f16c");
  } else {
    EXPECT_THROW(set_simd(Simd::avx2), std::invalid_argument);
  }
  if (cpu_has_avx512vnni()) {
    set_simd(Simd::avx512vnni);
    EXPECT_EQ(simd_level(), "avx512vnni+avx2+fma+f16c");
  } else {
    EXPECT_THROW(set_simd(Simd::avx512vnni), std::invalid_argument);
  }
}

// ---------------------------------------------------------------------------------------------
// matmul_wt

// matmul_kernel_name (what `toy bench --json` reports) names the kernel of the path in use.
TEST(KernelMatmul, KernelNamesFollowThePath) {
  KernelState keep;
  set_simd(Simd::scalar);
  EXPECT_EQ(matmul_kernel_name(DType::F32), "scalar");
  EXPECT_EQ(matmul_kernel_name(DType::Q8_0), "scalar");
  EXPECT_EQ(matmul_kernel_name(DType::Q4_1), "dequantize to f32, scalar");
  if (cpu_has_avx2()) {
    set_simd(Simd::avx2);
    EXPECT_EQ(matmul_kernel_name(DType::F32), "avx2 fma 4x3");
    EXPECT_EQ(matmul_kernel_name(DType::F16), "avx2 f16c+fma 4x3");
    EXPECT_EQ(matmul_kernel_name(DType::BF16), "avx2 fma 4x3");
    EXPECT_EQ(matmul_kernel_name(DType::Q8_0), "avx2 maddubs 4x2");
    EXPECT_EQ(matmul_kernel_name(DType::Q4_0), "avx2 maddubs 4x2");
    EXPECT_EQ(matmul_kernel_name(DType::Q6_K), "avx2 maddubs 4x1");
    EXPECT_EQ(matmul_kernel_name(DType::Q4_1), "dequantize to f32, avx2 fma 4x3");
  }
  if (cpu_has_avx512vnni()) {
    set_simd(Simd::avx512vnni);
    const FloatTile tile = float_tile();
    set_float_tile(FloatTile::avx2);  // the 512-bit float tile's names: test_kernels_avx512.cpp
    EXPECT_EQ(matmul_kernel_name(DType::F32), "avx2 fma 4x3");
    EXPECT_EQ(matmul_kernel_name(DType::Q8_0), "avx512vnni vpdpbusd 4x4");
    EXPECT_EQ(matmul_kernel_name(DType::Q4_K), "avx512vnni vpdpwssd 4x1");
    EXPECT_EQ(matmul_kernel_name(DType::BF16), cpu_has_avx512bf16() ? "avx512bf16 vdpbf16ps 4x6" : "avx2 fma 4x3");
    set_float_tile(tile);
  }
  EXPECT_THROW(matmul_kernel_name(DType::Q2_K), std::invalid_argument);
}

TEST(KernelMatmul, ActivationTypesFollowLlamaCpp) {
  EXPECT_EQ(activation_dtype(DType::F32), DType::F32);
  EXPECT_EQ(activation_dtype(DType::F16), DType::F16);
  EXPECT_EQ(activation_dtype(DType::BF16), DType::BF16);
  EXPECT_EQ(activation_dtype(DType::Q8_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q5_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::Q4_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::Q6_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::Q4_1), DType::F32);
}

TEST(KernelMatmul, ActivationRoundingOfQ8_0IsLlamaCpps) {
  // q = round-half-even(x·127/amax): 63.5 → 64 (even), 0.5 → 0; d = half(amax/127).
  std::vector<float> x(32, 0.0f), r(32);
  x[0] = 127.0f, x[1] = 63.5f, x[2] = 0.5f, x[3] = -1.5f;
  reference::round_activations(DType::Q8_0, x.data(), r.data(), 32);
  EXPECT_EQ(r[0], 127.0f);
  EXPECT_EQ(r[1], 64.0f);
  EXPECT_EQ(r[2], 0.0f);
  EXPECT_EQ(r[3], -2.0f);
  // The fast kernel rounds the same way: x · e_k picks out the rounded activation.
  KernelState keep;
  for (Simd s : paths()) {
    set_simd(s);
    std::vector<BlockQ8_0> eye(32);
    for (int k = 0; k < 32; ++k) {
      eye[size_t(k)].d = f32_to_fp16(1.0f);
      std::memset(eye[size_t(k)].qs, 0, 32);
      eye[size_t(k)].qs[k] = 1;
    }
    std::vector<float> y(32);
    matmul_wt(x.data(), eye.data(), DType::Q8_0, y.data(), 1, 32, 32);
    for (int k = 0; k < 32; ++k) EXPECT_EQ(y[size_t(k)], r[size_t(k)]) << path_name(s) << " k " << k;
  }
}

TEST(KernelMatmul, EveryDtypeAndPathMatchesTheReference) {
  KernelState keep;
  for (DType t : kWeightTypes) {
    const int64_t bs = info(t).block_size;
    // F32/F16/BF16: K below one 16- or 32-value step, a multiple of both, and tails of 8, 25.
    const std::vector<int64_t> Ks = bs == 1 ? std::vector<int64_t>{13, 57, 64, 200} : std::vector<int64_t>{bs, 3 * bs};
    for (int64_t K : Ks)
      for (int64_t M : {1, 3, 17})
        for (int64_t N : {1, 7, 29}) {
          const auto x = randn(size_t(M * K), uint32_t(M * 1000 + N * 10 + K));
          const auto w = random_weights(t, N, K, uint32_t(K + N));
          std::vector<float> ref(static_cast<size_t>(M * N));
          reference::matmul_wt<double>(x.data(), w.data(), t, ref.data(), M, N, K);
          const auto tol = tolerance(x.data(), w.data(), t, M, N, K);
          for (Simd s : paths()) {
            set_simd(s);
            const auto y = run_matmul(x, w, t, M, N, K);
            for (int64_t i = 0; i < M * N; ++i)
              ASSERT_NEAR(y[size_t(i)], ref[size_t(i)], tol[size_t(i)])
                  << name(t) << " " << path_name(s) << " M " << M << " N " << N << " K " << K << " at " << i;
          }
        }
  }
}

// What docs/kernels.md states about the scalar and AVX2 paths: F16 and BF16 give the same bits
// (x is rounded to the weights' precision, so every product is exact in f32 and FMA adds nothing;
// the portable loop sums in the SIMD lanes' order), F32 and the quantized types do not (FMA
// against rounded products, or one running sum against 8 lanes) — all within the reference bound.
TEST(KernelMatmul, ScalarAndAvx2PathsAgreeAsDocumented) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C: no second path";
  KernelState keep;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t M = 3, N = 29, K = info(t).block_size == 1 ? 200 : 4 * info(t).block_size;  // 200: a tail
    const auto x = randn(size_t(M * K), 7);
    const auto w = random_weights(t, N, K, 11);
    std::vector<float> ref(static_cast<size_t>(M * N));
    reference::matmul_wt<double>(x.data(), w.data(), t, ref.data(), M, N, K);
    const auto tol = tolerance(x.data(), w.data(), t, M, N, K);
    set_simd(Simd::scalar);
    const auto portable = run_matmul(x, w, t, M, N, K);
    set_simd(Simd::avx2);
    const auto simd = run_matmul(x, w, t, M, N, K);
    int differ = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      EXPECT_NEAR(portable[size_t(i)], ref[size_t(i)], tol[size_t(i)]) << name(t) << " at " << i;
      EXPECT_NEAR(simd[size_t(i)], ref[size_t(i)], tol[size_t(i)]) << name(t) << " at " << i;
      differ += portable[size_t(i)] != simd[size_t(i)];
    }
    if (t == DType::F16 || t == DType::BF16)
      EXPECT_EQ(differ, 0) << name(t) << ": exact products, the same order";
    else
      EXPECT_GT(differ, 0) << name(t) << ": the paths gave the same bits";
  }
}

TEST(KernelMatmul, VnniPathIsBitIdenticalToAvx2) {
  if (!cpu_has_avx512vnni()) GTEST_SKIP() << "this CPU (or OS) lacks AVX512F/BW/VL/VNNI: no VNNI path to compare";
  KernelState keep;
  // Full tiles, partial ones and decode rows (M), column counts that leave 1-column tiles (N),
  // one block and several; weights as random blocks (all byte values) and as quantized ones.
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType t : types)
    for (int64_t blocks : {1, 3, 6})
      for (int64_t M : {1, 3, 4, 5, 17})
        for (int64_t N : {1, 2, 3, 5, 13, 29})
          for (bool quantized : {false, true}) {
            const int64_t K = blocks * info(t).block_size;
            const auto x = randn(size_t(M * K), uint32_t(M * 1000 + N * 10 + K));
            const uint32_t seed = uint32_t(K + N);
            const auto w = quantized ? random_weights(t, N, K, seed) : random_blocks(t, N, K, seed);
            set_simd(Simd::avx2);
            const auto want = run_matmul(x, w, t, M, N, K);
            set_simd(Simd::avx512vnni);
            const auto got = run_matmul(x, w, t, M, N, K);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << name(t) << (quantized ? " quantized" : " random blocks") << " M " << M << " N " << N << " K " << K;
          }
}

TEST(KernelMatmul, ActivationRoundingIsSmall) {
  // Against the exact product of f32 activations: error of the activation format only.
  const int64_t M = 3, N = 16, K = 512;
  const auto x = randn(size_t(M * K), 7);
  for (DType t : kWeightTypes) {
    const auto w = random_weights(t, N, K, 8);
    std::vector<float> wn(static_cast<size_t>(K));
    const auto y = run_matmul(x, w, t, M, N, K);
    const double bound = t == DType::F16 ? 1e-3 : t == DType::BF16 ? 8e-3 : 2e-2;  // of Σ|x·w|
    for (int64_t n = 0; n < N; ++n) {
      dequantize(t, w.data() + n * row_bytes(t, K), wn.data(), K);
      for (int64_t m = 0; m < M; ++m) {
        double exact = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          exact += double(x[size_t(m * K + k)]) * wn[size_t(k)];
          mag += std::fabs(double(x[size_t(m * K + k)]) * wn[size_t(k)]);
        }
        EXPECT_NEAR(y[size_t(m * N + n)], exact, bound * mag) << name(t);
      }
    }
  }
}

TEST(KernelMatmul, BitIdenticalForAnyThreadCountAndBatch) {
  KernelState keep;
  const int64_t M = 17, N = 301;
  for (DType t : kWeightTypes)
    // 57: the float kernels' masked or scalar tail, and in decode the 8-value steps after the
    // whole 64-byte lines of the prefetching loop.
    for (int64_t K : {int64_t(512), int64_t(57)}) {
      if (K % info(t).block_size != 0) continue;
      const auto x = randn(size_t(M * K), 11);
      const auto w = random_weights(t, N, K, 12);
      for (Simd s : paths()) {
        set_simd(s);
        set_num_threads(1);
        const auto y1 = run_matmul(x, w, t, M, N, K);
        for (int threads : {2, 3}) {
          set_num_threads(threads);
          const auto yt = run_matmul(x, w, t, M, N, K);
          EXPECT_EQ(std::memcmp(y1.data(), yt.data(), y1.size() * 4), 0)
              << name(t) << " " << path_name(s) << " K " << K << " threads " << threads;
        }
        // Row m alone (decode) gives the same bits as row m inside the batch (prompt).
        for (int64_t m : {0, 5, 16}) {
          const std::vector<float> xm(x.begin() + m * K, x.begin() + (m + 1) * K);
          const auto ym = run_matmul(xm, w, t, 1, N, K);
          EXPECT_EQ(std::memcmp(ym.data(), y1.data() + m * N, size_t(N) * 4), 0)
              << name(t) << " " << path_name(s) << " K " << K << " row " << m;
        }
      }
    }
}

// The prompt paths with their own data (F16/BF16 x as 16-bit rows, Q4_0/Q5_0 weights unpacked to
// Q8_0 blocks per call): every row of every prompt shape, full and partial tiles and unpacked row
// groups, has the bits of that row decoded alone; Q4_0/Q5_0 weights as random blocks reach every
// value.
TEST(KernelMatmul, PromptPathsGiveTheDecodeBits) {
  KernelState keep;
  for (DType t : {DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0})
    for (Simd s : paths()) {
      set_simd(s);
      for (int64_t K : info(t).block_size == 1 ? std::vector<int64_t>{61, 200} : std::vector<int64_t>{32, 160})
        for (int64_t M : {4, 7, 13})
          for (int64_t N : {1, 5, 26}) {
            const auto x = randn(size_t(M * K), uint32_t(M * 100 + N + K));
            const uint32_t seed = uint32_t(K + N);
            const auto w = info(t).block_size == 1 ? random_weights(t, N, K, seed) : random_blocks(t, N, K, seed);
            const auto y = run_matmul(x, w, t, M, N, K);
            for (int64_t m = 0; m < M; ++m) {
              const std::vector<float> xm(x.begin() + m * K, x.begin() + (m + 1) * K);
              const auto ym = run_matmul(xm, w, t, 1, N, K);
              ASSERT_EQ(std::memcmp(ym.data(), y.data() + m * N, size_t(N) * 4), 0)
                  << name(t) << " " << path_name(s) << " M " << M << " N " << N << " K " << K << " row " << m;
            }
          }
    }
}

TEST(KernelMatmul, ManyProductsEqualOneCallEach) {
  KernelState keep;
  const int64_t K = 512;
  const DType types[] = {DType::Q8_0, DType::F16, DType::Q6_K, DType::Q4_1, DType::F32};  // 4 activation formats
  const int64_t Ns[] = {96, 301, 40, 13, 256};
  std::vector<std::vector<uint8_t>> ws;
  for (size_t i = 0; i < std::size(types); ++i) ws.push_back(random_weights(types[i], Ns[i], K, uint32_t(20 + i)));
  for (int64_t M : {1, 3, 37}) {
    const auto x = randn(size_t(M * K), uint32_t(M));
    for (Simd s : paths()) {
      set_simd(s);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<std::vector<float>> ys;
        std::vector<Product> products;
        for (size_t i = 0; i < std::size(types); ++i) {
          ys.emplace_back(size_t(M * Ns[i]), -1.0f);
          products.push_back({.w = ws[i].data(), .wt = types[i], .y = ys.back().data(), .N = Ns[i]});
        }
        matmul_wt_many(x.data(), products, M, K);
        for (size_t i = 0; i < std::size(types); ++i) {
          const auto want = run_matmul(x, ws[i], types[i], M, Ns[i], K);
          EXPECT_EQ(std::memcmp(want.data(), ys[i].data(), want.size() * 4), 0)
              << name(types[i]) << " M " << M << " " << path_name(s) << " threads " << threads;
        }
      }
    }
  }
}

// Attention's decode kernels read rows `stride` apart (f32 or halves, widened exactly) and must
// match a double-precision reference to f32 rounding; a score must not depend on how many keys
// come with it (the last block of fewer than 8 keys repeats a key in the AVX2 path).
TEST(KernelAttentionRows, ScoresAndWeightedSumsMatchTheReference) {
  KernelState keep;
  for (Simd s : paths()) {
    set_simd(s);
    for (DType kv : {DType::F32, DType::F16})
      for (int64_t d : {4, 8, 64, 80})
        for (int64_t n : {1, 7, 8, 9, 64}) {
          SCOPED_TRACE(std::string(path_name(s)) + " " + std::string(name(kv)) + " d " + std::to_string(d) + " n " +
                       std::to_string(n));
          const int64_t stride = 3 * d;  // the rows of one KV head among three
          const auto q = randn(size_t(d), 1), p = randn(size_t(n), 2);
          auto rows = randn(size_t(n * stride), 3);
          std::vector<uint16_t> halves(rows.size());
          for (size_t i = 0; i < rows.size(); ++i) {
            halves[i] = f32_to_fp16(rows[i]);
            if (kv == DType::F16) rows[i] = fp16_to_f32(halves[i]);  // the values the kernels see
          }
          const void* r = kv == DType::F16 ? static_cast<const void*>(halves.data()) : rows.data();
          std::vector<float> sc(static_cast<size_t>(n)), o(static_cast<size_t>(d));
          scores(q.data(), r, kv, stride, n, d, 0.125f, sc.data());
          weighted_sum(p.data(), r, kv, stride, n, d, o.data());
          for (int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0;
            for (int64_t e = 0; e < d; ++e) {
              const double t = double(q[size_t(e)]) * rows[size_t(j * stride + e)];
              want += t, mag += std::fabs(t);
            }
            EXPECT_NEAR(sc[size_t(j)], 0.125 * want, 4e-7 * std::sqrt(double(d)) * 0.125 * mag + 1e-30) << "key " << j;
          }
          for (int64_t e = 0; e < d; ++e) {
            double want = 0, mag = 0;
            for (int64_t j = 0; j < n; ++j) {
              const double t = double(p[size_t(j)]) * rows[size_t(j * stride + e)];
              want += t, mag += std::fabs(t);
            }
            EXPECT_NEAR(o[size_t(e)], want, 4e-7 * std::sqrt(double(n)) * mag + 1e-30) << "column " << e;
          }
          std::vector<float> first(static_cast<size_t>(n));  // the first keys alone: the same bits
          scores(q.data(), r, kv, stride, (n + 1) / 2, d, 0.125f, first.data());
          for (int64_t j = 0; j < (n + 1) / 2; ++j) ASSERT_EQ(first[size_t(j)], sc[size_t(j)]) << "key " << j;
        }
  }
}

// silu on every path against x / (1 + e^−x) in double: ≤ 3 ulp over [−87, 87] (normal
// results), and the limits: silu(0) = 0, silu(−100) = −0, silu(100) = 100; any n (tails).
TEST(KernelActivations, SiluIsAccurate) {
  KernelState keep;
  std::vector<float> x;
  for (int i = -20000; i <= 20000; ++i) x.push_back(87.0f * float(i) / 20000);  // results: normal floats
  for (Simd s : paths()) {
    set_simd(s);
    for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(13)}) {
      std::vector<float> y(static_cast<size_t>(n));
      silu(x.data() + x.size() - size_t(n), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float xi = x[x.size() - size_t(n) + size_t(i)];
        const double want = double(xi) / (1.0 + std::exp(-double(xi)));
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 1e-37)) - 23);
        ASSERT_LE(std::fabs(y[size_t(i)] - want), 3 * ulp) << path_name(s) << " silu(" << xi << ")";
      }
    }
    const float edge[3] = {0.0f, -100.0f, 100.0f};
    float out[3];
    silu(edge, out, 3);
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(out[2], 100.0f);
  }
}

// The GELU that training differentiates, on every path, against double precision: gelu(x) =
// x·σ(2u) and gelu'(x) = s + 2x·s(1 − s)·u'(x), s = σ(2u) (½(1 + tanh u) = σ(2u), written so that
// the reference has no cancellation either). u is rounded to float first, and the exponential
// multiplies its relative error by |2u|, hence the bound's (1 + |2u|) factor; the derivative's
// error is measured against the size of its terms (it crosses zero near x = −0.75). Over
// [−9.5, 9.5], where every result is a normal float; then the limits, and the promise that a value
// does not depend on where it sits in the array (n, tails, chunks over threads).
TEST(KernelActivations, GeluAndItsDerivativeAreAccurate) {
  KernelState keep;
  std::vector<float> x, ones;
  for (int i = -40000; i <= 40000; ++i) x.push_back(9.5f * float(i) / 40000);
  ones.assign(x.size(), 1.0f);
  const auto ulp_of = [](double v) { return std::ldexp(1.0, std::ilogb(std::max(std::fabs(v), 1e-37)) - 23); };
  for (Simd s : paths()) {
    set_simd(s);
    for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(13)}) {
      const float* xs = x.data() + x.size() - size_t(n);
      std::vector<float> y(static_cast<size_t>(n)), dy(static_cast<size_t>(n));
      gelu_tanh_exact(xs, y.data(), n);
      gelu_tanh_backward(ones.data(), xs, dy.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double v = xs[i], k = std::sqrt(2.0 / std::numbers::pi), u = k * (v + 0.044715 * v * v * v);
        const double sg = 1.0 / (1.0 + std::exp(-2.0 * u)),
                     slope = 2.0 * v * sg * (1.0 - sg) * k * (1.0 + 3 * 0.044715 * v * v);
        const double scale = 1.0 + std::fabs(2.0 * u);
        ASSERT_LE(std::fabs(y[size_t(i)] - v * sg), 4 * scale * ulp_of(v * sg)) << path_name(s) << " gelu(" << v << ")";
        ASSERT_LE(std::fabs(dy[size_t(i)] - (sg + slope)), 4 * scale * ulp_of(sg + std::fabs(slope)))
            << path_name(s) << " gelu'(" << v << ")";
      }
    }
    const float edge[3] = {0.0f, -100.0f, 100.0f}, grad[3] = {1, 1, 1};
    float out[3], slope[3];
    gelu_tanh_exact(edge, out, 3);
    gelu_tanh_backward(grad, edge, slope, 3);
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(out[2], 100.0f);
    EXPECT_EQ(slope[0], 0.5f);
    EXPECT_EQ(slope[1], 0.0f);
    EXPECT_EQ(slope[2], 1.0f);
    // Each value as computed alone equals the same value inside the long array, on 1 and 2 threads.
    std::vector<float> whole(x.size()), grads(x.size());
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      gelu_tanh_exact(x.data(), whole.data(), int64_t(x.size()));
      gelu_tanh_backward(ones.data(), x.data(), grads.data(), int64_t(x.size()));
      for (size_t i = 0; i < x.size(); i += 997) {
        float alone, alone_grad;
        gelu_tanh_exact(&x[i], &alone, 1);
        gelu_tanh_backward(&ones[i], &x[i], &alone_grad, 1);
        ASSERT_EQ(alone, whole[i]) << path_name(s) << " x = " << x[i] << ", " << threads << " threads";
        ASSERT_EQ(alone_grad, grads[i]) << path_name(s) << " x = " << x[i] << ", " << threads << " threads";
      }
    }
  }
}

// softmax_terms: the max, exp(x − max) to ≤ 2 ulp over the whole range of normal results, exactly
// 1 at the max and 0 for −inf and huge negative inputs, and the sum.
TEST(KernelAttentionRows, SoftmaxTermsExpIsAccurate) {
  KernelState keep;
  for (Simd s : paths()) {
    set_simd(s);
    std::vector<float> x;
    for (int i = 0; i <= 20000; ++i) x.push_back(-87.0f * float(i) / 20000);  // exp(x − 0) over [e^−87, 1]
    x.push_back(-INFINITY);
    x.push_back(-1e30f);
    std::mt19937 rng(5);
    std::shuffle(x.begin(), x.end(), rng);
    for (int64_t n : {int64_t(x.size()), int64_t(1), int64_t(13)}) {
      std::vector<float> y(x.begin(), x.begin() + n);
      if (n > 1) y[size_t(n / 2)] = 0.0f;  // the max
      const std::vector<float> in = y;
      const SoftmaxTerms t = softmax_terms(y.data(), n);
      EXPECT_EQ(t.max, *std::max_element(in.begin(), in.end())) << path_name(s);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(double(in[size_t(i)]) - t.max);
        sum += y[size_t(i)];
        if (in[size_t(i)] == t.max) {
          ASSERT_EQ(y[size_t(i)], 1.0f) << path_name(s);
        }
        if (in[size_t(i)] < -1e29f) {
          ASSERT_EQ(y[size_t(i)], 0.0f) << path_name(s) << " exp(" << in[size_t(i)] << ")";
        }
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(want, 1e-37)) - 23);
        ASSERT_LE(std::fabs(y[size_t(i)] - want), 2 * ulp) << path_name(s) << " exp(" << in[size_t(i)] << ")";
      }
      EXPECT_NEAR(t.sum, sum, 6e-8 * double(n) * sum) << path_name(s);  // f32 summation: (n − 1)·u·Σ y at worst
    }
  }
}

TEST(KernelMatmul, RejectsBadShapes) {
  std::vector<float> x(64), y(4);
  std::vector<uint8_t> w(1024);
  EXPECT_THROW(matmul_wt(x.data(), w.data(), DType::Q8_0, y.data(), 1, 1, 40), std::invalid_argument);
  EXPECT_THROW(matmul_wt(x.data(), w.data(), DType::Q2_K, y.data(), 1, 1, 256), std::invalid_argument);
  EXPECT_NO_THROW(matmul_wt(x.data(), w.data(), DType::Q8_0, y.data(), 0, 1, 32));
}

// ---------------------------------------------------------------------------------------------
// gemm

TEST(KernelGemm, AllTransposesMatchTheReference) {
  KernelState keep;
  struct Shape {
    int64_t M, N, K;
  };
  for (Shape sh : {Shape{1, 1, 1}, Shape{7, 33, 19}, Shape{50, 70, 300}, Shape{13, 5, 600}, Shape{3, 4100, 20}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          const auto A = randn(size_t(sh.M * sh.K), 21), B = randn(size_t(sh.K * sh.N), 22);
          const auto C0 = randn(size_t(sh.M * sh.N), 23);
          std::vector<float> ref = C0;
          reference::gemm<double>(ta, tb, sh.M, sh.N, sh.K, A.data(), B.data(), ref.data(), acc);
          for (Simd s : paths()) {
            set_simd(s);
            std::vector<float> C = C0;
            gemm(ta, tb, sh.M, sh.N, sh.K, A.data(), B.data(), C.data(), acc);
            for (int64_t m = 0; m < sh.M; ++m)
              for (int64_t n = 0; n < sh.N; ++n) {
                double mag = acc ? std::fabs(C0[size_t(m * sh.N + n)]) : 0;
                for (int64_t k = 0; k < sh.K; ++k)
                  mag += std::fabs(double(ta ? A[size_t(k * sh.M + m)] : A[size_t(m * sh.K + k)]) *
                                   (tb ? B[size_t(n * sh.K + k)] : B[size_t(k * sh.N + n)]));
                ASSERT_NEAR(C[size_t(m * sh.N + n)], ref[size_t(m * sh.N + n)], 1.2e-7 * double(sh.K + 1) * mag)
                    << path_name(s) << " ta " << ta << " tb " << tb << " acc " << acc << " M " << sh.M << " N " << sh.N
                    << " K " << sh.K;
              }
          }
        }
}

TEST(KernelGemm, BitIdenticalForAnyThreadCount) {
  KernelState keep;
  const int64_t M = 300, N = 290, K = 530;
  const auto A = randn(size_t(M * K), 31), B = randn(size_t(K * N), 32);
  for (Simd s : paths()) {
    set_simd(s);
    set_num_threads(1);
    std::vector<float> C1(static_cast<size_t>(M * N));
    gemm(false, true, M, N, K, A.data(), B.data(), C1.data(), false);
    for (int threads : {2, 3}) {
      set_num_threads(threads);
      std::vector<float> C(static_cast<size_t>(M * N));
      gemm(false, true, M, N, K, A.data(), B.data(), C.data(), false);
      EXPECT_EQ(std::memcmp(C1.data(), C.data(), C.size() * 4), 0) << path_name(s) << " threads " << threads;
    }
    // A row of C does not depend on the other rows: compute rows 100..102 alone.
    std::vector<float> C3(static_cast<size_t>(3 * N));
    gemm(false, true, 3, N, K, A.data() + 100 * K, B.data(), C3.data(), false);
    EXPECT_EQ(std::memcmp(C3.data(), C1.data() + 100 * N, C3.size() * 4), 0) << path_name(s);
  }
}

TEST(KernelGemm, EmptyInnerDimension) {
  std::vector<float> C = {1, 2, 3, 4};
  gemm(false, false, 2, 2, 0, nullptr, nullptr, C.data(), true);
  EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4}));
  gemm(false, false, 2, 2, 0, nullptr, nullptr, C.data(), false);
  EXPECT_EQ(C, (std::vector<float>{0, 0, 0, 0}));
}

// ---------------------------------------------------------------------------------------------
// Attention and the norms: the kernels behind primitives/attention.cpp and norm.cpp, forward and
// backward, against the references in double (kernels/reference.h), on every SIMD path.

namespace {

// Both paths of the forward (decode chunks for T < 8, gemm blocks from 8 queries on), with
// grouped heads, a cached prefix (S > T), several key chunks (S > 64) or query blocks (T > 32),
// the sliding window and the soft-cap.
const AttentionGeometry kAttentionCases[] = {
    {.B = 2, .T = 3, .S = 150, .H = 4, .Hkv = 2, .Dh = 16, .scale = 0.25f},
    {.B = 1, .T = 5, .S = 140, .H = 2, .Hkv = 1, .Dh = 8, .scale = 0.35f, .softcap = 2.0f, .window = 70},
    {.B = 2, .T = 40, .S = 45, .H = 4, .Hkv = 2, .Dh = 16, .scale = 0.25f},
    {.B = 1, .T = 70, .S = 70, .H = 2, .Hkv = 2, .Dh = 8, .scale = 0.35f, .softcap = 1.5f, .window = 20},
    {.B = 2, .T = 40, .S = 40, .H = 2, .Hkv = 2, .Dh = 8, .scale = 0.35f, .causal = false},  // an encoder (ViT)
    {.B = 1, .T = 5, .S = 5, .H = 2, .Hkv = 1, .Dh = 8, .scale = 0.35f, .causal = false},
};

std::string attention_name(const AttentionGeometry& g) {
  return "B" + std::to_string(g.B) + " T" + std::to_string(g.T) + " S" + std::to_string(g.S) + " H" +
         std::to_string(g.H) + "/" + std::to_string(g.Hkv) + " Dh" + std::to_string(g.Dh) + " cap " +
         std::to_string(g.softcap) + " window " + std::to_string(g.window) + (g.causal ? "" : " bidirectional");
}

// Everything one attention call reads and writes, in f32.
struct AttentionRun {
  std::vector<float> o = {}, P = {}, capped = {}, dq = {}, dk = {}, dv = {};
};

struct AttentionInputs {
  std::vector<float> q, k, v, dout;
  explicit AttentionInputs(const AttentionGeometry& g)
      : q(randn(size_t(g.B * g.T * g.H * g.Dh), 1)),
        k(randn(size_t(g.B * g.S * g.Hkv * g.Dh), 2)),
        v(randn(size_t(g.B * g.S * g.Hkv * g.Dh), 3)),
        dout(randn(size_t(g.B * g.T * g.H * g.Dh), 4)) {}
};

AttentionRun run_attention(const AttentionGeometry& g, const AttentionInputs& in) {
  const size_t probs = size_t(g.B * g.H * g.T * g.S);
  AttentionRun r{.o = std::vector<float>(in.q.size()),
                 .P = std::vector<float>(probs, -1.0f),
                 .capped = std::vector<float>(probs, -1.0f),
                 .dq = std::vector<float>(in.q.size(), -1.0f),
                 .dk = std::vector<float>(in.k.size(), -1.0f),
                 .dv = std::vector<float>(in.v.size(), -1.0f)};
  float* capped = g.softcap > 0 ? r.capped.data() : nullptr;
  attention(g, in.q.data(), in.k.data(), in.v.data(), DType::F32, r.o.data(), r.P.data(), capped);
  attention_backward(g, in.q.data(), in.k.data(), in.v.data(), r.P.data(), capped, in.dout.data(), r.dq.data(),
                     r.dk.data(), r.dv.data());
  return r;
}

// max |got − want| over max(1, max |want|): errors of f32 sums whose terms are O(1).
double max_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, mag = 1;
  for (size_t i = 0; i < want.size(); ++i)
    err = std::max(err, std::fabs(double(got[i]) - want[i])), mag = std::max(mag, std::fabs(double(want[i])));
  return err / mag;
}

}  // namespace

// The bound: a score sums Dh ≤ 16 products of N(0, 1) values, an output S ≤ 150 terms of P·v,
// a gradient as many again, in f32 (2⁻²⁴ ≈ 6e-8 per rounding, exp within 2 ulp): ≲ 1e-6 of the
// largest value, which 2e-5 leaves room for; a wrong mask, scale or cap term is O(0.1) or more.
TEST(KernelAttention, ForwardAndBackwardMatchTheReference) {
  KernelState keep;
  for (const AttentionGeometry& g : kAttentionCases) {
    const AttentionInputs in(g);
    AttentionRun want{.o = std::vector<float>(in.q.size()),
                      .P = std::vector<float>(size_t(g.B * g.H * g.T * g.S)),
                      .dq = std::vector<float>(in.q.size()),
                      .dk = std::vector<float>(in.k.size()),
                      .dv = std::vector<float>(in.v.size())};
    reference::attention<double>(g, in.q.data(), in.k.data(), in.v.data(), want.o.data(), want.P.data());
    reference::attention_backward<double>(g, in.q.data(), in.k.data(), in.v.data(), want.P.data(), in.dout.data(),
                                          want.dq.data(), want.dk.data(), want.dv.data());
    for (Simd s : paths()) {
      set_simd(s);
      SCOPED_TRACE(attention_name(g) + " " + path_name(s));
      const AttentionRun got = run_attention(g, in);
      EXPECT_LE(max_error(got.o, want.o), 2e-5);
      EXPECT_LE(max_error(got.P, want.P), 2e-5);  // 0 where masked
      EXPECT_LE(max_error(got.dq, want.dq), 2e-5);
      EXPECT_LE(max_error(got.dk, want.dk), 2e-5);
      EXPECT_LE(max_error(got.dv, want.dv), 2e-5);
    }
  }
}

// An F16 KV cache is read as its halves widened exactly: the reference on the widened values.
TEST(KernelAttention, HalfKeysAndValuesMatchTheReference) {
  KernelState keep;
  for (const AttentionGeometry& g : kAttentionCases) {
    AttentionInputs in(g);
    std::vector<uint16_t> k16(in.k.size()), v16(in.v.size());
    for (size_t i = 0; i < in.k.size(); ++i) {
      k16[i] = f32_to_fp16(in.k[i]), v16[i] = f32_to_fp16(in.v[i]);
      in.k[i] = fp16_to_f32(k16[i]), in.v[i] = fp16_to_f32(v16[i]);
    }
    std::vector<float> want(in.q.size()), P(size_t(g.B * g.H * g.T * g.S));
    reference::attention<double>(g, in.q.data(), in.k.data(), in.v.data(), want.data(), P.data());
    for (Simd s : paths()) {
      set_simd(s);
      SCOPED_TRACE(attention_name(g) + " " + path_name(s));
      std::vector<float> got(in.q.size());
      attention(g, in.q.data(), k16.data(), v16.data(), DType::F16, got.data(), nullptr, nullptr);
      EXPECT_LE(max_error(got, want), 2e-5);
    }
  }
}

TEST(KernelAttention, BitIdenticalForAnyThreadCount) {
  KernelState keep;
  for (const AttentionGeometry& g : kAttentionCases) {
    SCOPED_TRACE(attention_name(g));
    const AttentionInputs in(g);
    set_num_threads(1);
    const AttentionRun one = run_attention(g, in);
    for (int threads : {2, 3}) {
      set_num_threads(threads);
      const AttentionRun many = run_attention(g, in);
      EXPECT_EQ(many.o, one.o) << threads << " threads";
      EXPECT_EQ(many.P, one.P) << threads << " threads";
      EXPECT_EQ(many.dq, one.dq) << threads << " threads";
      EXPECT_EQ(many.dk, one.dk) << threads << " threads";
      EXPECT_EQ(many.dv, one.dv) << threads << " threads";
    }
  }
}

namespace {

// R rows of D values: 150 rows are three blocks of rms_norm_backward's 64 rows.
constexpr int64_t kNormRows = 150, kNormD = 48;
constexpr float kNormEps = 1e-5f;

struct NormRun {
  std::vector<float> y = {}, dx = {}, dw = {}, db = {};
};

NormRun run_rms_norm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy) {
  NormRun r{.y = std::vector<float>(x.size()), .dx = std::vector<float>(x.size(), -1.0f), .dw = w, .db = {}};
  std::vector<float> rstd(static_cast<size_t>(kNormRows));
  rms_norm(x.data(), w.data(), kNormEps, kNormRows, kNormD, r.y.data(), rstd.data());
  rms_norm_backward(x.data(), w.data(), rstd.data(), dy.data(), kNormRows, kNormD, r.dx.data(), r.dw.data());
  return r;
}

NormRun run_layer_norm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                       const std::vector<float>& dy) {
  NormRun r{.y = std::vector<float>(x.size()), .dx = std::vector<float>(x.size(), -1.0f), .dw = w, .db = b};
  std::vector<float> xhat(x.size()), rstd(static_cast<size_t>(kNormRows));
  layer_norm(x.data(), w.data(), b.data(), kNormEps, kNormRows, kNormD, r.y.data(), xhat.data(), rstd.data());
  layer_norm_backward(w.data(), xhat.data(), rstd.data(), dy.data(), kNormRows, kNormD, r.dx.data(), r.dw.data(),
                      r.db.data());
  return r;
}

}  // namespace

// The bound: a row's statistics sum D = 48 values in double, dx sums D f32 products, dw and db
// R = 150 rows in f32: ≲ 1e-5 of the largest value (dw), which 5e-5 leaves room for; a missing
// term of a gradient is O(0.1) of it.
TEST(KernelNorms, ForwardAndBackwardMatchTheReference) {
  KernelState keep;
  const auto x = randn(size_t(kNormRows * kNormD), 5, 2.0f), dy = randn(x.size(), 6);
  const auto w = randn(size_t(kNormD), 7), b = randn(size_t(kNormD), 8);
  NormRun rms{.y = std::vector<float>(x.size()), .dx = std::vector<float>(x.size()), .dw = w, .db = {}};
  reference::rms_norm<double>(x.data(), w.data(), kNormEps, kNormRows, kNormD, rms.y.data());
  reference::rms_norm_backward<double>(x.data(), w.data(), kNormEps, dy.data(), kNormRows, kNormD, rms.dx.data(),
                                       rms.dw.data());
  NormRun ln{.y = std::vector<float>(x.size()), .dx = std::vector<float>(x.size()), .dw = w, .db = b};
  reference::layer_norm<double>(x.data(), w.data(), b.data(), kNormEps, kNormRows, kNormD, ln.y.data());
  reference::layer_norm_backward<double>(x.data(), w.data(), kNormEps, dy.data(), kNormRows, kNormD, ln.dx.data(),
                                         ln.dw.data(), ln.db.data());
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    SCOPED_TRACE(std::to_string(threads) + " threads");
    const NormRun got_rms = run_rms_norm(x, w, dy), got_ln = run_layer_norm(x, w, b, dy);
    EXPECT_LE(max_error(got_rms.y, rms.y), 5e-5);
    EXPECT_LE(max_error(got_rms.dx, rms.dx), 5e-5);
    EXPECT_LE(max_error(got_rms.dw, rms.dw), 5e-5);
    EXPECT_LE(max_error(got_ln.y, ln.y), 5e-5);
    EXPECT_LE(max_error(got_ln.dx, ln.dx), 5e-5);
    EXPECT_LE(max_error(got_ln.dw, ln.dw), 5e-5);
    EXPECT_LE(max_error(got_ln.db, ln.db), 5e-5);
  }
}

TEST(KernelNorms, BitIdenticalForAnyThreadCount) {
  KernelState keep;
  const auto x = randn(size_t(kNormRows * kNormD), 9, 2.0f), dy = randn(x.size(), 10);
  const auto w = randn(size_t(kNormD), 11), b = randn(size_t(kNormD), 12);
  set_num_threads(1);
  const NormRun rms = run_rms_norm(x, w, dy), ln = run_layer_norm(x, w, b, dy);
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    const NormRun rms_n = run_rms_norm(x, w, dy), ln_n = run_layer_norm(x, w, b, dy);
    EXPECT_EQ(rms_n.y, rms.y) << threads;
    EXPECT_EQ(rms_n.dx, rms.dx) << threads;
    EXPECT_EQ(rms_n.dw, rms.dw) << threads;
    EXPECT_EQ(ln_n.y, ln.y) << threads;
    EXPECT_EQ(ln_n.dx, ln.dx) << threads;
    EXPECT_EQ(ln_n.dw, ln.dw) << threads;
    EXPECT_EQ(ln_n.db, ln.db) << threads;
  }
}
