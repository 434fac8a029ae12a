// The device caching allocator's policy, on host memory standing in for a device with a
// fixed capacity: blocks are reused, the cache is bounded, out-of-memory frees the cache
// and retries once before a clear error, and a long loop leaks nothing.
#include "runtime/cuda/device_allocator.h"

#include <cstdlib>
#include <map>

#include "absl/status/status.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using runtime::cuda::DeviceAllocator;

// Real host blocks, with a capacity like a device's.
struct HostDevice {
  size_t capacity, used = 0;
  int allocations = 0, frees = 0;
  std::map<uint64_t, size_t> live;  // address -> bytes
  DeviceAllocator::RawAlloc alloc() {
    return [this](size_t bytes) -> absl::StatusOr<uint64_t> {
      if (used + bytes > capacity) return absl::ResourceExhaustedError("out of memory");
      void* p = std::malloc(bytes);
      used += bytes;
      ++allocations;
      live[reinterpret_cast<uint64_t>(p)] = bytes;
      return reinterpret_cast<uint64_t>(p);
    };
  }
  DeviceAllocator::RawFree free() {
    return [this](uint64_t address) {
      auto it = live.find(address);
      ASSERT_NE(it, live.end()) << "freed twice or never allocated";
      used -= it->second;
      live.erase(it);
      std::free(reinterpret_cast<void*>(address));
      ++frees;
    };
  }
};

// Nothing is freed while a capture is under way (a free would synchronize the device and
// invalidate it): blocks past the cache bound, and a cache release, wait for the last of
// two overlapping captures to end, then are all freed, each once.
TEST(DeviceAllocator, NothingIsFreedWhileAGraphCaptureIsUnderWay) {
  HostDevice dev{1 << 24};
  DeviceAllocator a("test", dev.alloc(), dev.free(), 1 << 12);  // caches 4 KiB
  std::vector<DeviceAllocator::Block> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(a.allocate(4096));
  a.begin_capture();
  a.begin_capture();
  for (const DeviceAllocator::Block& b : blocks) a.release(b);  // 1 cached, 3 past the bound
  EXPECT_EQ(dev.frees, 0);
  EXPECT_EQ(a.cached_bytes(), 4096u);
  EXPECT_EQ(a.deferred_bytes(), 3u * 4096u);
  a.release_cache();
  EXPECT_EQ(dev.frees, 0);
  EXPECT_EQ(a.deferred_bytes(), 4u * 4096u);
  a.end_capture();
  EXPECT_EQ(dev.frees, 0) << "freed while the other capture was still under way";
  a.end_capture();
  EXPECT_EQ(dev.frees, 4);
  EXPECT_EQ(a.deferred_bytes(), 0u);
  EXPECT_TRUE(dev.live.empty());
  // With no capture, a block past the bound is freed at once.
  DeviceAllocator::Block b1 = a.allocate(4096), b2 = a.allocate(4096);
  a.release(b1);
  a.release(b2);
  EXPECT_EQ(dev.frees, 5);
}

TEST(DeviceAllocator, ReusesFreedBlocksOfTheSameSizeClass) {
  HostDevice dev{1 << 24};
  DeviceAllocator a("test", dev.alloc(), dev.free(), 1 << 22);
  DeviceAllocator::Block b1 = a.allocate(1000);
  EXPECT_EQ(b1.bytes, 1024u);
  a.release(b1);
  DeviceAllocator::Block b2 = a.allocate(900);  // same class: the same block
  EXPECT_EQ(b2.address, b1.address);
  EXPECT_EQ(dev.allocations, 1);
  a.release(b2);
  EXPECT_EQ(a.cached_bytes(), 1024u);
  EXPECT_EQ(a.live_bytes(), 0u);
  EXPECT_EQ(DeviceAllocator::size_class(3 << 20), size_t{4} << 20);
}

TEST(DeviceAllocator, OutOfMemoryFreesTheCacheRetriesOnceThenFailsClearly) {
  HostDevice dev{4 << 20};
  DeviceAllocator a("cuda:0", dev.alloc(), dev.free(), 16 << 20);
  DeviceAllocator::Block big = a.allocate(3 << 20);    // a 4 MiB class: the whole device
  a.release(big);                                      // cached, still held
  DeviceAllocator::Block other = a.allocate(2 << 20);  // needs the cache freed first
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.cached_bytes(), 0u);
  testing::expect_error([&] { a.allocate(3 << 20); },
                        {"out of memory", "cuda:0", "3145728 bytes", "in use"});
  a.release(other);
  DeviceAllocator::Block after = a.allocate(1 << 20);  // usable after the error
  EXPECT_EQ(after.bytes, size_t{1} << 20);
  a.release(after);
}

TEST(DeviceAllocator, ALongLoopLeaksNothingAndTheCacheStaysBounded) {
  HostDevice dev{64 << 20};
  {
    DeviceAllocator a("test", dev.alloc(), dev.free(), 8 << 20);
    std::vector<DeviceAllocator::Block> held;
    // A loop's tensors: the same few sizes again and again.
    const size_t sizes[] = {1000, 70000, size_t{3} << 20, 12, 500000};
    for (int step = 0; step < 20000; ++step) {
      held.push_back(a.allocate(sizes[step % 5]));
      if (held.size() > 4) {
        a.release(held.front());
        held.erase(held.begin());
      }
      ASSERT_LE(a.cached_bytes(), size_t{8} << 20);
    }
    for (const auto& b : held) a.release(b);
    EXPECT_EQ(a.live_bytes(), 0u);
    EXPECT_LE(dev.allocations, 10) << "blocks are reused";
  }
  EXPECT_TRUE(dev.live.empty()) << "the destructor frees the cache";
  EXPECT_EQ(dev.used, 0u);
}

}  // namespace
}  // namespace kiln
