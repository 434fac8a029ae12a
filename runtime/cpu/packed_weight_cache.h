// The CPU GEMM's cache of packed B matrices (weights), and of the quantized product's
// decoded panels of a block-quantized weight. Packing reorders B into the panels the GEMM's
// inner kernel streams; for a weight read on every call (a layer's linear), doing
// that once and keeping it saves a full pass over the weight per call, which is most of the
// cost of a small-batch matmul. A matrix is kept the second time its contents are seen
// (same buffer version, same view), so intermediates, which are new each run, never fill
// the cache. A kept matrix lives as long as its source's contents: freeing the tensor, or
// writing its buffer, drops it (base/buffer_contents_observer.h). The bytes kept are
// bounded by kiln::set_packed_weight_budget (KILN_PACKED_WEIGHT_MB, default half of the
// machine's memory); past it the least recently used go first, counted in
// Stats::packed_weight_evictions. Thread-safe.
#ifndef KILN_RUNTIME_CPU_PACKED_WEIGHT_CACHE_H_
#define KILN_RUNTIME_CPU_PACKED_WEIGHT_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/cpu/gemm.h"

namespace kiln::runtime::cpu {

// What a packed B was made from: the matrix (its data, contents version and view) and the
// panel width of the instruction set that packed it.
struct PackedWeightKey {
  const void* data = nullptr;
  uint64_t version = 0;
  int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
  GemmElement element = GemmElement::kF32;
  int64_t panel_width = 0;
  // A block-quantized weight's decoded panels (quantized_gemm.cc): its DType, else -1.
  int quantized_format = -1;
  bool operator==(const PackedWeightKey&) const = default;
};

using PackedMatrix = std::shared_ptr<const PackedFloats>;

// The packed form of `key`'s matrix when it is kept, else null; `*keep` then says whether
// the caller should offer the one it packs (the matrix was seen before).
PackedMatrix find_packed_weight(const PackedWeightKey& key, bool* keep);
void keep_packed_weight(const PackedWeightKey& key, PackedMatrix packed);
// Counts a pack that was not kept (statistics only).
void count_transient_pack();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_PACKED_WEIGHT_CACHE_H_
