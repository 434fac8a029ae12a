// Elementwise ops: inference and reference evaluation.
#include "ops/elementwise.h"

#include <string>

#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"
#include "ops/scalar_math.h"

namespace kiln::ops {

// From the functor's traits (ops/scalar_math.inc): neg of an i32 is an i32, exp of an i32
// is an f32.
DType unary_dtype(OpKind op, DType in) {
  if (math::gives_bool(op)) return DType::Bool;
  if (math::keeps_integers(op)) return in;
  return is_floating(in) ? in : DType::F32;
}

absl::StatusOr<ValueType> infer_unary(OpKind op, const std::vector<ValueType>& in) {
  // Arithmetic defined on integers is not defined on bool (neg of a bool has no meaning).
  const bool needs_number = !math::gives_bool(op) && math::keeps_integers(op);
  if (needs_number && in[0].dtype == DType::Bool) {
    return op_error(op, in, "does not support dtype bool (expected a numeric dtype)");
  }
  return ValueType{in[0].shape, unary_dtype(op, in[0].dtype)};
}

absl::StatusOr<ValueType> infer_binary(OpKind op, const std::vector<ValueType>& in) {
  absl::StatusOr<Shape> shape = broadcast_shapes(in[0].shape, in[1].shape);
  if (!shape.ok()) return op_error(op, in, std::string(shape.status().message()));
  DType promoted = promote_types(in[0].dtype, in[1].dtype);
  if (math::gives_bool(op)) return ValueType{*shape, DType::Bool};
  if ((op == OpKind::Sub || op == OpKind::Pow) && promoted == DType::Bool) {
    return op_error(op, in, "does not support two bool operands (expected a numeric dtype)");
  }
  // An op without integer meaning (div) computes integers in F32.
  if (!math::keeps_integers(op) && !is_floating(promoted)) promoted = DType::F32;
  return ValueType{*shape, promoted};
}

absl::StatusOr<ValueType> infer_where(const std::vector<ValueType>& in) {
  if (in[0].dtype != DType::Bool) {
    return op_error(OpKind::Where, in, "condition must have dtype bool");
  }
  absl::StatusOr<Shape> shape = broadcast_shapes(in[0].shape, in[1].shape);
  if (shape.ok()) shape = broadcast_shapes(*shape, in[2].shape);
  if (!shape.ok()) return op_error(OpKind::Where, in, std::string(shape.status().message()));
  return ValueType{*shape, promote_types(in[1].dtype, in[2].dtype)};
}

ValueType infer_cast(const std::vector<ValueType>& in, const Attrs& attrs) {
  return ValueType{in[0].shape, attrs.dtype};
}

void evaluate_elementwise(OpKind op, const ValueType& out, const std::vector<HostValue>& in,
                          base::Buffer& result) {
  std::vector<Strides> strides;
  std::vector<DType> dtypes;
  for (const HostValue& v : in) {
    strides.push_back(broadcast_strides(v.type.shape, out.shape));
    dtypes.push_back(v.type.dtype);
  }
  const OpClass cls = op_class(op);
  // Where selects between a and b; the condition does not take part in the compute dtype.
  const DType compute = cls == OpClass::kWhere ? out.dtype : compute_dtype(op, dtypes);
  const bool floating = is_floating(compute);
  auto load = [&](size_t k, int64_t offset) {
    return round_to(compute, load_double(*in[k].buffer, dtypes[k], offset));
  };
  auto load_i = [&](size_t k, int64_t offset) {
    return load_int(*in[k].buffer, dtypes[k], offset);
  };
  auto truth = [&](size_t k, int64_t offset) {
    return load_truth(*in[k].buffer, dtypes[k], offset);
  };
  for_each_index(out.shape, strides, [&](int64_t i, const std::vector<int64_t>& off) {
    if (cls == OpClass::kWhere) {
      size_t pick = truth(0, off[0]) ? 1 : 2;
      if (floating) {
        store_double(result, out.dtype, i, load(pick, off[pick]));
      } else {
        store_int(result, out.dtype, i, load_i(pick, off[pick]));
      }
    } else if (op == OpKind::LogicalNot || op == OpKind::LogicalAnd || op == OpKind::LogicalOr) {
      // Logical ops see each operand as a truth value (NaN is true), whatever its dtype.
      const int64_t a = truth(0, off[0]);
      store_int(result, out.dtype, i,
                cls == OpClass::kUnary ? math::apply_unary(op, a)
                                       : math::apply_binary<int64_t>(op, a, truth(1, off[1])));
    } else if (cls == OpClass::kUnary) {
      if (floating) {
        store_double(result, out.dtype, i, math::apply_unary(op, load(0, off[0])));
      } else {
        store_int(result, out.dtype, i, math::apply_unary(op, load_i(0, off[0])));
      }
    } else if (floating) {
      // A comparison gives 0 or 1, stored as bool.
      store_double(result, out.dtype, i, math::apply_binary(op, load(0, off[0]), load(1, off[1])));
    } else {
      store_int(result, out.dtype, i, math::apply_binary(op, load_i(0, off[0]), load_i(1, off[1])));
    }
  });
}

void evaluate_cast(const ValueType& out, const HostValue& in, base::Buffer& result) {
  int64_t n = numel(out.shape);
  for (int64_t i = 0; i < n; ++i)
    convert_element(*in.buffer, in.type.dtype, i, result, out.dtype, i);
}

}  // namespace kiln::ops
