#include "runtime/buffer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "jit/stats_counters.h"
#include "kiln/error.h"

namespace kiln::runtime {
namespace {
std::atomic<bool> poison{false};
}  // namespace

void set_poison_new_buffers(bool on) { poison = on; }

Buffer::Buffer(int64_t nbytes) : nbytes_(nbytes) {
  constexpr size_t kAlign = 64;
  size_t rounded = (static_cast<size_t>(nbytes) + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;  // keep data() valid for empty tensors
  data_ = static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded));
  if (data_ == nullptr) {
    throw Error(absl::StrCat("out of memory allocating ", nbytes, " bytes on cpu"));
  }
  jit::counters().bytes_allocated += nbytes;
  if (poison) std::memset(data_, 0xFF, rounded);
}

Buffer::~Buffer() { std::free(data_); }

}  // namespace kiln::runtime
