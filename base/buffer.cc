#include "base/buffer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/buffer_contents_observer.h"
#include "base/stats_counters.h"
#include "kiln/error.h"

namespace kiln::base {
namespace {

std::atomic<bool> poison{false};
std::atomic<int64_t> allocations_before_failure{-1};  // test hook; -1: never fail

}  // namespace

bool injected_allocation_failure() {
  int64_t left = allocations_before_failure.load();
  while (left >= 0) {
    if (allocations_before_failure.compare_exchange_weak(left, left - 1)) return left == 0;
  }
  return false;
}

namespace {

constexpr size_t kAlign = 64;

// Buffer versions: never 0 (which callers use for "no version"), never reused.
std::atomic<uint64_t> last_version{0};
uint64_t next_version() { return last_version.fetch_add(1) + 1; }

// Freed blocks of 256 KiB and more are kept for reuse (bounded), because the C allocator
// returns them to the OS and every new one would pay page faults and zeroing again: a
// 64 MB output written each step costs more in the kernel than the arithmetic, and an eager
// MiniLM forward at 8 × 64 took 340 page faults in its GEMMs' fresh 0.8-3 MB outputs.
// (Blocks of 1-8 MiB were once measured slower cached, with the Eigen GEMM of the time; the
// cache then handed out the oldest block of a size, now the most recently freed, which is
// the one still in cache.)
class BlockCache {
 public:
  static constexpr size_t kMinCached = size_t{1} << 18;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;

  // Sizes of 8 MiB and more round up to whole MiB so blocks of similar tensors are shared.
  static size_t size_class(size_t bytes) {
    constexpr size_t kMiB = size_t{1} << 20, kRoundedFrom = size_t{1} << 23;
    size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded == 0) rounded = kAlign;  // keep data() valid for empty tensors
    if (rounded >= kRoundedFrom) rounded = (rounded + kMiB - 1) / kMiB * kMiB;
    return rounded;
  }

  void* take(size_t size) {
    if (size < kMinCached) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    // The last block of this size given back (a multimap inserts equal keys at the end of
    // their range).
    auto it = blocks_.upper_bound(size);
    if (it == blocks_.begin() || std::prev(it)->first != size) return nullptr;
    --it;
    void* block = it->second;
    blocks_.erase(it);
    cached_ -= size;
    return block;
  }

  // Frees every cached block (when memory runs out, before trying again).
  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, block] : blocks_) std::free(block);
    blocks_.clear();
    cached_ = 0;
  }

  void give(void* block, size_t size) {
    if (size >= kMinCached) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + size <= kMaxCachedBytes) {
        blocks_.emplace(size, block);
        cached_ += size;
        return;
      }
    }
    std::free(block);
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> blocks_;
  size_t cached_ = 0;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache();  // never destroyed: buffers may outlive main
  return *cache;
}

}  // namespace

void set_poison_new_buffers(bool on) { poison = on; }

void set_fail_allocation_after(int64_t allocations) { allocations_before_failure = allocations; }

Buffer::Buffer(int64_t nbytes) : nbytes_(nbytes), version_(next_version()) {
  if (injected_allocation_failure()) {
    throw Error(absl::StrCat("out of memory allocating ", nbytes, " bytes on cpu (injected)"));
  }
  const size_t size = BlockCache::size_class(static_cast<size_t>(nbytes));
  data_ = static_cast<std::byte*>(block_cache().take(size));
  if (data_ == nullptr) data_ = static_cast<std::byte*>(std::aligned_alloc(kAlign, size));
  if (data_ == nullptr) {  // free what the cache holds and try once more
    block_cache().release_all();
    data_ = static_cast<std::byte*>(std::aligned_alloc(kAlign, size));
  }
  if (data_ == nullptr) {
    throw Error(absl::StrCat("out of memory allocating ", nbytes, " bytes on cpu"));
  }
  base::counters().bytes_allocated += nbytes;
  if (poison) std::memset(data_, 0xFF, size);
}

Buffer::Buffer(int64_t nbytes, Device device, uint64_t device_pointer,
               std::function<void()> release)
    : nbytes_(nbytes),
      device_(device),
      device_pointer_(device_pointer),
      release_(std::move(release)),
      version_(next_version()) {
  base::counters().bytes_allocated += nbytes;
}

namespace {
std::atomic<ContentsDroppedFn> contents_dropped{nullptr};

void contents_gone(uint64_t version) {
  if (ContentsDroppedFn fn = contents_dropped.load(std::memory_order_acquire)) fn(version);
}
}  // namespace

void set_contents_dropped_observer(ContentsDroppedFn fn) {
  contents_dropped.store(fn, std::memory_order_release);
}

void Buffer::mark_written() {
  contents_gone(version_);
  version_ = next_version();
}

Buffer::Buffer(std::byte* data, int64_t nbytes, std::function<void()> release)
    : data_(data),
      nbytes_(nbytes),
      release_(std::move(release)),
      borrowed_(true),
      version_(next_version()) {}

Buffer::~Buffer() {
  contents_gone(version_);
  if (on_device() || borrowed_) {
    if (release_) release_();
    return;
  }
  block_cache().give(data_, BlockCache::size_class(static_cast<size_t>(nbytes_)));
}

}  // namespace kiln::base
