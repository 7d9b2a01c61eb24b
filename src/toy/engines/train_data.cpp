// engines/train_data.cpp — id files, corpus splits, and the stateless batch sampler.
#include "toy/engines/train_data.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace toy {

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw DataError(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open: " + std::strerror(errno));
  try {
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw DataError(path + ": read error");
    return s;
  } catch (const std::ios_base::failure& e) {  // libstdc++ throws from underflow on a read error
    throw DataError(path + ": read error: " + e.what());
  }
}

IdBlocks IdBlocks::read(const std::string& path, int64_t n_vocab) {
  const std::string bytes = read_file(path);
  if (bytes.empty()) throw DataError(path + ": the token-id file is empty");
  if (bytes.size() % 4)
    throw DataError(path + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of int32 ids");
  std::vector<int32_t> ids(bytes.size() / 4);
  for (size_t i = 0; i < ids.size(); ++i) {  // little-endian, whatever the host
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + 4 * i);
    ids[i] = int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    if (ids[i] < 0 || ids[i] >= n_vocab)
      throw DataError(path + ": id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                      " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  }
  return IdBlocks(std::move(ids));
}

std::vector<int32_t> IdBlocks::block(int64_t index, int64_t n) const {
  std::vector<int32_t> out(static_cast<size_t>(n));
  const uint64_t size = ids_.size();
  // (index·n) mod size without overflow for any step count.
  uint64_t pos = uint64_t((unsigned __int128)(uint64_t(index)) * uint64_t(n) % size);
  for (int64_t j = 0; j < n; ++j) {
    out[size_t(j)] = ids_[pos];
    if (++pos == size) pos = 0;
  }
  return out;
}

TokenSplit TokenSplit::make(std::vector<int32_t> tokens, double held_out_fraction, int64_t T) {
  const int64_t n = int64_t(tokens.size());
  const int64_t n_held = held_out_fraction > 0 ? std::max<int64_t>(T + 1, int64_t(double(n) * held_out_fraction)) : 0;
  if (n - n_held < T + 1)
    throw DataError("the corpus has " + std::to_string(n) +
                    " tokens: too few for a training window of context + 1 = " + std::to_string(T + 1) +
                    (n_held ? " tokens plus a held-out part of " + std::to_string(n_held) : std::string(" tokens")));
  TokenSplit s;
  s.held_out.assign(tokens.end() - n_held, tokens.end());
  tokens.resize(size_t(n - n_held));
  s.train = std::move(tokens);
  return s;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<int32_t> TokenSplit::sample(int64_t step, int64_t B, int64_t T, uint64_t seed) const {
  const uint64_t starts = uint64_t(int64_t(train.size()) - T);  // window starts in [0, size − (T + 1)]
  std::vector<int32_t> ids;
  ids.reserve(size_t(B * (T + 1)));
  for (int64_t i = 0; i < B; ++i) {
    const uint64_t r = mix64(mix64(mix64(seed) ^ uint64_t(step)) ^ uint64_t(i));
    const uint64_t start = uint64_t((unsigned __int128)r * starts >> 64);  // uniform in [0, starts)
    ids.insert(ids.end(), train.begin() + int64_t(start), train.begin() + int64_t(start) + T + 1);
  }
  return ids;
}

std::vector<std::vector<int32_t>> TokenSplit::eval_batches(int64_t B, int64_t T, int64_t max_batches) const {
  std::vector<std::vector<int32_t>> batches;
  const int64_t windows = int64_t(held_out.size()) / (T + 1);
  for (int64_t w = 0; w < windows && int64_t(batches.size()) < max_batches; w += B) {
    const int64_t n = std::min(B, windows - w);
    batches.emplace_back(held_out.begin() + w * (T + 1), held_out.begin() + (w + n) * (T + 1));
  }
  return batches;
}

}  // namespace toy
