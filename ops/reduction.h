// Reductions: sum, mean, max and min over a set of axes (OpClass::kReduce), argmax and argmin
// over one axis (kArgReduce). Their shape and dtype rules and reference evaluation.
#ifndef KILN_OPS_REDUCTION_H_
#define KILN_OPS_REDUCTION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of reduction `op`; attrs.axes made explicit (all axes when empty),
// non-negative and sorted. Sums of integers give I64; mean needs a floating x.
absl::StatusOr<ValueType> infer_reduce(OpKind op, const std::vector<ValueType>& in, Attrs& attrs);
// The I64 output type of argmax or argmin; attrs.axis made non-negative.
absl::StatusOr<ValueType> infer_arg_reduce(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs);

// Floats accumulate in double and integers in wrapping int64; max and min of floats give NaN
// when the reduced elements hold one.
void evaluate_reduce(OpKind op, const Attrs& attrs, const ValueType& out, const HostValue& in,
                     base::Buffer& result);
// The first position of the best value, or of the first NaN.
void evaluate_arg_reduce(OpKind op, const Attrs& attrs, const HostValue& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_REDUCTION_H_
