// update_slice(x, update, axis, start): x with x[start : start + update.shape[axis]] along
// axis replaced by update, cast to x's dtype (a KV cache write). What every layer shares
// about it: the shape rule with its errors, and the reference evaluation.
//
// `start` is the node's scalar parameter (jit/fusion/trace.h), not part of the plan key: a
// decode loop that writes position 0, 1, 2, ... reuses one plan. Or it is a tensor, a third
// input holding one I32 or I64 value that the kernel reads when it runs, so a compiled step
// (kiln::compile) that takes the position as an input writes where the call says; such a
// start is checked when it is read, and one outside x is a kiln::Error at the sync. Its kernel
// writes only the update's elements, into x's own buffer when nothing else can see x
// (docs/fusion.md), else into a copy of x.
//
// A region write (update_slice(x, update, starts)) is the same op with attrs.offsets: the
// update may be smaller than x along every dim, and lands at offsets[d] along each dim d
// other than the axis (at `start` along the axis, as above).
#ifndef KILN_OPS_UPDATE_SLICE_H_
#define KILN_OPS_UPDATE_SLICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// x's type; attrs.axis made non-negative. Errors name the operands: a rank or a dim that
// differs from x's, an axis out of range, or a range [start, start + length) outside x
// (along the axis, or along any dim of a region).
absl::StatusOr<ValueType> infer_update_slice(const std::vector<ValueType>& in, Attrs& attrs);

// The error for a start that puts [start, start + length) outside an axis of `extent`.
std::string update_start_error(int64_t start, int64_t length, int64_t extent, int axis);

// The reference: a copy of x, then update's elements at start along the axis.
void evaluate_update_slice(const Attrs& attrs, const ValueType& out,
                           const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_UPDATE_SLICE_H_
