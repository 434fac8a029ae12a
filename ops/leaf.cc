// Leaf ops: the shape rule and the reference evaluation (constants, arange, Philox draws).
#include "ops/leaf.h"

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/scalar_math.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_leaf(OpKind op, const Attrs& attrs) {
  absl::StatusOr<int64_t> count = checked_numel(attrs.shape);
  if (!count.ok()) return op_error(op, {}, std::string(count.status().message()));
  if ((op == OpKind::Rand || op == OpKind::Randn) && !is_floating(attrs.dtype)) {
    return op_error(op, {}, absl::StrCat("needs a floating dtype, got ", dtype_name(attrs.dtype)));
  }
  if (op == OpKind::Arange && attrs.shape.size() != 1) {
    return op_error(op, {}, "has rank 1");
  }
  return ValueType{attrs.shape, attrs.dtype};
}

void evaluate_leaf(OpKind op, const Attrs& attrs, const ValueType& out, base::Buffer& result) {
  int64_t n = numel(out.shape);
  DType dt = out.dtype;
  const int bits = math::uniform_bits(dt);
  for (int64_t i = 0; i < n; ++i) {
    switch (op) {
      case OpKind::Constant:
        store_double(result, dt, i, attrs.value);
        break;
      case OpKind::Arange:
        store_int(result, dt, i, i);
        break;
      case OpKind::Rand:
        store_double(result, dt, i, math::rand_uniform(i, attrs.seed, bits));
        break;
      case OpKind::Randn:
        store_double(result, dt, i, math::rand_normal(i, attrs.seed));
        break;
      case OpKind::Input:
        break;  // an input is bound, never evaluated (reference_graph.cc)
        KILN_UNARY_OPS(KILN_OP_CASE)
        KILN_BINARY_OPS(KILN_OP_CASE)
        KILN_STRUCTURED_OPS(KILN_OP_CASE)
        KILN_VIEW_OPS(KILN_OP_CASE)
        math::not_of_kind(op, "leaf");
    }
  }
}

}  // namespace kiln::ops
