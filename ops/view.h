// Views (OpClass::kView): reshape, permute, broadcast_to, slice and contiguous are index
// math over their operand, no arithmetic. Their shape rules, which also canonicalize the
// attributes, and reference evaluation (a strided copy).
#ifndef KILN_OPS_VIEW_H_
#define KILN_OPS_VIEW_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of view `op`. Canonicalizes attrs: reshape's -1 resolved, permute's axes
// made non-negative, slice's axis made non-negative and its bounds clamped (Python's
// slice.indices), so equal views record equal nodes.
absl::StatusOr<ValueType> infer_view(OpKind op, const std::vector<ValueType>& in, Attrs& attrs);

void evaluate_view(OpKind op, const Attrs& attrs, const ValueType& out, const HostValue& in,
                   base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_VIEW_H_
