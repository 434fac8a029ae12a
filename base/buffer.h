// A block of device memory holding one realized value, contiguous and row-major.
#ifndef KILN_BASE_BUFFER_H_
#define KILN_BASE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/dtype.h"

namespace kiln::base {

class Buffer {
 public:
  // Allocates `nbytes` of host memory, 64-byte aligned, uninitialized. Throws kiln::Error
  // naming the size when memory runs out.
  explicit Buffer(int64_t nbytes);
  // A block of device memory at `device_pointer` on `device`, handed back through `release`
  // when the buffer dies (the CUDA caching allocator makes these). data() is null.
  Buffer(int64_t nbytes, Device device, uint64_t device_pointer, std::function<void()> release);
  // Host memory that Kiln does not own (Tensor::from_blob): `data` is read and written in
  // place, and `release` (which may be empty) runs when the buffer dies.
  Buffer(std::byte* data, int64_t nbytes, std::function<void()> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  bool on_device() const { return device_.type != DeviceType::CPU; }
  Device device() const { return device_; }
  uint64_t device_pointer() const { return device_pointer_; }

  // Identifies these contents: unique per buffer made, and renewed by mark_written. A cache
  // of something derived from the contents (the CPU GEMM's packed weights) keys on it, so a
  // freed address reused, or a buffer written again, never finds a stale entry.
  uint64_t version() const { return version_; }
  // Called before a kernel writes the buffer (a recycled intermediate, a donated input).
  void mark_written();

  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }

 private:
  std::byte* data_ = nullptr;
  int64_t nbytes_ = 0;
  Device device_{DeviceType::CPU, 0};
  uint64_t device_pointer_ = 0;
  std::function<void()> release_;
  bool borrowed_ = false;  // host memory of the caller's (never given to the block cache)
  uint64_t version_;
};

// Test hook: when on, every new buffer is filled with 0xFF bytes (NaN for floats, -1 for
// integers) so a kernel that leaves an element unwritten cannot pass by luck.
void set_poison_new_buffers(bool on);

// Test hook: after `allocations` more buffers are made, the next one throws kiln::Error as
// if memory ran out ("(injected)" in the message); then allocation works again. -1 turns
// it off.
void set_fail_allocation_after(int64_t allocations);

// Whether the allocation being made now is the one set_fail_allocation_after chose (counting
// it down): every allocator of buffers, the CPU's and each GPU's, asks before allocating.
bool injected_allocation_failure();

}  // namespace kiln::base

#endif  // KILN_BASE_BUFFER_H_
