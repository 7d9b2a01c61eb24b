// engines/sampler.cpp — the stages of the sampling chain, one function each (see sampler.h).
#include "toy/engines/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "toy/tokenizer/tokenizer.h"

namespace toy {
namespace {

struct Candidate {
  int32_t id;
  float logit;
};
using Candidates = std::vector<Candidate>;  // always in id order

struct Stage {
  std::string_view name;
  char letter;
  SamplerStage stage;
};
constexpr Stage kStages[] = {
    {"penalties", 'e', SamplerStage::Penalties},
    {"dry", 'd', SamplerStage::Dry},
    {"top_n_sigma", 's', SamplerStage::TopNSigma},
    {"top_k", 'k', SamplerStage::TopK},
    {"typ_p", 'y', SamplerStage::TypicalP},
    {"top_p", 'p', SamplerStage::TopP},
    {"min_p", 'm', SamplerStage::MinP},
    {"xtc", 'x', SamplerStage::Xtc},
    {"temperature", 't', SamplerStage::Temperature},
};

// softmax of the candidates' logits, in their order
std::vector<double> probabilities(const Candidates& c) {
  double top = -std::numeric_limits<double>::infinity();
  for (const Candidate& x : c) top = std::max(top, double(x.logit));
  std::vector<double> p(c.size());
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) total += p[i] = std::exp(double(c[i].logit) - top);
  for (double& x : p) x /= total;
  return p;
}

// The candidates' positions, likeliest first (ties: the lower id), sorted only as far as asked:
// a cut after a few dozen of a whole vocabulary costs O(V), not O(V log V).
class Ranking {
 public:
  explicit Ranking(const Candidates& c) : c_(c), order_(c.size()) { std::iota(order_.begin(), order_.end(), 0); }
  size_t operator[](size_t i) {  // the position of the i-th likeliest
    if (i >= sorted_) {
      const auto end = order_.begin() + long(std::min(order_.size(), std::max(i + 1, 2 * sorted_ + 64)));
      std::nth_element(order_.begin() + long(sorted_), end - 1, order_.end(), better_);
      std::sort(order_.begin() + long(sorted_), end, better_);
      sorted_ = size_t(end - order_.begin());
    }
    return order_[i];
  }

