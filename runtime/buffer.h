// A block of device memory holding one realized value, contiguous and row-major.
#ifndef KILN_RUNTIME_BUFFER_H_
#define KILN_RUNTIME_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln::runtime {

class Buffer {
 public:
  // Allocates `nbytes` of host memory, 64-byte aligned, uninitialized. Throws kiln::Error
  // naming the size when memory runs out.
  explicit Buffer(int64_t nbytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }

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
};

// Test hook: when on, every new buffer is filled with 0xFF bytes (NaN for floats, -1 for
// integers) so a kernel that leaves an element unwritten cannot pass by luck.
void set_poison_new_buffers(bool on);

// Test hook: after `allocations` more buffers are made, the next one throws kiln::Error as
// if memory ran out ("(injected)" in the message); then allocation works again. -1 turns
// it off.
void set_fail_allocation_after(int64_t allocations);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_BUFFER_H_
