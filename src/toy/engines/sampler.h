// engines/sampler.h — L4: a row of logits → a token id, through llama.cpp's chain of samplers.
//
// The candidates start as the whole vocabulary (logit bias added, banned tokens dropped). Each
// stage of the chain either changes their logits (penalties, DRY, temperature) or keeps some of
// them (top-n-σ, top-k, typical-p, top-p, min-p, XTC); the stages that look at probabilities take
// the softmax of the candidates left at that point. The last step draws one candidate from the
// softmax of what is left, with the next number of the random stream. Mirostat (v1 or v2) replaces
// the chain: temperature, then a cut that steers the surprise of the drawn tokens towards tau.
//
// The random stream is std::mt19937_64 seeded with `seed`; a uniform number in [0, 1) is the top
// 53 bits of one output. XTC draws one when it is on; the final draw one. The candidates are kept
// in id order, and every sum runs in that order, so the same seed and logits give the same ids.
// tests/reference/samplers.py implements the same rules independently (NumPy) on the same stream.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace toy {

class Tokenizer;

enum class SamplerStage { Penalties, Dry, TopNSigma, TopK, TypicalP, TopP, MinP, Xtc, Temperature };

// llama.cpp's default order: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature.
std::vector<SamplerStage> default_sampler_chain();
// llama.cpp's --samplers: names separated by ';' (top_k, top-k or topk; typ_p, typical_p or typical; …).
// Throws std::invalid_argument naming an unknown one.
std::vector<SamplerStage> parse_sampler_names(std::string_view names);
// llama.cpp's --sampling-seq: one letter a stage (e d s k y p m x t). Throws std::invalid_argument.
std::vector<SamplerStage> parse_sampler_letters(std::string_view letters);
std::string sampler_chain_names(std::span<const SamplerStage> chain);  // "top_k;temperature"

struct SamplerConfig {
  float temperature = 0.8f;     // ≤ 0 → greedy: the most likely token after logit bias, penalties and DRY
  int top_k = 40;               // 0 → all
  float top_p = 0.95f;          // 1 → off
  float min_p = 0.05f;          // 0 → off; keeps tokens with p ≥ min_p · p_max
  float typical_p = 1.0f;       // 1 → off; keeps the tokens whose surprise is nearest the entropy, this much mass
  float top_n_sigma = -1;       // ≤ 0 → off; keeps logits within n standard deviations of the largest
  float xtc_probability = 0;    // 0 → off; how often XTC removes the likeliest tokens…
  float xtc_threshold = 0.1f;   // …all those with p ≥ threshold but the least likely of them (> 0.5 → off)
  int min_keep = 0;             // top-p, min-p, typical-p and XTC keep at least this many
  float repeat_penalty = 1.0f;  // 1 → off; divides positive / multiplies negative logits of recent tokens
  int repeat_last_n = 64;       // how many recent tokens the penalties look at (-1: all)
  float frequency_penalty = 0;  // minus count × this, for each token in that window
  float presence_penalty = 0;   // minus this, for each token in that window
  // DRY ("don't repeat yourself"): a token that would extend a repeat of the last tokens, longer
  // than allowed_length, loses multiplier · base^(length − allowed_length).
  float dry_multiplier = 0;  // 0 → off
  float dry_base = 1.75f;
  int dry_allowed_length = 2;
  int dry_penalty_last_n = 64;  // how many recent tokens DRY scans (0: off, -1: all)
  // Token sequences that end a repeat (dry_breakers() makes them from text): a one-token sequence
  // is never penalised and stops the scan; longer ones stop it where they occur.
  std::vector<std::vector<int32_t>> dry_sequence_breakers = {};
  int mirostat = 0;           // 0: the chain; 1 or 2: Mirostat v1 / v2 after the temperature
  float mirostat_tau = 5.0f;  // target surprise, bits
  float mirostat_eta = 0.1f;  // learning rate
  std::vector<std::pair<int32_t, float>> logit_bias = {};  // added first; -inf bans a token
  std::vector<SamplerStage> chain = default_sampler_chain();
  uint64_t seed = 0;
};

// Turns logits into a token id. Reproducible: the same seed and logits give the same ids.
class Sampler {
 public:
  explicit Sampler(SamplerConfig c);
  // `history`: the tokens so far (prompt and generated), which the penalties and DRY look at.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  const SamplerConfig& config() const { return c_; }

 private:
  double uniform();  // the next number of the stream, in [0, 1)

  SamplerConfig c_;
  std::mt19937_64 rng_;
  double mu_;  // Mirostat's running cut: 2·tau at the start
  // DRY's sequence breakers by their first token: the rest of each (empty for one token).
  std::unordered_multimap<int32_t, std::vector<int32_t>> breakers_;
};

int32_t argmax(std::span<const float> logits);

// llama.cpp's DRY breakers as token sequences: every token whose text holds the string is a
// breaker alone; a token whose text ends with the string's start, followed by the tokens of the
// string's rest (at most 20), is one too.
std::vector<std::vector<int32_t>> dry_breakers(const Tokenizer& t, const std::vector<std::string>& strings);
const std::vector<std::string>& default_dry_breakers();  // llama.cpp's: "\n", ":", "\"", "*"

}  // namespace toy