 private:
  struct Better {
    const Candidates& c;
    bool operator()(size_t a, size_t b) const { return c[a].logit > c[b].logit || (c[a].logit == c[b].logit && a < b); }
  };
  const Candidates& c_;
  std::vector<size_t> order_;
  Better better_{c_};
  size_t sorted_ = 0;
};

// The candidates at these positions, back in id order.
Candidates keep(const Candidates& c, std::vector<size_t> positions) {
  std::sort(positions.begin(), positions.end());
  Candidates kept;
  kept.reserve(positions.size());
  for (size_t i : positions) kept.push_back(c[i]);
  return kept;
}

Candidates keep_likeliest(const Candidates& c, Ranking& rank, size_t n) {  // the n likeliest, by rank
  std::vector<size_t> positions;
  for (size_t i = 0; i < std::min(n, c.size()); ++i) positions.push_back(rank[i]);
  return keep(c, std::move(positions));
}

Candidates keep_likeliest(const Candidates& c, size_t n) {
  Ranking rank(c);
  return keep_likeliest(c, rank, n);
}

// The last n tokens of the history (all of them for n < 0).
std::span<const int32_t> window(std::span<const int32_t> history, int n) {
  return n < 0 || size_t(n) >= history.size() ? history : history.last(size_t(n));
}

// Repeat, frequency and presence penalties on the tokens seen in the window.
void penalise(Candidates& c, const SamplerConfig& s, std::span<const int32_t> history) {
  if (s.repeat_last_n == 0 || (s.repeat_penalty == 1 && s.frequency_penalty == 0 && s.presence_penalty == 0)) return;
  std::unordered_map<int32_t, int> count;
  for (int32_t id : window(history, s.repeat_last_n)) ++count[id];
  for (Candidate& x : c) {
    const auto it = count.find(x.id);
    if (it == count.end()) continue;
    x.logit = x.logit <= 0 ? x.logit * s.repeat_penalty : x.logit / s.repeat_penalty;
    x.logit -= float(it->second) * s.frequency_penalty + s.presence_penalty;
  }
}

// z[k] = the length of the longest common prefix of r and r[k:] (the Z-function), in O(n).
std::vector<int> z_function(const std::vector<int32_t>& r) {
  const int n = int(r.size());
  std::vector<int> z(r.size(), 0);
  for (int k = 1, lt = 0, rt = 0; k < n; ++k) {  // [lt, rt): the rightmost match found so far
    if (k < rt) z[size_t(k)] = std::min(rt - k, z[size_t(k - lt)]);
    while (k + z[size_t(k)] < n && r[size_t(z[size_t(k)])] == r[size_t(k + z[size_t(k)])]) ++z[size_t(k)];
    if (k + z[size_t(k)] > rt) lt = k, rt = k + z[size_t(k)];
  }
  return z;
}

// DRY: for each earlier place where the window's last L tokens also occur (L ≥ allowed_length,
// not reaching back past the last sequence breaker), the token that followed them there would
// extend the repeat to L + 1: it loses multiplier · base^(L − allowed_length), L its longest.
void dry(Candidates& c, const SamplerConfig& s, const std::unordered_multimap<int32_t, std::vector<int32_t>>& breakers,
         std::span<const int32_t> history) {
  if (s.dry_multiplier == 0 || s.dry_base < 1 || s.dry_penalty_last_n == 0) return;
  const std::span<const int32_t> w = window(history, s.dry_penalty_last_n);
  const int n = int(w.size());
  if (n <= s.dry_allowed_length) return;
  auto back = [&](int i) { return w[size_t(n - 1 - i)]; };  // i tokens before the last
  // A repeat may not reach back over a breaker: the longest one that ends i tokens back.
  int limit = n;
  for (int i = 0; i < n && limit == n; ++i) {
    const auto [from, to] = breakers.equal_range(back(i));
    int longest = -1;
    for (auto it = from; it != to; ++it) {
      const int len = int(it->second.size());  // the breaker's tokens after its first
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int o = 0; o < len && match; ++o) match = it->second[size_t(o)] == back(i - o - 1);
      if (match) longest = len;
    }
    if (longest >= 0) limit = i - longest;
  }
  if (limit < s.dry_allowed_length) return;
  // The window reversed: its prefixes are the window's suffixes, so z[k] is how many tokens
  // before position n − 1 − k match the window's last ones.
  const std::vector<int32_t> reversed(w.rbegin(), w.rend());
  const std::vector<int> z = z_function(reversed);
  std::unordered_map<int32_t, int> longest;  // token → the longest repeat it would extend
  for (int k = 1; k < n; ++k) {
    const int len = std::min(z[size_t(k)], limit);
    if (len < s.dry_allowed_length) continue;
    const int32_t next = w[size_t(n - k)];  // what followed the repeat ending at n − 1 − k
    longest[next] = std::max(longest[next], len);
  }
  // base^exponent stays finite in float: the exponent is capped at log(FLT_MAX) / log(base).
  const int max_exponent = s.dry_base > 1.000001f ? int(88.7228391f / std::log(s.dry_base)) : 0;
  for (Candidate& x : c) {
    const auto it = longest.find(x.id);
    if (it == longest.end()) continue;
    const auto [from, to] = breakers.equal_range(x.id);
    if (std::any_of(from, to, [](const auto& b) { return b.second.empty(); })) continue;  // a breaker itself
    int exponent = it->second - s.dry_allowed_length;
    if (max_exponent > 0) exponent = std::min(exponent, max_exponent);
    x.logit = float(double(x.logit) - double(s.dry_multiplier) * std::pow(double(s.dry_base), exponent));
  }
}

// top-n-σ: keeps the logits within n standard deviations of the largest.
Candidates top_n_sigma(const Candidates& c, float n) {
  if (n <= 0 || c.size() <= 1) return c;
  double top = c[0].logit, sum = 0, squares = 0;
  for (const Candidate& x : c) top = std::max(top, double(x.logit)), sum += x.logit;
  const double mean = sum / double(c.size());
  for (const Candidate& x : c) squares += (x.logit - mean) * (x.logit - mean);
  const double cut = top - n * std::sqrt(squares / double(c.size()));
  Candidates kept;
  for (const Candidate& x : c)
    if (x.logit >= cut) kept.push_back(x);
  return kept;
}

// top-p (nucleus): the likeliest tokens whose mass first reaches p.
Candidates top_p(const Candidates& c, float p, size_t min_keep) {
  if (p >= 1) return c;
  const std::vector<double> prob = probabilities(c);
  Ranking rank(c);
  double mass = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    mass += prob[rank[i]];
    if (mass >= p && i + 1 >= min_keep) return keep_likeliest(c, rank, i + 1);
  }
  return c;
}

// min-p: the tokens at least p times as likely as the likeliest.
Candidates min_p(const Candidates& c, float p, size_t min_keep) {
  if (p <= 0) return c;
  const std::vector<double> prob = probabilities(c);
  const double cut = p * *std::max_element(prob.begin(), prob.end());
  Candidates kept;
  for (size_t i = 0; i < c.size(); ++i)
    if (prob[i] >= cut) kept.push_back(c[i]);
  return kept.size() >= min_keep ? kept : keep_likeliest(c, min_keep);
}

