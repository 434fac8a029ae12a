// An allocator for large, long-lived arrays that are streamed through often (packed GEMM
// weights): blocks of 2 MiB and more are aligned to 2 MiB and offered to the kernel as
// transparent huge pages (madvise), so streaming them needs one TLB entry per 2 MiB instead
// of one per 4 KiB. Where the kernel says no, they are ordinary pages.
#ifndef KILN_RUNTIME_CPU_HUGE_PAGE_ALLOCATOR_H_
#define KILN_RUNTIME_CPU_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace kiln::runtime::cpu {

// Allocates n bytes (a multiple of 64 B, at least), aligned to 2 MiB when n is 2 MiB or more.
void* allocate_huge_page_backed(size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_huge_page_backed(n * sizeof(T))); }
  void deallocate(T* p, size_t) { std::free(p); }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

// Packed GEMM weights (gemm.h, packed_weight_cache.h).
using PackedFloats = std::vector<float, HugePageAllocator<float>>;

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_HUGE_PAGE_ALLOCATOR_H_
