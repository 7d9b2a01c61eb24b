// tests/test_tensor.cpp — owned tensor storage: reused buffers keep the allocation contract.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "toy/tensor/tensor.h"

using namespace toy;

namespace {

// The whole owned block of t: its bytes and the zeroed tail after them (one 64-byte line
// past the bytes rounded up to 64).
size_t block_bytes(const Tensor& t) { return (t.nbytes() + 63) / 64 * 64 + 64; }

// Fills t's block, tail included, with 0xAB: what a buffer looks like after use when some
// kernel wrote past its bytes.
void dirty(Tensor& t) { std::memset(t.raw_mut(), 0xAB, block_bytes(t)); }

bool all_zero(const Tensor& t, size_t from, size_t to) {
  const auto* p = static_cast<const unsigned char*>(t.raw());
  for (size_t i = from; i < to; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace

TEST(TensorStorage, ReusedBuffersAreZeroedWhereTheContractSays) {
  // 112 and 100 floats share a block size, so the second tensor reuses the first's buffer:
  // zeros must still be zeros, and the tail past the smaller tensor's bytes must be zero
  // again for kernels' vector over-reads.
  for (int round = 0; round < 3; ++round) {
    const void* used;
    {
      Tensor a = Tensor::empty({112});
      dirty(a);
      used = a.raw();
    }
    Tensor z = Tensor::zeros({100});
    if (Storage::kCacheBuffers) {
      EXPECT_EQ(z.raw(), used);
    }
    EXPECT_TRUE(all_zero(z, 0, block_bytes(z))) << "zeros from a reused buffer";
    dirty(z);
    z = Tensor();
    Tensor e = Tensor::empty({100});
    EXPECT_TRUE(all_zero(e, e.nbytes(), block_bytes(e))) << "tail of empty from a reused buffer";
  }
}

TEST(TensorStorage, CachedBytesStayBounded) {
  std::vector<Tensor> live;
  for (int64_t n = 1; n <= 200; ++n) live.push_back(Tensor::empty({n * 1000}));  // 80 MB
  live.clear();
  EXPECT_LE(Storage::cached_bytes(), Storage::kCacheMaxIdle);
  const size_t before = Storage::cached_bytes();
  Tensor::empty({int64_t(Storage::kCacheMaxBlock)});  // 4 MiB of floats: too big to keep
  EXPECT_EQ(Storage::cached_bytes(), before);
}
