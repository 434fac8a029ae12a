// The CPU device's f32 GEMM core: C = A · B with A and B read through any strides (so a
// transposed weight costs nothing extra), compiled once per instruction set by Highway and
// chosen at run time (AVX-512, AVX2+FMA, SSE4, NEON, ...). docs/cpu_gemm.md says why this
// core rather than a BLAS library, and how it is blocked.
#ifndef KILN_RUNTIME_CPU_GEMM_H_
#define KILN_RUNTIME_CPU_GEMM_H_

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::runtime::cpu {

// A read-only f32 matrix: element (i, j) is data[i * row_stride + j * col_stride].
// `version` identifies the contents (Buffer::version) when the matrix is a whole buffer
// that may be read again unchanged, such as a weight: a B seen twice with the same version
// keeps its packed form (a bounded cache). 0 means the contents are transient.
struct GemmOperand {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  uint64_t version = 0;
};

// B (k × n) packed into the GEMM core's panels, ready for any number of products with it
// (from the packed-weight cache when B was kept there).
class PackedGemmB {
 public:
  PackedGemmB(std::shared_ptr<const std::vector<float>> panels, int64_t k, int64_t n)
      : panels_(std::move(panels)), k_(k), n_(n) {}
  const float* panels() const { return panels_->data(); }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

 private:
  std::shared_ptr<const std::vector<float>> panels_;
  int64_t k_, n_;
};

PackedGemmB pack_gemm_b(int64_t k, int64_t n, const GemmOperand& b);

// C (m × n, row stride ldc) = A (m × k) · B, overwriting C; k = 0 gives zeros.
void gemm_f32(int64_t m, const GemmOperand& a, const PackedGemmB& b, float* c, int64_t ldc);

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