// Locally typical sampling: the tokens whose surprise −log p is nearest the entropy H, nearest
// first, until their mass exceeds p.
Candidates typical_p(const Candidates& c, float p, size_t min_keep) {
  if (p >= 1) return c;
  const std::vector<double> prob = probabilities(c);
  double entropy = 0;
  for (double q : prob)
    if (q > 0) entropy -= q * std::log(q);
  std::vector<double> distance(c.size());
  for (size_t i = 0; i < c.size(); ++i) distance[i] = std::abs(-std::log(prob[i]) - entropy);
  std::vector<size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return distance[a] < distance[b]; });
  double mass = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    mass += prob[order[i]];
    if (mass > p && i + 1 >= min_keep) {
      order.resize(i + 1);
      break;
    }
  }
  return keep(c, std::move(order));
}

// XTC ("exclude top choices"): all tokens with p ≥ threshold but the least likely of them go.
Candidates xtc(const Candidates& c, float threshold, size_t min_keep) {
  const std::vector<double> prob = probabilities(c);
  Ranking rank(c);
  size_t above = 0;  // how many of the likeliest have p ≥ threshold
  while (above < c.size() && prob[rank[above]] >= threshold) ++above;
  if (above < 2 || c.size() - (above - 1) < min_keep) return c;
  std::vector<size_t> rest;
  for (size_t i = above - 1; i < c.size(); ++i) rest.push_back(rank[i]);
  return keep(c, std::move(rest));
}

}  // namespace

std::vector<SamplerStage> default_sampler_chain() {
  std::vector<SamplerStage> chain;
  for (const Stage& s : kStages) chain.push_back(s.stage);
  return chain;
}

std::vector<SamplerStage> parse_sampler_names(std::string_view names) {
  // llama.cpp's spellings: the name, with '-' for '_', without '_', and three more.
  auto squash = [](std::string_view s) {
    std::string out;
    for (char ch : s)
      if (ch != '_' && ch != '-') out += char(std::tolower(static_cast<unsigned char>(ch)));
    return out;
  };
  std::vector<SamplerStage> chain;
  size_t begin = 0;
  while (begin <= names.size()) {
    const size_t end = std::min(names.find(';', begin), names.size());
    const std::string name = squash(names.substr(begin, end - begin));
    begin = end + 1;
    if (name.empty()) continue;
    const Stage* found = nullptr;
    for (const Stage& s : kStages)
      if (squash(s.name) == name) found = &s;
    if (name == "nucleus") found = &kStages[5];
    if (name == "temp") found = &kStages[8];
    if (name == "typ" || name == "typical" || name == "typicalp") found = &kStages[4];
    if (!found)
      throw std::invalid_argument("unknown sampler \"" + name +
                                  "\" (known: " + sampler_chain_names(default_sampler_chain()) + ")");
    chain.push_back(found->stage);
  }
  return chain;
}

std::vector<SamplerStage> parse_sampler_letters(std::string_view letters) {
  std::vector<SamplerStage> chain;
  for (char ch : letters) {
    const Stage* found = nullptr;
    for (const Stage& s : kStages)
      if (s.letter == ch) found = &s;
    if (!found) throw std::invalid_argument(std::string("unknown sampler letter '") + ch + "' (known: edskypmxt)");
    chain.push_back(found->stage);
  }
  return chain;
}

std::string sampler_chain_names(std::span<const SamplerStage> chain) {
  std::string out;
  for (SamplerStage stage : chain)
    for (const Stage& s : kStages)
      if (s.stage == stage) {
        if (!out.empty()) out += ';';
        out += s.name;
      }
  return out;
}

