// Host buffers of 256 KiB and more are recycled through base/buffer.cc's cache of freed
// blocks, the most recently freed block of a size first (it is the one still in the CPU's
// cache), so a program that allocates the same outputs every step pays no page faults.
#include <gtest/gtest.h>

#include <memory>

#include "base/buffer.h"

namespace kiln {
namespace {

using base::Buffer;

TEST(HostBuffer, FreedBlocksFromAQuarterMiBAreReusedLastFreedFirst) {
  // A size no other test in this process allocates, so the cache holds no block of it.
  constexpr int64_t kBytes = (int64_t{1} << 18) + 4 * 64 + 24;
  auto first = std::make_unique<Buffer>(kBytes);
  auto second = std::make_unique<Buffer>(kBytes);
  const std::byte* first_data = first->data();
  const std::byte* second_data = second->data();
  ASSERT_NE(first_data, second_data);
  first.reset();
  second.reset();
  // The last one freed comes back first, then the other; both hold the requested size.
  Buffer again(kBytes);
  EXPECT_EQ(again.data(), second_data);
  Buffer and_again(kBytes);
  EXPECT_EQ(and_again.data(), first_data);
  EXPECT_EQ(again.nbytes(), kBytes);
  // Writing every byte of a reused block stays inside it (ASan checks the bound).
  for (int64_t i = 0; i < kBytes; ++i) again.data()[i] = std::byte{0x5a};
}

}  // namespace
}  // namespace kiln
