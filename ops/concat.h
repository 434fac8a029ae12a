// Concat (OpClass::kConcat): tensors joined along one axis, their dtypes promoted. Its shape
// rule and reference evaluation.
#ifndef KILN_OPS_CONCAT_H_
#define KILN_OPS_CONCAT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// The output type of concat; attrs.axis made non-negative.
absl::StatusOr<ValueType> infer_concat(const std::vector<ValueType>& in, Attrs& attrs);

void evaluate_concat(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                     base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_CONCAT_H_