int32_t argmax(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(SamplerConfig c) : c_(std::move(c)), rng_(c_.seed), mu_(2.0 * c_.mirostat_tau) {
  for (const std::vector<int32_t>& b : c_.dry_sequence_breakers)
    if (!b.empty()) breakers_.emplace(b[0], std::vector<int32_t>(b.begin() + 1, b.end()));
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  std::vector<float> z(logits.begin(), logits.end());
  for (auto [id, bias] : c_.logit_bias)
    if (id >= 0 && size_t(id) < z.size()) z[size_t(id)] += bias;
  Candidates c;  // the tokens not banned, in id order
  c.reserve(z.size());
  for (size_t v = 0; v < z.size(); ++v)
    if (z[v] > -std::numeric_limits<float>::infinity()) c.push_back({int32_t(v), z[v]});
  if (c.empty()) return argmax(z);
  const size_t min_keep = size_t(std::max(c_.min_keep, 0));
  const bool chained = c_.mirostat == 0;

  if (c_.temperature <= 0) {  // greedy: the stages that move logits, then the likeliest
    for (SamplerStage stage : c_.chain) {
      if (chained && stage == SamplerStage::Penalties) penalise(c, c_, history);
      if (chained && stage == SamplerStage::Dry) dry(c, c_, breakers_, history);
    }
    return c[Ranking(c)[0]].id;
  }
  if (chained) {
    for (SamplerStage stage : c_.chain) {
      switch (stage) {
        case SamplerStage::Penalties:
          penalise(c, c_, history);
          break;
        case SamplerStage::Dry:
          dry(c, c_, breakers_, history);
          break;
        case SamplerStage::TopNSigma:
          c = top_n_sigma(c, c_.top_n_sigma);
          break;
        case SamplerStage::TopK:
          if (c_.top_k > 0) c = keep_likeliest(c, size_t(c_.top_k));
          break;
        case SamplerStage::TypicalP:
          c = typical_p(c, c_.typical_p, min_keep);
          break;
        case SamplerStage::TopP:
          c = top_p(c, c_.top_p, min_keep);
          break;
        case SamplerStage::MinP:
          c = min_p(c, c_.min_p, min_keep);
          break;
        case SamplerStage::Xtc:  // a coin first, with probability xtc_probability
          if (c_.xtc_probability > 0 && c_.xtc_threshold <= 0.5f && c.size() >= 2 && uniform() <= c_.xtc_probability)
            c = xtc(c, c_.xtc_threshold, min_keep);
          break;
        case SamplerStage::Temperature:
          for (Candidate& x : c) x.logit /= c_.temperature;
          break;
      }
    }
  } else {
    for (Candidate& x : c) x.logit /= c_.temperature;
    if (c_.mirostat == 1) {
      // Mirostat v1: estimate the Zipf exponent s from the 100 likeliest, then keep the k
      // likeliest that a Zipf law of exponent s would give surprise mu.
      const std::vector<double> prob = probabilities(c);
      Ranking rank(c);
      double st = 0, tt = 0;
      for (size_t i = 0; i + 1 < std::min<size_t>(100, c.size()); ++i) {
        const double t = std::log(double(i + 2) / double(i + 1));
        st += t * std::log(prob[rank[i]] / prob[rank[i + 1]]);
        tt += t * t;
      }
      double k = 1;
      if (tt > 0) {
        const double s = st / tt, eps = s - 1;
        k = std::pow(eps * std::pow(2.0, mu_) / (1 - std::pow(double(z.size()), -eps)), 1 / s);
      }
      c = keep_likeliest(c, rank, std::isfinite(k) ? size_t(std::clamp(k, 1.0, double(c.size()))) : c.size());
    } else {
      // Mirostat v2: keep the likeliest whose surprise −log2 p is at most mu (one at least).
      const std::vector<double> prob = probabilities(c);
      Ranking rank(c);
      size_t n = 1;
      while (n < c.size() && -std::log2(prob[rank[n]]) <= mu_) ++n;
      c = keep_likeliest(c, rank, n);
    }
  }
  const std::vector<double> prob = probabilities(c);
  const double u = uniform();
  size_t pick = c.size() - 1;
  double mass = 0;
  for (size_t i = 0; i < c.size(); ++i)
    if (u < (mass += prob[i])) {
      pick = i;
      break;
    }
  if (!chained) mu_ -= c_.mirostat_eta * (-std::log2(prob[pick]) - c_.mirostat_tau);
  return c[pick].id;
}

const std::vector<std::string>& default_dry_breakers() {
  static const std::vector<std::string> strings = {"\n", ":", "\"", "*"};
  return strings;
}

std::vector<std::vector<int32_t>> dry_breakers(const Tokenizer& t, const std::vector<std::string>& strings) {
  constexpr size_t kMaxChars = 40, kMaxTail = 20;  // llama.cpp's limits
  std::vector<std::vector<int32_t>> out;
  for (std::string s : strings) {
    if (s.size() > kMaxChars) s.resize(kMaxChars);
    if (s.empty()) continue;
    for (int32_t id = 0; id < t.n_vocab(); ++id) {
      const std::string word = t.piece(id, /*special=*/true);
      if (word.find(s) != std::string::npos) {
        out.push_back({id});
        continue;
      }
      // Every place the word's end starts s: the token, then the tokens of the rest of s.
      for (size_t pos = word.find(s[0]); pos != std::string::npos; pos = word.find(s[0], pos + 1)) {
        const size_t n = word.size() - pos;  // < s.size(): the word does not hold all of s
        if (word.compare(pos, n, s, 0, n) != 0) continue;
        std::vector<int32_t> seq = {id};
        std::vector<int32_t> rest = t.encode(std::string_view(s).substr(n));
        if (rest.size() > kMaxTail) rest.resize(kMaxTail);
        seq.insert(seq.end(), rest.begin(), rest.end());
        if (std::find(out.begin(), out.end(), seq) == out.end()) out.push_back(std::move(seq));
      }
    }
  }
  return out;
}

}  // namespace toy
