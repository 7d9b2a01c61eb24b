// kernels/matmul.cpp — matmul_wt: activation conversion, dispatch, and the portable kernels.
//
// y[m, n] = Σ_k x[m, k]·W[n, k] for a weight W in any supported dtype. As in llama.cpp's CPU
// backend, x is first rounded to the weight's activation format (activation_dtype):
//   F16 / BF16 weights:      x rounded to half / bfloat16; products are then exact in f32.
//   Q4_0 / Q5_0 / Q8_0:      x quantized to Q8_0 blocks (32 values, half scale);
//                            the block dot product Σ q_w·q_x is an exact integer.
//   Q4_K / Q5_K / Q6_K:      x quantized to Q8_K blocks (256 values, f32 scale).
//   Q4_1 / Q5_1 / Q8_K:      rows dequantized to f32 (no fast kernel; x stays f32).
// The N output columns are split over threads; each element is computed by one thread in an
// order fixed by its kernel (below and in matmul_avx2.cpp), so results do not depend on the
// thread count. The scalar and AVX2 kernels sum F32 and the quantized types in different orders
// (f32 results differ in the last bits; F16/BF16 products are exact, so those agree), and both
// are checked against reference.cpp; the AVX-512 VNNI kernels (matmul_vnni.cpp) and the 512-bit
// float tiles (matmul_avx512.cpp) give the bits of the AVX2 ones, except BF16 with vdpbf16ps.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "toy/kernels/cpu_features.h"
#include "toy/kernels/internal.h"
#include "toy/kernels/kernels.h"

namespace toy::kernels {

DType activation_dtype(DType wt) {
  switch (wt) {
    case DType::F16:
      return DType::F16;
    case DType::BF16:
      return DType::BF16;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    default:
      return DType::F32;
  }
}

namespace {

using detail::Act;
using detail::ColumnKernel;
using detail::NamedKernel;

// All 65536 halves as floats: the scalar path converts with a table lookup, as ggml does.
const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_f32(uint16_t(h));
    return t;
  }();
  return table.data();
}

// Round half to even for |v| < 2^22: adding 1.5·2^23 leaves the rounded integer in the low
// mantissa bits (the same trick as ggml's nearest_int; equal to _mm256_round_ps(v, NEAREST)).
inline int round_half_even(float v) {
  const float f = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// ---------------------------------------------------------------------------------------------
// Activation conversion

// llama.cpp's quantize_row_q8_0 for activations (its x86 AVX2 version): d = amax/127 rounded
// to half, q = round_half_even(x · 127/amax). Not quantize(Q8_0): that is ggml's weight
// quantizer, which multiplies by 1/d and rounds ties away from zero. Writes the K values to q
// and block b's d (the half's value, as f32) to d[b·d_stride].
void quantize_row_q8_0_act(const float* x, int8_t* q, float* d, int64_t d_stride, int64_t K) {
  for (int64_t b = 0; b < K / QK; ++b, x += QK, q += QK) {
    float amax = 0;
    for (int j = 0; j < QK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float id = amax != 0 ? 127.f / amax : 0.0f;
    d[b * d_stride] = fp16_to_f32(f32_to_fp16(amax / 127.f));
    for (int j = 0; j < QK; ++j) q[j] = int8_t(round_half_even(x[j] * id));
  }
}

// Converts the M rows of x to `at` into buf; returns the view the column kernels read.
Act convert_activations(const float* x, DType at, int64_t M, int64_t K, bool avx2, std::vector<uint8_t>& buf) {
  if (at == DType::F32) return Act{x, K * 4, M, K};
  const bool half = at == DType::F16 || at == DType::BF16;
  const int64_t stride = half ? K * 4 : at == DType::Q8_0 ? K : row_bytes(at, K);
  // Q8_0: the f32 block scales follow the rows; F16 prompts on the AVX2 path: the 16-bit rows.
  const int64_t tail_at = (M * stride + 63) / 64 * 64;
  const bool rows16 = at == DType::F16 && avx2 && M >= detail::kPromptRows;
  const int64_t tail_bytes = at == DType::Q8_0 ? M * (K / QK) * 4 : rows16 ? M * K * 2 : 0;
  buf.resize(size_t(tail_at + tail_bytes));
  uint8_t* out = buf.data();
  float* scales = reinterpret_cast<float*>(out + tail_at);
  uint16_t* out16 = rows16 ? reinterpret_cast<uint16_t*>(out + tail_at) : nullptr;
  parallel_for(M, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* xm = x + m * K;
      uint8_t* om = out + m * stride;
      float* fm = reinterpret_cast<float*>(om);
      uint16_t* hm = out16 ? out16 + m * K : nullptr;
      switch (at) {
        case DType::F16:
          if (avx2) {
            detail::avx2_round_to_f16(xm, fm, hm, K);
          } else {
            for (int64_t k = 0; k < K; ++k) fm[k] = fp16_to_f32(f32_to_fp16(xm[k]));
          }
          break;
        case DType::BF16:
          for (int64_t k = 0; k < K; ++k) fm[k] = bf16_to_f32(f32_to_bf16(xm[k]));
          break;
        case DType::Q8_0:
          if (avx2)
            detail::avx2_quantize_q8_0(xm, reinterpret_cast<int8_t*>(om), scales + m, M, K);
          else
            quantize_row_q8_0_act(xm, reinterpret_cast<int8_t*>(om), scales + m, M, K);
          break;
        default:
          quantize(DType::Q8_K, xm, om, K);
          break;  // ggml's quantize_row_q8_K is the reference one
      }
    }
  });
  return Act{out, stride, M, K, at == DType::Q8_0 ? scales : nullptr, out16};
}

}  // namespace

