// Leaf ops (OpClass::kLeaf): input, constant, arange, rand and randn take no operands; their
// attributes give the shape and dtype. Their shape rule and reference evaluation.
#ifndef KILN_OPS_LEAF_H_
#define KILN_OPS_LEAF_H_

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of leaf `op` from attrs.shape and attrs.dtype: a checked element count, a
// floating dtype for rand and randn, rank 1 for arange.
absl::StatusOr<ValueType> infer_leaf(OpKind op, const Attrs& attrs);

// Fills `result` (of type `out`) with leaf `op`'s values. An input is bound to its buffer,
// never evaluated (jit/eval/reference_graph.cc), so it leaves `result` as it is.
void evaluate_leaf(OpKind op, const Attrs& attrs, const ValueType& out, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_LEAF_H_
