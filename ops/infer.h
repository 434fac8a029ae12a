// Shape and dtype inference with validation: the one place that decides whether an op
// application is legal. Used when recording (public API) and when loading trace files.
// infer_output checks the arity and dispatches on the op's class; each class's rules live in
// its own file (ops/elementwise.cc, ops/reduction.cc, ops/view.cc, ...), which use the error
// and shape functions declared here.
#ifndef KILN_OPS_INFER_H_
#define KILN_OPS_INFER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::ops {

// Checks `op` applied to `inputs` with `attrs` and returns the output's type. Canonicalizes
// attrs in place (negative axes made non-negative, reduction axes sorted and made explicit,
// reshape's -1 resolved, slice bounds clamped), so equal programs record equal nodes.
// An error message starts with "[op]" and names the inputs' shapes and dtypes.
absl::StatusOr<ValueType> infer_output(OpKind op, const std::vector<ValueType>& inputs,
                                       Attrs& attrs);

// The error for an illegal application of `op`: "[op] what (x: f32[2, 3], ...)", naming each
// input the way the public API does.
absl::Status op_error(OpKind op, const std::vector<ValueType>& inputs, const std::string& what);

// The public API's name for operand `index` of `op` ("a", "weight", "inputs[2]"), so that
// messages read like the call.
std::string operand_name(OpKind op, size_t index);

// The inputs as op_error lists them: " (x: f32[2, 3], ...)", or "" when there are none. The
// custom classes put it after a prefix of their own ("[custom name] ...").
std::string describe_inputs(OpKind op, const std::vector<ValueType>& inputs);

// `axis` of a rank-`ndim` value made non-negative, or an error naming the valid range.
absl::StatusOr<int> normalize_axis(int axis, int ndim);

// numpy broadcasting of two shapes.
absl::StatusOr<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// The dtype a double scalar takes next to a tensor of dtype `tensor` (see kiln/ops.h).
DType scalar_dtype(DType tensor, double value);

// The dtype elementwise ops compute in for these operand dtypes (comparisons compute in it
// and return Bool).
DType compute_dtype(OpKind op, const std::vector<DType>& operands);

}  // namespace kiln::ops

#endif  // KILN_OPS_INFER_H_
