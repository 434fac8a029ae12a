// Elementwise ops: the unary and binary lists of the catalog (OpClass::kUnary, kBinary, whose
// per-element math is the functors of ops/scalar_math.inc), where (kWhere) and astype (kCast).
// Their dtype and shape rules (numpy broadcasting, promotion) and reference evaluation.
#ifndef KILN_OPS_ELEMENTWISE_H_
#define KILN_OPS_ELEMENTWISE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "base/buffer.h"
#include "ops/attrs.h"
#include "ops/op_catalog.h"
#include "ops/reference_evaluator.h"
#include "ops/value_type.h"

namespace kiln::ops {

// What unary `op` gives for an operand of dtype `in`: bool for logical ops, `in` for ops
// defined on integers, otherwise a floating dtype (integers and bool compute in F32).
DType unary_dtype(OpKind op, DType in);

absl::StatusOr<ValueType> infer_unary(OpKind op, const std::vector<ValueType>& in);
absl::StatusOr<ValueType> infer_binary(OpKind op, const std::vector<ValueType>& in);
absl::StatusOr<ValueType> infer_where(const std::vector<ValueType>& in);
// astype: x's shape in attrs.dtype.
ValueType infer_cast(const std::vector<ValueType>& in, const Attrs& attrs);

// A unary, binary or where `op` over broadcast operands, each element computed in double or
// int64 (compute_dtype) and rounded once to `out`'s dtype.
void evaluate_elementwise(OpKind op, const ValueType& out, const std::vector<HostValue>& in,
                          base::Buffer& result);
void evaluate_cast(const ValueType& out, const HostValue& in, base::Buffer& result);

}  // namespace kiln::ops

#endif  // KILN_OPS_ELEMENTWISE_H_
