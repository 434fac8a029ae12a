#include "runtime/cpu/huge_page_allocator.h"

#include <sys/mman.h>

namespace kiln::runtime::cpu {

void* allocate_huge_page_backed(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kLine = 64;
  const size_t align = bytes >= kHuge ? kHuge : kLine;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size == 0 ? align : size);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (align == kHuge) madvise(p, size, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  return p;
}

}  // namespace kiln::runtime::cpu
