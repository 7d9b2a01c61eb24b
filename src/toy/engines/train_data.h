// engines/train_data.h — where training batches come from: packed token-id files and tokenized
// text corpora split into a training and a held-out part.
//
// Every batch is a pure function of (data, step): there is no sampler state to save, so a run
// resumed at step N reads exactly the batches an uninterrupted run reads from step N on.
//   * IdBlocks (`--data-ids`): step s uses the s-th consecutive block of B·(T + 1) ids of the
//     file, wrapping around at its end.
//   * TokenSplit::sample (text corpora): step s draws B windows of T + 1 tokens at positions
//     given by a counter-based hash of (seed, s, i), uniform over the training part.
// Batches are laid out as make_batch() (train.h) expects.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace toy {

// A data file or corpus that cannot be used (missing, empty, too short, ids out of range).
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file of little-endian int32 token ids.
class IdBlocks {
 public:
  // Reads the file; throws DataError when it is missing, empty, not a multiple of 4 bytes, or
  // holds an id outside [0, n_vocab).
  static IdBlocks read(const std::string& path, int64_t n_vocab);
  explicit IdBlocks(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  // Block `index` of `n` ids: ids[(index·n + j) mod size] for j < n.
  std::vector<int32_t> block(int64_t index, int64_t n) const;
  int64_t size() const { return int64_t(ids_.size()); }
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;
};

// A token stream cut into a training part and a held-out part (its last `fraction`).
struct TokenSplit {
  std::vector<int32_t> train, held_out;

  // Throws DataError when either part is shorter than one window of T + 1 tokens.
  static TokenSplit make(std::vector<int32_t> tokens, double held_out_fraction, int64_t T);

  // The ids of step `step`'s batch: B windows of T + 1 tokens of `train`.
  std::vector<int32_t> sample(int64_t step, int64_t B, int64_t T, uint64_t seed) const;
  // Held-out windows for evaluation: consecutive, non-overlapping windows of T + 1 tokens from
  // the start of `held_out`, grouped in batches of up to B, at most `max_batches` batches.
  // Returns the ids of each batch (its size is a multiple of T + 1).
  std::vector<std::vector<int32_t>> eval_batches(int64_t B, int64_t T, int64_t max_batches) const;
};

// SplitMix64 of a 64-bit key: the counter-based generator behind TokenSplit::sample.
uint64_t mix64(uint64_t x);

// Reads a whole file; throws DataError naming it when it is missing or unreadable.
std::string read_file(const std::string& path);

}  // namespace toy