uint8_t* detail::thread_scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

namespace {

// ---------------------------------------------------------------------------------------------
// Portable kernels

// f32 weights and the 16-bit floats: x (f32) · w (converted by `cvt`). Each dot product keeps
// 8 partial sums (lane l takes k ≡ l mod 8), adds them pairwise in the order of the AVX2
// horizontal sum, then adds the K mod 8 tail in order.
template <class T, class Cvt>
void float_columns(const Act& a, const uint8_t* w, int64_t w_stride, float* y, int64_t ldy, int64_t n, Cvt cvt) {
  const int64_t K = a.K;
  for (int64_t j = 0; j < n; ++j) {
    const T* wr = reinterpret_cast<const T*>(w + j * w_stride);
    for (int64_t m = 0; m < a.M; ++m) {
      const float* xr = reinterpret_cast<const float*>(a.row(m));
      float acc[8] = {};
      int64_t k = 0;
      for (; k + 8 <= K; k += 8)
        for (int l = 0; l < 8; ++l) acc[l] += xr[k + l] * cvt(wr[k + l]);
      float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
      for (; k < K; ++k) s += xr[k] * cvt(wr[k]);
      y[m * ldy + j] = s;
    }
  }
}

void f32_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  float_columns<float>(a, w, ws, y, ldy, n, [](float v) { return v; });
}
void f16_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  const float* table = half_table();
  float_columns<uint16_t>(a, w, ws, y, ldy, n, [table](uint16_t h) { return table[h]; });
}
void bf16_columns(const Act& a, const uint8_t* w, int64_t ws, float* y, int64_t ldy, int64_t n) {
  float_columns<uint16_t>(a, w, ws, y, ldy, n, [](uint16_t h) { return bf16_to_f32(h); });
}

