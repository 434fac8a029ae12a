// Matmul (OpClass::kMatmul): numpy's matmul, with vectors promoted to matrices and batch
// dims broadcast. Its shape rule and reference evaluation.
#ifndef KILN_OPS_MATMUL_H_
#define KILN_OPS_MATMUL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_matmul(const std::vector<ValueType>& in);

// Floats multiply and add in double, each operand rounded to the output dtype first;
// integers in wrapping int64.
void evaluate_matmul(const ValueType& out, const std::vector<HostValue>& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_MATMUL_H_
