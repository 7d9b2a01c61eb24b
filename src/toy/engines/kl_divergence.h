// engines/kl_divergence.h — L4: how far a model's next-token distributions Q are from a base
// model's P over the same text, as `llama-perplexity --kl-divergence` reports it: the mean
// KL(P‖Q) per token with its uncertainty and percentiles, Δp = q(token) − p(token), how often the
// two agree on the likeliest token, and both perplexities.
//
// The base run saves its log-probabilities in llama-perplexity's --kl-divergence-base file, so
// each tool reads the other's:
//   "_logits_"  u32 n_ctx  i32 n_vocab  i32 n_chunk  i32 tokens[n_chunk · n_ctx]
//   then for each chunk, for each scored position (n_ctx/2 … n_ctx − 2: n_ctx − 1 − n_ctx/2 rows)
//   a row of 2·⌈n_vocab/2⌉ + 4 uint16: f32 scale, f32 m, then q[n_vocab] with
//   log p_i ≈ scale · q_i + m over the 16 nats below the likeliest (anything lower reads as m).
// 16 bits a token of the vocabulary: a quarter of the float32 logits (llama.cpp's compaction;
// the tail below 16 nats, which the KL sum skips, is what is lost). Little-endian, as written.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace toy {

struct KlBaseHeader {
  int64_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;  // n_chunk · n_ctx, as read from the text (no BOS put in)
};

// The uint16 of one row (header floats first) for a row of logits.
size_t kl_row_size(int64_t n_vocab);  // 2·⌈n_vocab/2⌉ + 4
std::vector<uint16_t> encode_log_probs(std::span<const float> logits);

// The rows a chunk of n_ctx tokens scores: positions n_ctx/2 … n_ctx − 2.
int64_t kl_rows_per_chunk(int64_t n_ctx);

// Reads and checks a base file's header and tokens (magic, sizes, the file's length, token ids
// inside the vocabulary). Throws std::runtime_error naming what is wrong.
KlBaseHeader read_kl_base_header(std::FILE* f, const std::string& path);
void write_kl_base_header(std::FILE* f, const KlBaseHeader& h);

// The sums llama-perplexity keeps, one scored position at a time.
class KlDivergence {
 public:
  // `logits`: the model's row at a position; `base`: the base file's row there; `token`: the
  // token that follows.
  void add(std::span<const float> logits, std::span<const uint16_t> base, int32_t token);

  struct Estimate {
    double value = 0, uncertainty = 0;
  };
  struct Summary {
    int64_t count = 0;
    Estimate ppl, ppl_base, log_ppl_ratio, ppl_ratio, ppl_diff, kld, p_diff, p_diff_rms, same_top;
    double log_ppl_correlation = 0;
    std::vector<std::pair<double, double>> kld_percentiles;     // (fraction, KLD): 1, .999, … 0 with the median
    std::vector<std::pair<double, double>> p_diff_percentiles;  // (fraction, Δp)
  };
  Summary summary() const;
  int64_t count() const { return int64_t(kld_.size()); }

 private:
  double nll_ = 0, nll2_ = 0, nll_base_ = 0, nll_base2_ = 0, nll_nll_base_ = 0;
  double kld_sum_ = 0, kld2_ = 0, p_diff_ = 0, p_diff2_ = 0, p_diff4_ = 0;
  int64_t same_top_ = 0;
  std::vector<double> kld_, p_diffs_;  // per position, for the percentiles
};

}  // namespace toy