// Q4_0 / Q5_0 / Q8_0 weights against Q8_0 activations. The weight row is first decoded to
// signed 8-bit values and block scales; then per block Σ q_w·q_x is an exact integer and
// y = Σ_blocks (d_w·d_x)·Σ q_w·q_x in f32, block by block.
void decode_q8_family(DType wt, const uint8_t* w, int64_t nb, int8_t* q, float* d) {
  for (int64_t b = 0; b < nb; ++b, q += QK) {
    if (wt == DType::Q8_0) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(w)[b];
      d[b] = fp16_to_f32(blk.d);
      std::memcpy(q, blk.qs, QK);
    } else if (wt == DType::Q4_0) {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(w)[b];
      d[b] = fp16_to_f32(blk.d);
      for (int l = 0; l < QK / 2; ++l) {
        q[l] = int8_t((blk.qs[l] & 0x0f) - 8);
        q[l + QK / 2] = int8_t((blk.qs[l] >> 4) - 8);
      }
    } else {  // Q5_0
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(w)[b];
      d[b] = fp16_to_f32(blk.d);
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      for (int l = 0; l < QK / 2; ++l) {
        q[l] = int8_t(((blk.qs[l] & 0x0f) | (qh >> l & 1) << 4) - 16);
        q[l + QK / 2] = int8_t(((blk.qs[l] >> 4) | (qh >> (l + 16) & 1) << 4) - 16);
      }
    }
  }
}

template <DType WT>
void q8_family_columns(const Act& a, const uint8_t* w, int64_t w_stride, float* y, int64_t ldy, int64_t n) {
  const int64_t nb = a.K / QK;
  std::vector<int8_t> q(static_cast<size_t>(a.K));
  std::vector<float> d(static_cast<size_t>(nb));
  for (int64_t j = 0; j < n; ++j) {
    decode_q8_family(WT, w + j * w_stride, nb, q.data(), d.data());
    for (int64_t m = 0; m < a.M; ++m) {
      const auto* xq = reinterpret_cast<const int8_t*>(a.row(m));
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int l = 0; l < QK; ++l) isum += int32_t(q[size_t(b * QK + l)]) * xq[b * QK + l];
        acc += d[size_t(b)] * a.scale(m, b) * float(isum);
      }
      y[m * ldy + j] = acc;
    }
  }
}

// K-quant weights against Q8_K activations. A super-block decodes to 256 small integers q
// and, per group of 16 values, an integer scale sc and min mn, so that the weight is
// d·sc·q − dmin·mn. With the activation x = d_x·q8 and its group sums bsum:
//   Σ w·x = (d_x·d)·Σ_g sc_g·Σ q·q8 − (d_x·dmin)·Σ_g mn_g·bsum_g,
// both sums exact integers. Q6_K has no mins: its q already has the −32 offset applied.
struct SuperBlock {
  float d, dmin;
  int16_t sc[16], mn[16];
};

void decode_super_block(const BlockQ6_K& b, int8_t* q, SuperBlock& s) {
  s.d = fp16_to_f32(b.d);
  s.dmin = 0;
  for (int g = 0; g < 16; ++g) s.sc[g] = b.scales[g], s.mn[g] = 0;
  for (int h = 0; h < 2; ++h)  // layout in tensor/quant.cpp
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo0 = b.ql[64 * h + l], lo1 = b.ql[64 * h + l + 32], hi = b.qh[32 * h + l];
      int8_t* qq = q + 128 * h + l;
      qq[0] = int8_t(((lo0 & 0x0f) | (hi & 3) << 4) - 32);
      qq[32] = int8_t(((lo1 & 0x0f) | (hi >> 2 & 3) << 4) - 32);
      qq[64] = int8_t(((lo0 >> 4) | (hi >> 4 & 3) << 4) - 32);
      qq[96] = int8_t(((lo1 >> 4) | (hi >> 6 & 3) << 4) - 32);
    }
}

