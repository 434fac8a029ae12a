// What inference knows of a value before it is computed: its shape and dtype.
#ifndef KILN_OPS_VALUE_TYPE_H_
#define KILN_OPS_VALUE_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/dtype.h"

namespace kiln::ops {

using Shape = std::vector<int64_t>;

// The most dimensions a shape may have. Every device must index a view of any legal rank:
// the CPU executor unravels positions into per-dimension index arrays, and a generated CUDA
// kernel receives each iteration space's sizes and each view's strides in its by-value
// Params struct (runtime/cuda/kernel_args.h), which CUDA caps at 32 KB of kernel
// parameters: at 32 dims a kernel reading 64 views (jit/fusion/planner.h's kMaxKernelSources)
// needs about 17 KB. Shapes above the limit are rejected where they are created
// (checked_numel) or inferred (infer_output), never computed. Custom kernels take at most 8
// dims (KilnKernelArgs, ops/custom_kernel_args.h; checked by their inference in
// ops/custom_ops.cc).
inline constexpr int kMaxRank = 32;

struct ValueType {
  Shape shape;
  DType dtype = DType::F32;
};

std::string format_shape(const Shape& shape);    // "[2, 3]"
std::string format_type(const ValueType& type);  // "f32[2, 3]"
// An error when `shape` has more than kMaxRank dims: "rank 70 exceeds Kiln's limit of 32
// dimensions (shape [2, 2, 3, 1, ...])".
absl::Status check_rank(const Shape& shape);
// Element count, or an error when the rank exceeds kMaxRank, a dim is negative or the count
// overflows int64 (or the byte size of the largest dtype would).
absl::StatusOr<int64_t> checked_numel(const Shape& shape);
int64_t numel(const Shape& shape);  // for shapes already checked
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

}  // namespace kiln::ops

#endif  // KILN_OPS_VALUE_TYPE_H_
