// index_add(x, source, index, axis): x with source's slices added at the positions `index`
// names along axis (PyTorch's index_add, TensorFlow's unsorted_segment_sum when x is zeros).
// What every layer shares about it: the shape rule with its errors, the index rule and the
// reference evaluation.
//
//   x        any numeric dtype (not bool); the result has x's type
//   source   x's rank; source.shape[axis] = L, every other dim equal to x's; cast to x's dtype
//   index    L values, I32 or I64, one dim; negative values count from the end (as take)
//   out = x, then for l = 0, 1, ..., L - 1: out[..., index[l], ...] += source[..., l, ...]
//
// Each element's additions happen in the order of l, in x's dtype, so on the host the result
// does not depend on how the work is split. An index outside [-extent, extent) is a
// kiln::Error at the sync that names it; nothing is written then. The recorded node's
// operands are (x, source, index): source is computed through the kernel's prologue, as
// update_slice's update is, and index is read from its buffer when the kernel runs.
#ifndef KILN_OPS_INDEX_ADD_H_
#define KILN_OPS_INDEX_ADD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// x's type; attrs.axis made non-negative. Errors name the operands: a bool x, indices that
// are not one dim of I32 or I64, a source whose rank or dims do not match.
absl::StatusOr<ValueType> infer_index_add(const std::vector<ValueType>& in, Attrs& attrs);

// The position along x's axis (of `extent`) of each of the `count` indices in `index` (of
// dtype `dt`), negative ones counted from the end; throws kiln::Error
// (ops::index_error_message) for the first out of range.
std::vector<int64_t> index_add_positions(const base::Buffer& index, DType dt, int64_t count,
                                         int64_t extent);

// The reference: a copy of x, then each of source's slices added in index order. Throws
// kiln::Error (ops::index_error_message) for the first index out of range, before writing.
void evaluate_index_add(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                        base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_INDEX_ADD_H_