// Q4_K and Q5_K share the scale packing and the nibble layout (see tensor/quant.cpp).
template <class Block>
void decode_super_block(const Block& b, int8_t* q, SuperBlock& s) {
  s.d = fp16_to_f32(b.d);
  s.dmin = fp16_to_f32(b.dmin);
  const uint8_t* sp = b.scales;
  for (int sb = 0; sb < 8; ++sb) {  // sub-block of 32 values = groups 2sb, 2sb+1
    const int sc = sb < 4 ? sp[sb] & 63 : (sp[sb + 4] & 0x0f) | (sp[sb - 4] >> 6) << 4;
    const int mn = sb < 4 ? sp[sb + 4] & 63 : (sp[sb + 4] >> 4) | (sp[sb] >> 6) << 4;
    s.sc[2 * sb] = s.sc[2 * sb + 1] = int16_t(sc);
    s.mn[2 * sb] = s.mn[2 * sb + 1] = int16_t(mn);
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * (sb / 2) + l];
      int v = sb % 2 ? byte >> 4 : byte & 0x0f;
      if constexpr (std::is_same_v<Block, BlockQ5_K>) v |= (b.qh[l] >> sb & 1) << 4;
      q[32 * sb + l] = int8_t(v);
    }
  }
}

template <class Block>
void k_family_columns(const Act& a, const uint8_t* w, int64_t w_stride, float* y, int64_t ldy, int64_t n) {
  const int64_t nsb = a.K / QK_K;
  std::vector<int8_t> q(static_cast<size_t>(a.K));
  std::vector<SuperBlock> s(static_cast<size_t>(nsb));
  for (int64_t j = 0; j < n; ++j) {
    const Block* wb = reinterpret_cast<const Block*>(w + j * w_stride);
    for (int64_t i = 0; i < nsb; ++i) decode_super_block(wb[i], q.data() + i * QK_K, s[size_t(i)]);
    for (int64_t m = 0; m < a.M; ++m) {
      const auto* xb = reinterpret_cast<const BlockQ8_K*>(a.row(m));
      float acc = 0, acc_min = 0;
      for (int64_t i = 0; i < nsb; ++i) {
        const int8_t* qi = q.data() + i * QK_K;
        int32_t isum = 0, imin = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t gs = 0;
          for (int l = 0; l < 16; ++l) gs += int32_t(qi[16 * g + l]) * xb[i].qs[16 * g + l];
          isum += s[size_t(i)].sc[g] * gs;
          imin += s[size_t(i)].mn[g] * xb[i].bsums[g];
        }
        acc += xb[i].d * s[size_t(i)].d * float(isum);
        acc_min += -xb[i].d * s[size_t(i)].dmin * float(imin);
      }
      y[m * ldy + j] = acc + acc_min;
    }
  }
}

ColumnKernel scalar_column_kernel(DType wt) {
  switch (wt) {
    case DType::F32:
      return f32_columns;
    case DType::F16:
      return f16_columns;
    case DType::BF16:
      return bf16_columns;
    case DType::Q4_0:
      return q8_family_columns<DType::Q4_0>;
    case DType::Q5_0:
      return q8_family_columns<DType::Q5_0>;
    case DType::Q8_0:
      return q8_family_columns<DType::Q8_0>;
    case DType::Q4_K:
      return k_family_columns<BlockQ4_K>;
    case DType::Q5_K:
      return k_family_columns<BlockQ5_K>;
    case DType::Q6_K:
      return k_family_columns<BlockQ6_K>;
    default:
      return nullptr;
  }
}

// The 512-bit float tile's calibration (detail::float_tile_speedup), once per process and dtype.
// It is kept where it is clearly faster: the two tiles give the same bits, and on a CPU that
// splits 512-bit FMAs (Zen 4) they run at about the same speed.
constexpr double kAvx512TileMinSpeedup = 1.1;
struct Calibration {
  DType wt;
  std::once_flag once;
  std::atomic<double> speedup{0};  // 0 until timed
};
Calibration calibrations[] = {{DType::F32, {}, {}}, {DType::F16, {}, {}}, {DType::BF16, {}, {}}};

bool avx512_float_tile(DType wt) {
  if (float_tile() != FloatTile::calibrate) return float_tile() == FloatTile::avx512;
  for (Calibration& c : calibrations)
    if (c.wt == wt) {
      std::call_once(c.once, [&c] { c.speedup = detail::float_tile_speedup(c.wt); });
      return c.speedup >= kAvx512TileMinSpeedup;
    }
  return false;
}

