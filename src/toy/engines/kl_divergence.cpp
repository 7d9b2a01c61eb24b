// engines/kl_divergence.cpp — llama-perplexity's base file and its KL-divergence sums (see the header).
#include "toy/engines/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "toy/engines/eval.h"

namespace toy {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr double kFloor = -16;  // nats below the likeliest token that a row keeps

// The row's two header floats.
float header_float(std::span<const uint16_t> row, size_t i) {
  float x;
  std::memcpy(&x, row.data() + 2 * i, sizeof x);
  return x;
}

// mean and its uncertainty from Σx, Σx² (llama.cpp: none below 11 values).
KlDivergence::Estimate mean_and_uncertainty(double sum, double sum2, int64_t n) {
  if (n < 1) return {};
  const double mean = sum / double(n), var = sum2 / double(n) - mean * mean;
  return {mean, var > 0 && n > 10 ? std::sqrt(var / double(n - 1)) : 0.0};
}

double covariance(double sum_a, double sum_b, double sum_ab, int64_t n) {
  if (n < 10) return 0;
  return (sum_ab / double(n) - (sum_a / double(n)) * (sum_b / double(n))) / double(n - 1);
}

// The value at `fraction` of the sorted values, interpolated between neighbours.
double percentile(const std::vector<double>& sorted, double fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double at = fraction * double(sorted.size() - 1);
  const size_t i = size_t(at);
  const double t = at - double(i);
  return (1 - t) * sorted[i] + t * sorted[std::min(i + 1, sorted.size() - 1)];
}

template <class T>
void read_exactly(std::FILE* f, T* out, size_t n, const std::string& path, const char* what) {
  if (std::fread(out, sizeof(T), n, f) != n) throw std::runtime_error(path + ": the file ends inside " + what);
}

}  // namespace

size_t kl_row_size(int64_t n_vocab) { return size_t(2 * ((n_vocab + 1) / 2) + 4); }

int64_t kl_rows_per_chunk(int64_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

std::vector<uint16_t> encode_log_probs(std::span<const float> z) {
  const float top = *std::max_element(z.begin(), z.end());
  const float low = std::max(*std::min_element(z.begin(), z.end()), top + float(kFloor));
  const float m = float(double(low) - log_sum_exp(z));  // log p of the lowest kept logit
  const float scale = (top - low) / 65535.0f;
  std::vector<uint16_t> row(kl_row_size(int64_t(z.size())), 0);
  std::memcpy(row.data(), &scale, sizeof scale);
  std::memcpy(row.data() + 2, &m, sizeof m);
  if (scale > 0)
    for (size_t i = 0; i < z.size(); ++i)
      if (z[i] > low) row[4 + i] = uint16_t(std::lround((z[i] - low) / scale));
  return row;
}

KlBaseHeader read_kl_base_header(std::FILE* f, const std::string& path) {
  char magic[8];
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    throw std::runtime_error(path + ": not a log-probability file (llama-perplexity --kl-divergence-base's)");
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0, n_chunk = 0;
  read_exactly(f, &n_ctx, 1, path, "the header");
  read_exactly(f, &n_vocab, 1, path, "the header");
  read_exactly(f, &n_chunk, 1, path, "the header");
  if (n_ctx < 3 || n_ctx > (1u << 24) || n_vocab < 1 || n_chunk < 1)
    throw std::runtime_error(path + ": the header says n_ctx " + std::to_string(n_ctx) + ", n_vocab " +
                             std::to_string(n_vocab) + ", n_chunk " + std::to_string(n_chunk) +
                             " (needs n_ctx ≥ 3 and at least one chunk)");
  KlBaseHeader h{.n_ctx = int64_t(n_ctx), .n_vocab = n_vocab, .n_chunk = n_chunk, .tokens = {}};
  // The length the header promises, checked before anything is read or run.
  const long here = std::ftell(f);
  const double expected = 20.0 + 4.0 * double(h.n_ctx) * double(h.n_chunk) +
                          2.0 * double(kl_row_size(h.n_vocab)) * double(kl_rows_per_chunk(h.n_ctx)) * double(h.n_chunk);
  if (std::fseek(f, 0, SEEK_END) != 0) throw std::runtime_error(path + ": cannot seek (a regular file is needed)");
  const long size = std::ftell(f);
  if (double(size) != expected)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, but its header (n_ctx " +
                             std::to_string(h.n_ctx) + ", n_vocab " + std::to_string(h.n_vocab) + ", n_chunk " +
                             std::to_string(h.n_chunk) + ") needs " + std::to_string((long long)expected));
  std::fseek(f, here, SEEK_SET);
  h.tokens.resize(size_t(h.n_ctx * h.n_chunk));
  read_exactly(f, h.tokens.data(), h.tokens.size(), path, "the tokens");
  for (int32_t t : h.tokens)
    if (t < 0 || t >= n_vocab)
      throw std::runtime_error(path + ": token " + std::to_string(t) + " is outside the vocabulary [0, " +
                               std::to_string(n_vocab) + ")");
  return h;
}

void write_kl_base_header(std::FILE* f, const KlBaseHeader& h) {
  const uint32_t n_ctx = uint32_t(h.n_ctx);
  const int32_t n_vocab = int32_t(h.n_vocab), n_chunk = int32_t(h.n_chunk);
  std::fwrite(kMagic, 1, 8, f);
  std::fwrite(&n_ctx, sizeof n_ctx, 1, f);
  std::fwrite(&n_vocab, sizeof n_vocab, 1, f);
  std::fwrite(&n_chunk, sizeof n_chunk, 1, f);
  std::fwrite(h.tokens.data(), sizeof(int32_t), h.tokens.size(), f);
}

void KlDivergence::add(std::span<const float> z, std::span<const uint16_t> base, int32_t token) {
  // Q, the model: log q_i = z_i − lse.
  const size_t top = size_t(std::max_element(z.begin(), z.end()) - z.begin());
  const double lse = log_sum_exp(z);
  const double nll = lse - double(z[size_t(token)]);
  // P, the base: log p_i = scale · q_i + m.
  const double scale = header_float(base, 0), m = header_float(base, 1);
  const std::span<const uint16_t> q = base.subspan(4, z.size());
  const double nll_base = -(scale * q[size_t(token)] + m);
  // KL(P‖Q) = Σ p_i (log p_i − log q_i), over the base's kept range.
  double kl = 0;
  size_t top_base = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double log_p = scale * q[i] + m;
    if (q[i] > q[top_base]) top_base = i;
    if (log_p > kFloor) kl += std::exp(log_p) * (log_p - (double(z[i]) - lse));
  }
  const double p_diff = std::exp(-nll) - std::exp(-nll_base);
  nll_ += nll, nll2_ += nll * nll, nll_base_ += nll_base, nll_base2_ += nll_base * nll_base;
  nll_nll_base_ += nll * nll_base;
  kld_sum_ += kl, kld2_ += kl * kl;
  p_diff_ += p_diff, p_diff2_ += p_diff * p_diff, p_diff4_ += p_diff * p_diff * p_diff * p_diff;
  same_top_ += top == top_base;
  kld_.push_back(kl);
  p_diffs_.push_back(p_diff);
}

