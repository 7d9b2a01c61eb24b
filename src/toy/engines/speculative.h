// engines/speculative.h — drafts for speculative decoding: cheap guesses of the tokens that come
// next, which generate() verifies with the target model in one forward pass.
//
// A draft of k tokens is fed to the target after the token sampled last; row i of the k + 1 rows
// of logits is what the target says after the i-th of them. The sampler draws from row 0; while
// its token equals the next draft token (already fed), it goes on to the next row. The first
// token that differs (or the one drawn from the last row) is the next to feed, and the cache is
// rewound to just before it. Every token so comes from the target's own distribution, drawn with
// the same random number a plain decode would use, from logits with the same bits (a row's bits do
// not depend on how many rows are fed together; DecodeEngine::exact_feed_limit): greedy or sampled,
// the tokens are exactly those of decoding without a draft, only sooner.
//
// For a draft token d that a drafter proposes with certainty (q = δ_d), this is the standard
// acceptance rule of speculative sampling (Leviathan et al. 2023; Chen et al. 2023): d is kept
// with probability min(1, p(d)/q(d)) = p(d), and otherwise the token comes from
// norm(max(0, p − q)), p with d taken out — which is what a draw from p that is not d is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "toy/engines/decode.h"

namespace toy {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to n tokens guessed to follow `context` (every token of the sequence so far, the one
  // sampled last included); fewer, or none, where it has no good guess. A model drafter stops
  // where its best token is less likely than p_min; lookup has no probabilities to weigh.
  virtual std::vector<int32_t> draft(std::span<const int32_t> context, int64_t n, float p_min) = 0;
};

// A smaller model of the same vocabulary drafts greedily, stopping early where its best token's
// probability falls below p_min (llama.cpp's --draft-p-min). It keeps its own KV cache in step
// with the context: only what is new since its last draft is fed. One sequence: a server keeps
// one per slot.
class ModelDrafter : public Drafter {
 public:
  // Throws std::invalid_argument when the two vocabularies differ in size.
  ModelDrafter(const Model& draft, const Model& target, int64_t n_ctx, DType kv_type = DType::F32);
  std::vector<int32_t> draft(std::span<const int32_t> context, int64_t n, float p_min) override;

 private:
  DecodeEngine engine_;
  std::optional<DecodeEngine::Mark> mark_;  // where the context of the last draft ended
};

// Prompt lookup (llama.cpp's ngram-simple): the last n tokens of the context are looked for
// earlier in it, the most recent match first, and the up to m tokens that followed that match
// are the draft. No second model; it pays where the answer quotes its input (code edits,
// summaries, extraction).
class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int64_t n, int64_t m);  // throws std::invalid_argument unless n, m ≥ 1
  std::vector<int32_t> draft(std::span<const int32_t> context, int64_t n, float p_min) override;

 private:
  int64_t n_, m_;
};

// Throws std::invalid_argument unless the two models' vocabularies have the same size.
void check_draft_vocabulary(const Model& draft, const Model& target);

// What generate() (and a server's slot) drafts with, and what came of it.
struct Speculation {
  Drafter* drafter = nullptr;  // never null when generate() is given a Speculation
  int64_t n_max = 16;          // tokens a draft may have (llama.cpp's --draft-max)
  int64_t n_min = 0;           // a shorter draft is not verified (--draft-min)
  float p_min = 0.75f;         // a model drafter's confidence to go on (--draft-p-min)
  int64_t drafted = 0;         // draft tokens verified
  int64_t accepted = 0;        // of those, the ones the target's own draws agreed with
  double acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0; }
  // The draft to verify after `next`, the token sampled last and not yet fed to `engine`: at most
  // n_max tokens, `room` (the tokens the generation may emit after next), what the context has
  // left and what one feed verifies exactly (DecodeEngine::exact_feed_limit); none when shorter
  // than n_min. Not counted in `drafted`: the caller counts what it verifies.
  std::vector<int32_t> draft_after(const DecodeEngine& engine, int32_t next, int64_t room) const;
};

// A draft fed after the token sampled last, and how many of its guesses the draws have taken:
// what generate() and a server's slot keep from one draw to the next.
class Verification {
 public:
  // Feeds `next` and `draft` to `engine` in one pass (marking the place first when there is a
  // draft) and returns the logits [k + 1, V], row i those after the i-th token fed.
  Tensor feed(DecodeEngine& engine, int32_t next, std::vector<int32_t> draft);
  // Whether `token`, just drawn from row(), is the next guess; if so the next draw is from the
  // row after it, which that feed computed already.
  bool take(int32_t token);
  int64_t row() const { return int64_t(taken_); }
  // The engine's positions that hold drawn tokens: n_past less the guesses not drawn.
  int64_t valid(const DecodeEngine& engine) const { return engine.n_past() - int64_t(draft_.size() - taken_); }
  // Rewinds `engine` past the guesses not drawn, and forgets the draft.
  void forget(DecodeEngine& engine);

 private:
  std::vector<int32_t> draft_;
  size_t taken_ = 0;
  std::optional<DecodeEngine::Mark> mark_;  // before the last feed, when it had a draft
};

}  // namespace toy