// The kernel of the SIMD path for weights of type wt: the VNNI path has kernels for the
// quantized types (the AVX2 kernels' bits), with AVX512_BF16 for BF16 (its own bits), and the
// 512-bit F32/F16/BF16 prompt tile where chosen (the AVX2 kernels' bits); the other types take
// the AVX2 ones.
NamedKernel column_kernel(Simd path, DType wt) {
  if (path == Simd::avx512vnni) {
    if (NamedKernel k = detail::vnni_column_kernel(wt); k.run) return k;
    if (NamedKernel k = detail::avx512_float_column_kernel(wt); k.run && avx512_float_tile(wt)) return k;
  }
  if (path >= Simd::avx2) return detail::avx2_column_kernel(wt);
  const ColumnKernel k = scalar_column_kernel(wt);
  return {k, k ? "scalar" : nullptr};
}

// The f32 kernel of the types without a kernel of their own: the AVX2 (or scalar) one, which
// reads the rows of x as they are (not packed in pairs for these types).
NamedKernel dequantized_kernel(Simd path) { return column_kernel(std::min(path, Simd::avx2), DType::F32); }

// Types without a kernel of their own: dequantize a few weight rows to f32 and run the f32
// kernel on them (x is f32 for these types).
void dequantizing_columns(ColumnKernel f32, DType wt, const Act& a, const uint8_t* w, int64_t w_stride, float* y,
                          int64_t ldy, int64_t n) {
  constexpr int64_t kRows = 12;
  std::vector<float> buf(size_t(kRows * a.K));
  for (int64_t j = 0; j < n; j += kRows) {
    const int64_t rows = std::min(kRows, n - j);
    for (int64_t r = 0; r < rows; ++r) dequantize(wt, w + (j + r) * w_stride, buf.data() + r * a.K, a.K);
    f32(a, reinterpret_cast<const uint8_t*>(buf.data()), a.K * 4, y + j, ldy, rows);
  }
}

}  // namespace