KlDivergence::Summary KlDivergence::summary() const {
  Summary s;
  s.count = count();
  if (s.count == 0) return s;
  const int64_t n = s.count;
  const Estimate log_ppl = mean_and_uncertainty(nll_, nll2_, n),
                 log_base = mean_and_uncertainty(nll_base_, nll_base2_, n);
  const double cov = covariance(nll_, nll_base_, nll_nll_base_, n);
  s.ppl = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.uncertainty};
  s.ppl_base = {std::exp(log_base.value), std::exp(log_base.value) * log_base.uncertainty};
  s.log_ppl_correlation =
      log_ppl.uncertainty > 0 && log_base.uncertainty > 0 ? cov / (log_ppl.uncertainty * log_base.uncertainty) : 0;
  const double ratio_unc = std::sqrt(
      std::max(0.0, log_ppl.uncertainty * log_ppl.uncertainty + log_base.uncertainty * log_base.uncertainty - 2 * cov));
  s.log_ppl_ratio = {log_ppl.value - log_base.value, ratio_unc};
  s.ppl_ratio = {std::exp(s.log_ppl_ratio.value), std::exp(s.log_ppl_ratio.value) * ratio_unc};
  const double ppl_cov = s.ppl.value * s.ppl_base.value * cov;
  s.ppl_diff = {s.ppl.value - s.ppl_base.value,
                std::sqrt(std::max(0.0, s.ppl.uncertainty * s.ppl.uncertainty +
                                            s.ppl_base.uncertainty * s.ppl_base.uncertainty - 2 * ppl_cov))};
  s.kld = mean_and_uncertainty(kld_sum_, kld2_, n);
  s.p_diff = mean_and_uncertainty(p_diff_, p_diff2_, n);
  const Estimate mse = mean_and_uncertainty(p_diff2_, p_diff4_, n);
  const double rms = std::sqrt(mse.value);
  s.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * mse.uncertainty : 0};
  const double same = double(same_top_) / double(n);
  s.same_top = {same, n > 1 ? std::sqrt(same * (1 - same) / double(n - 1)) : 0};
  std::vector<double> kld = kld_, p_diff = p_diffs_;
  std::sort(kld.begin(), kld.end());
  std::sort(p_diff.begin(), p_diff.end());
  for (double f : {1.0, 0.999, 0.99, 0.95, 0.90, 0.5, 0.10, 0.05, 0.01, 0.001, 0.0})
    s.kld_percentiles.emplace_back(f, percentile(kld, f));
  for (double f : {1.0, 0.999, 0.99, 0.95, 0.90, 0.75, 0.5, 0.25, 0.10, 0.05, 0.01, 0.001, 0.0})
    s.p_diff_percentiles.emplace_back(f, percentile(p_diff, f));
  return s;
}

}  // namespace toy
