#include "runtime/cuda/device_allocator.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/buffer.h"
#include "kiln/error.h"

namespace kiln::runtime::cuda {

DeviceAllocator::DeviceAllocator(std::string device_name, RawAlloc alloc, RawFree free,
                                 size_t max_cached_bytes)
    : device_name_(std::move(device_name)),
      alloc_(std::move(alloc)),
      free_(std::move(free)),
      max_cached_bytes_(max_cached_bytes) {}

DeviceAllocator::~DeviceAllocator() {
  release_cache();
  for (const auto& [address, bytes] : deferred_) free_(address);
}

size_t DeviceAllocator::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20, kSplit = size_t{1} << 20;
  if (bytes == 0) return kSmall;
  if (bytes <= kSplit) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

DeviceAllocator::Block DeviceAllocator::allocate(size_t bytes) {
  if (base::injected_allocation_failure()) {
    throw Error(absl::StrCat("out of memory allocating ", bytes, " bytes on ", device_name_,
                             " (injected)"));
  }
  const size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_blocks_.find(size);
    if (it != free_blocks_.end()) {
      Block b{it->second, size};
      free_blocks_.erase(it);
      cached_ -= size;
      live_ += size;
      return b;
    }
  }
  absl::StatusOr<uint64_t> address = alloc_(size);
  if (!address.ok() && absl::IsResourceExhausted(address.status())) {
    release_cache();  // what the cache holds may be just what is missing
    address = alloc_(size);
  }
  if (!address.ok()) {
    throw Error(absl::StrCat("out of memory allocating ", bytes, " bytes on ", device_name_, " (",
                             live_bytes(),
                             " bytes in use by tensors): ", address.status().message()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  live_ += size;
  return Block{*address, size};
}

void DeviceAllocator::release(Block block) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_ -= block.bytes;
    if (cached_ + block.bytes <= max_cached_bytes_) {
      free_blocks_.emplace(block.bytes, block.address);
      cached_ += block.bytes;
      return;
    }
    if (captures_ > 0) {
      deferred_.emplace_back(block.address, block.bytes);
      return;
    }
  }
  // Outside the lock: a free waits for the whole device, and other threads' allocations
  // need not wait with it.
  free_(block.address);
}

void DeviceAllocator::release_cache() {
  std::multimap<size_t, uint64_t> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_blocks_);
    cached_ = 0;
    if (captures_ > 0) {
      for (const auto& [size, address] : blocks) deferred_.emplace_back(address, size);
      return;
    }
  }
  for (const auto& [size, address] : blocks) free_(address);
}

void DeviceAllocator::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++captures_;
}

void DeviceAllocator::end_capture() {
  std::vector<std::pair<uint64_t, size_t>> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--captures_ > 0) return;
    blocks.swap(deferred_);
  }
  for (const auto& [address, bytes] : blocks) free_(address);
}

size_t DeviceAllocator::deferred_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& [address, size] : deferred_) bytes += size;
  return bytes;
}

size_t DeviceAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

size_t DeviceAllocator::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

}  // namespace kiln::runtime::cuda