void matmul_wt_many(const float* x, std::span<const Product> products, int64_t M, int64_t K) {
  for (const Product& p : products) {
    const DTypeInfo& ti = info(p.wt);
    if (!dtype_supported(p.wt))
      throw std::invalid_argument("matmul_wt: weights of type " + std::string(ti.name) + " are not supported");
    if (M < 0 || p.N < 0 || K < 0 || K % ti.block_size != 0)
      throw std::invalid_argument("matmul_wt: K = " + std::to_string(K) + " is not a multiple of the " +
                                  std::string(ti.name) + " block size " + std::to_string(ti.block_size));
  }
  if (M == 0) return;
  const Simd path = simd();
  const bool avx2 = path >= Simd::avx2;
  ColumnKernel f32 = dequantized_kernel(path).run;

  // x converted once per activation format the weights ask for (rarely more than one), and for
  // a prompt (M ≥ 4) packed in pairs of rows once where a kernel reads them (row_pairs).
  struct Converted {
    DType at;
    Act act;
    Act paired;  // act with its pairs, once packed
  };
  thread_local std::vector<std::vector<uint8_t>> act_bufs;
  thread_local std::vector<std::vector<float>> pair_bufs;
  std::vector<Converted> converted;
  converted.reserve(products.size());  // units point into it
  auto activations = [&](DType at, bool row_pairs) -> const Act& {
    Converted* c = nullptr;
    for (Converted& d : converted)
      if (d.at == at) c = &d;
    if (!c) {
      if (act_bufs.size() <= converted.size()) act_bufs.resize(converted.size() + 1);
      const Act act = convert_activations(x, at, M, K, avx2, act_bufs[converted.size()]);
      c = &converted.emplace_back(Converted{at, act, act});
    }
    if (!row_pairs || M < 4) return c->act;
    if (!c->paired.pairs) {
      const size_t i = size_t(c - converted.data());
      if (pair_bufs.size() <= i) pair_bufs.resize(i + 1);
      std::vector<float>& buf = pair_bufs[i];
      const int64_t pairs = (M + 1) / 2;
      buf.resize(size_t(pairs * 2 * (K / 8 * 8)));
      parallel_for(pairs, std::max<int64_t>(1, 8192 / std::max<int64_t>(K, 1)),
                   [&](int64_t p0, int64_t p1) { detail::pack_row_pairs(c->act, buf.data(), p0, p1); });
      c->paired.pairs = buf.data();
    }
    return c->paired;
  };

  // Work units: runs of columns of one product. At least ~32k multiply-adds each (smaller
  // products stay on the calling thread). A decode step (M < 4) reads the weights once, so a
  // product takes 2 long runs per thread: long sequential streams for the prefetcher. Multiples
  // of 12 columns keep the prompt tiles (2, 3, 4 or 6 columns wide) full.
  struct Unit {
    const Product* p;
    const Act* act;
    ColumnKernel kernel;
    int64_t n0, n1;
  };
  std::vector<Unit> units;
  units.reserve(products.size() * 2 * size_t(num_threads()));  // a decode step's, in one allocation
  for (const Product& p : products) {
    if (p.N == 0) continue;
    const NamedKernel kernel = column_kernel(path, p.wt);
    const Act& act = activations(activation_dtype(p.wt), kernel.row_pairs);
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, M * K));
    if (M < 4) grain = std::max(grain, (p.N + 2 * num_threads() - 1) / (2 * num_threads()));
    grain = (grain + 11) / 12 * 12;
    for (int64_t n0 = 0; n0 < p.N; n0 += grain) units.push_back({&p, &act, kernel.run, n0, std::min(p.N, n0 + grain)});
  }
  parallel_for(int64_t(units.size()), 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const Unit& t = units[size_t(u)];
      const int64_t w_stride = row_bytes(t.p->wt, K);
      const uint8_t* w = static_cast<const uint8_t*>(t.p->w) + t.n0 * w_stride;
      if (t.kernel)
        t.kernel(*t.act, w, w_stride, t.p->y + t.n0, t.p->N, t.n1 - t.n0);
      else
        dequantizing_columns(f32, t.p->wt, *t.act, w, w_stride, t.p->y + t.n0, t.p->N, t.n1 - t.n0);
    }
  });
}

std::string matmul_kernel_name(DType wt) {
  if (!dtype_supported(wt))
    throw std::invalid_argument("matmul_wt: weights of type " + std::string(info(wt).name) + " are not supported");
  const Simd path = simd();
  if (const NamedKernel k = column_kernel(path, wt); k.run) return k.name;
  return std::string("dequantize to f32, ") + dequantized_kernel(path).name;
}

std::string float_tile_choice() {
  if (simd() != Simd::avx512vnni) return "avx2: the avx512vnni path is not in use";
  if (float_tile() != FloatTile::calibrate) return float_tile() == FloatTile::avx512 ? "avx512: set" : "avx2: set";
  std::string s = "calibrated:";
  for (const Calibration& c : calibrations)
    if (const double speedup = c.speedup; speedup > 0) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, " %.2fx,", speedup);
      s += " " + std::string(name(c.wt)) + (speedup >= kAvx512TileMinSpeedup ? " avx512" : " avx2") + ratio;
    }
  if (s.back() == ',') s.pop_back();
  return s == "calibrated:" ? "calibrated at first use (no F32/F16/BF16 product yet)" : s;
}

void matmul_wt(const float* x, const void* w, DType wt, float* y, int64_t M, int64_t N, int64_t K) {
  const Product p{.w = w, .wt = wt, .y = y, .N = N};
  matmul_wt_many(x, std::span<const Product>(&p, 1), M, K);
}

}  // namespace toy::kernels
