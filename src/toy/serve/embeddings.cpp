// serve/embeddings.cpp — pooling, normalisation and base64 of embeddings (see embeddings.h).
#include "toy/serve/embeddings.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "toy/primitives/device.h"

namespace toy::serve {

std::optional<Pooling> pooling_named(std::string_view name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  return std::nullopt;
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

std::optional<Pooling> pooling_from_gguf(int64_t type) {
  switch (type) {
    case 1:
      return Pooling::Mean;
    case 2:
      return Pooling::Cls;
    case 3:
      return Pooling::Last;
    default:
      return std::nullopt;
  }
}

std::vector<float> embed(const Model& model, std::span<const int32_t> ids, Pooling pooling) {
  const int64_t T = int64_t(ids.size()), D = model.config().d_model;
  NoGrad no_grad;
  // No KV cache: the input attends to itself, from position 0. The last token alone needs only
  // its own row of the output norm (last_logits).
  const Ctx ctx{.seqs = {Seq{}}, .last_logits = pooling == Pooling::Last, .hidden_states = true};
  const Tensor hidden = to_host(model.forward(Tensor::from_ids({1, T}, ids), ctx));  // [1, T or 1, D]
  const float* h = hidden.data();
  std::vector<float> pooled(size_t(D), 0.0f);  // [D]
  if (pooling == Pooling::Mean) {
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0;
      for (int64_t t = 0; t < T; ++t) sum += h[t * D + d];
      pooled[size_t(d)] = float(sum / double(T));
    }
  } else {  // cls: row 0; last: the only row computed
    std::memcpy(pooled.data(), h, size_t(D) * sizeof(float));
  }
  // llama.cpp's Euclidean normalisation, to the letter: float squares summed in double, one
  // float factor.
  double sum_sq = 0;
  for (float x : pooled) sum_sq += x * x;
  const float scale = sum_sq > 0 ? float(1.0 / std::sqrt(sum_sq)) : 0.0f;
  for (float& x : pooled) x *= scale;
  return pooled;
}

std::string base64_floats(std::span<const float> v) {
  static_assert(std::endian::native == std::endian::little, "float32 bytes are sent little-endian");
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
  const size_t n = v.size_bytes();
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b0 = bytes[i], b1 = i + 1 < n ? bytes[i + 1] : 0, b2 = i + 2 < n ? bytes[i + 2] : 0;
    const uint32_t group = b0 << 16 | b1 << 8 | b2;  // 24 bits -> four 6-bit digits
    out += kAlphabet[group >> 18 & 63];
    out += kAlphabet[group >> 12 & 63];
    out += i + 1 < n ? kAlphabet[group >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[group & 63] : '=';
  }
  return out;
}

}  // namespace toy::serve
