// The CPU device's f32 GEMM core: C = A · B with A and B read through any strides (so a
// transposed weight costs nothing extra), compiled once per instruction set by Highway and
// chosen at run time (AVX-512, AVX2+FMA, SSE4, NEON, ...). docs/cpu_gemm.md says why this
// core rather than a BLAS library, and how it is blocked.
#ifndef KILN_RUNTIME_CPU_GEMM_H_
#define KILN_RUNTIME_CPU_GEMM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/cpu/huge_page_allocator.h"

namespace kiln::runtime::cpu {

// How a GemmOperand's elements are stored. The core computes in f32 either way: 16-bit
// elements are widened as they are packed, so a bf16 or f16 weight is converted once, with
// its packing, and kept packed like an f32 one (no per-call conversion pass).
enum class GemmElement : uint8_t { kF32, kBF16, kF16 };

// A read-only matrix: element (i, j) is data[i * row_stride + j * col_stride], of type
// `element`. `version` identifies the contents (Buffer::version) when the matrix is a whole
// buffer that may be read again unchanged, such as a weight: a B seen twice with the same
// version keeps its packed form (a bounded cache). 0 means the contents are transient.
struct GemmOperand {
  const void* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  uint64_t version = 0;
  GemmElement element = GemmElement::kF32;

  // The rows from `row` on, as a matrix of their own.
  GemmOperand from_row(int64_t row) const {
    GemmOperand rest = *this;
    const int64_t bytes = element == GemmElement::kF32 ? 4 : 2;
    rest.data = static_cast<const char*>(data) + row * row_stride * bytes;
    return rest;
  }
};

// B (k × n) packed into the GEMM core's panels, ready for any number of products with it
// (from the packed-weight cache when B was kept there).
class PackedGemmB {
 public:
  PackedGemmB(std::shared_ptr<const PackedFloats> panels, int64_t k, int64_t n)
      : panels_(std::move(panels)), k_(k), n_(n) {}
  const float* panels() const { return panels_->data(); }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

 private:
  std::shared_ptr<const PackedFloats> panels_;
  int64_t k_, n_;
};

// B packed for the GEMM core: from the packed-weight cache when it holds it; else packed
// now and offered to the cache when B has been seen before, or at once with `keep_now` (a
// weight known to be read again: a loaded bundle's).
PackedGemmB pack_gemm_b(int64_t k, int64_t n, const GemmOperand& b, bool keep_now = false);

// What the core does to C as it finishes it, so a linear layer's bias, activation and
// residual add cost no pass of their own over the product:
// - `bias` (n floats): every row gets bias[j] added in column j as the core stores its last
//   k slice ((A · B) + bias, rounded as the unfused sum would be);
// - `finish`: called in place on each finished run of a row, values = C(row, col ..
//   col + n - 1), while the task that computed them still has them in cache. Each result
//   may depend on its own value and position only, so how rows are cut into runs never
//   changes the bits.
struct GemmEpilogue {
  const float* bias = nullptr;
  std::function<void(float* values, int64_t row, int64_t col, int64_t n)> finish;
};

// The rows of C the core's inner kernel computes at once on this CPU (12 with AVX-512, 6
// otherwise). A caller that cuts a product into row chunks should cut at multiples of it:
// a chunk of 256 rows on AVX-512 ends in a 4-row tile, which reads B at a third of the
// rate per FMA.
int64_t gemm_row_tile();

// For tests: 6 or 12 forces that tile height where the instruction set has the registers
// for it (12 needs AVX-512), so both kernels are checked on one machine; 0 restores the
// choice by CPU. Not for use while products run on other threads.
void set_gemm_row_tile_for_test(int rows);

// C (m × n, row stride ldc, f32) = A (m × k) · B, overwriting C, then `epilogue`; k = 0
// gives zeros (plus the epilogue).
void gemm_f32(int64_t m, const GemmOperand& a, const PackedGemmB& b, float* c, int64_t ldc,
              const GemmEpilogue& epilogue = {});

// C (m × n, row stride ldc) = A (m × k) · B (k × n), overwriting C; k = 0 gives zeros.
// Runs on all cores, or inline when called from inside a parallel_for job. The summation
// order depends only on m, n and k, never on the strides or the thread count.
void gemm_f32(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b, float* c,
              int64_t ldc);

// Packed-weight cache statistics, for tests and logs.
struct PackedWeightStats {
  int64_t hits = 0;     // a B found packed
  int64_t packs = 0;    // a B packed (and kept, or not when seen once)
  int64_t entries = 0;  // packed Bs kept now
  int64_t bytes = 0;    // their size
};
PackedWeightStats packed_weight_stats();
void clear_packed_weights();

}  // namespace kiln::runtime::cpu

#endif  // KILN_RUNTIME_CPU_GEMM_H_
