// Reusable per-thread scratch memory for the CPU kernels. A fresh block of a few megabytes
// per kernel call costs a page fault per 4 KiB (the OS zeroes every new page), which for
// a small-batch matmul can exceed the arithmetic. Blocks return to the thread's free list
// when the ScratchFloats dies; blocks over kMaxKeptBytes are freed instead. Contents are
// uninitialized.
#ifndef KILN_RUNTIME_CPU_SCRATCH_H_
#define KILN_RUNTIME_CPU_SCRATCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::runtime::cpu {

class ScratchFloats {
 public:
  static constexpr int64_t kMaxKeptBytes = int64_t{16} << 20;
  static constexpr size_t kMaxKeptBlocks = 4;

  explicit ScratchFloats(int64_t count) : count_(count) {
    std::vector<Block>& blocks = free_blocks();
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].capacity >= count) {
        block_ = std::move(blocks[i]);
        blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
    const int64_t capacity = std::max<int64_t>(count, 1);
    block_ = {std::make_unique_for_overwrite<float[]>(capacity), capacity};
  }
  ~ScratchFloats() {
    std::vector<Block>& blocks = free_blocks();
    if (block_.capacity * static_cast<int64_t>(sizeof(float)) > kMaxKeptBytes) return;
    if (blocks.size() >= kMaxKeptBlocks) blocks.erase(blocks.begin());
    blocks.push_back(std::move(block_));
  }
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;

  float* data() { return block_.values.get(); }
  int64_t size() const { return count_; }

 private:
  struct Block {
    std::unique_ptr<float[]> values;
    int64_t capacity = 0;
  };
  static std::vector<Block>& free_blocks() {
    thread_local std::vector<Block> blocks;
    return blocks;
  }

  int64_t count_;
  Block block_;
};

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_SCRATCH_H_
