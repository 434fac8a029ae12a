// The caching allocator for device memory. cuMemAlloc and cuMemFree synchronize the device
// and cost tens of microseconds, so freed blocks are kept by size and handed out again.
//
// Stream order makes reuse safe without events: all of Kiln's work on a device runs in one
// stream, so a block released after its last use was enqueued can go to the next allocation
// at once; whatever uses it next runs after the work that used it before.
//
// Out of memory: the cache is freed and the allocation tried once more; then kiln::Error.
//
// Graph captures: cuMemFree synchronizes the device, and a synchronization while another
// thread captures a graph on it invalidates that capture. So between begin_capture() and
// the matching end_capture() nothing is freed: blocks past the cache bound wait in a list,
// and the last end_capture() frees them.
// The allocator takes the raw allocation functions as parameters, so its policy is tested
// on host memory where no GPU exists (tests/cuda/device_allocator_test.cc).
#ifndef KILN_RUNTIME_CUDA_DEVICE_ALLOCATOR_H_
#define KILN_RUNTIME_CUDA_DEVICE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::runtime::cuda {

class DeviceAllocator {
 public:
  // Returns the new block's address, ResourceExhaustedError when the device is out of
  // memory, another error otherwise.
  using RawAlloc = std::function<absl::StatusOr<uint64_t>(size_t bytes)>;
  // Called from whichever thread releases a block (a buffer's last owner), which may have no
  // current context: it makes its own, and reports a failure rather than throwing.
  using RawFree = std::function<void(uint64_t address)>;

  DeviceAllocator(std::string device_name, RawAlloc alloc, RawFree free, size_t max_cached_bytes);
  ~DeviceAllocator();  // frees the cached blocks (live ones belong to their buffers)

  struct Block {
    uint64_t address = 0;
    size_t bytes = 0;  // the size class, at least what was asked
  };
  // Throws kiln::Error naming the size and the device when memory runs out.
  Block allocate(size_t bytes);
  void release(Block block);
  // Frees every cached block (as before the retry on out-of-memory); during a capture they
  // wait for its end instead.
  void release_cache();

  // A graph capture on the device starts or ends (captures may overlap: counted).
  void begin_capture();
  void end_capture();

  size_t cached_bytes() const;
  size_t live_bytes() const;
  size_t deferred_bytes() const;  // released during a capture, freed when it ends

  // Size classes: multiples of 512 bytes up to 1 MiB, of 2 MiB above (fewer distinct sizes,
  // so blocks are shared between similar tensors).
  static size_t size_class(size_t bytes);

 private:
  std::string device_name_;
  RawAlloc alloc_;
  RawFree free_;
  size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::multimap<size_t, uint64_t> free_blocks_;  // size class -> address
  size_t cached_ = 0, live_ = 0;
  int captures_ = 0;                                   // captures under way
  std::vector<std::pair<uint64_t, size_t>> deferred_;  // (address, bytes) to free after them
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_DEVICE_ALLOCATOR_H_
