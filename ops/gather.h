// Gathers: take, take_along_axis and dynamic_slice read their first operand x at positions
// that their second operand (integer indices, or a start) gives along one axis. This file holds
// what every layer shares about them: the shape rule, the index rule (ops/scalar_math.inc's
// gather_position: negative indices count from the end), the reference evaluation and the error an
// out-of-range index raises at the sync.
//
//   take(x, indices, axis):            out = x.shape[:axis] + indices.shape + x.shape[axis+1:]
//                                      out[..., i..., ...] = x[..., indices[i...], ...]
//   take_along_axis(x, indices, axis): indices has x's rank; other dims broadcast (numpy);
//                                      out[..., i, ...] = x[..., indices[..., i, ...], ...]
//   dynamic_slice(x, start, axis, length): start is one I32 or I64 value (read when the
//                                      kernel runs; attrs.k holds the length); out has x's
//                                      shape with length along axis,
//                                      out[..., i, ...] = x[..., start + i, ...]; a start
//                                      outside [0, extent - length] is an error, never wrapped
#ifndef KILN_OPS_GATHER_H_
#define KILN_OPS_GATHER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of gather `op`, attrs.axis made non-negative; an error names the operands.
absl::StatusOr<ValueType> infer_gather(OpKind op, const std::vector<ValueType>& in, Attrs& attrs);

// Whether `dt` can hold indices: I32 or I64.
bool is_index_dtype(DType dt);

// The number of starts a dynamic_slice of `length` may take along an axis of `extent`: the
// gathered view's extent, so that a start is checked as a position is.
int64_t slice_start_count(int64_t extent, int64_t length);

// The message of the kiln::Error an out-of-range index raises: it names the op, the index and
// the extent of the axis it indexes. For update_slice (a CUDA kernel's report of a start
// tensor outside x) `index` is the start and `extent` the last start that fits; for
// dynamic_slice `index` is the start and `extent` slice_start_count.
std::string index_error_message(OpKind op, int64_t index, int64_t extent);

// The reference evaluation of gather `op` into `result` (of type `out`); throws kiln::Error
// with index_error_message at the first out-of-range index, in row-major output order.
void evaluate_gather(OpKind op, const Attrs& attrs, const ValueType& out,
                     const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_GATHER_H_
