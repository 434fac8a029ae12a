// Row ops (OpClass::kRowNorm): each result along one axis reads its whole row. softmax,
// log_softmax, layer_norm and rms_norm; the scan cumsum; the selection topk_indices. Their
// shape and dtype rules and reference evaluation.
#ifndef KILN_OPS_ROW_OPS_H_
#define KILN_OPS_ROW_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of row op `op`; attrs.axis made non-negative (the last axis for
// layer_norm and rms_norm).
absl::StatusOr<ValueType> infer_row_op(OpKind op, const std::vector<ValueType>& in, Attrs& attrs);

void evaluate_row_op(OpKind op, const Attrs& attrs, const ValueType& out,
                     const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_ROW_OPS_H_
