// Shape and dtype inference: the arity check and the dispatch on the op's class (each class's
// rules are in its own file: ops/elementwise.cc, ops/reduction.cc, ops/view.cc, ...), and what
// those rules share: the error messages, axis normalization, broadcasting and the
// elementwise dtype rules that lowering reads too.
#include "ops/infer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/attention.h"
#include "ops/collective.h"
#include "ops/concat.h"
#include "ops/custom_ops.h"
#include "ops/elementwise.h"
#include "ops/gather.h"
#include "ops/index_add.h"
#include "ops/leaf.h"
#include "ops/matmul.h"
#include "ops/reduction.h"
#include "ops/row_ops.h"
#include "ops/scalar_math.h"
#include "ops/update_slice.h"
#include "ops/view.h"

namespace kiln::ops {

std::string operand_name(OpKind op, size_t index) {
  switch (op_class(op)) {
    case OpClass::kBinary:
    case OpClass::kMatmul:
      return index == 0 ? "a" : "b";
    case OpClass::kWhere:
      return index == 0 ? "cond" : (index == 1 ? "a" : "b");
    case OpClass::kConcat:
      return absl::StrCat("tensors[", index, "]");
    case OpClass::kCustom:
    case OpClass::kCustomKernel:
      return absl::StrCat("inputs[", index, "]");
    case OpClass::kRowNorm:
      return index == 0 ? "x" : (index == 1 ? "weight" : "bias");
    case OpClass::kGather:
      return index == 0 ? "x" : (op == OpKind::DynamicSlice ? "start" : "indices");
    case OpClass::kUpdateSlice:
      if (op == OpKind::IndexAdd) return index == 0 ? "x" : (index == 1 ? "source" : "index");
      return index == 0 ? "x" : "update";
    case OpClass::kAttention: {
      static const char* const kNames[] = {"q", "k", "v", "mask"};
      return index < 4 ? kNames[index] : "input";
    }
    case OpClass::kLeaf:
    case OpClass::kUnary:
    case OpClass::kCast:
    case OpClass::kReduce:
    case OpClass::kArgReduce:
    case OpClass::kView:
    case OpClass::kCollective:
      return "x";
  }
  return "x";
}

std::string describe_inputs(OpKind op, const std::vector<ValueType>& inputs) {
  if (inputs.empty()) return "";
  std::vector<std::string> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(absl::StrCat(operand_name(op, i), ": ", format_type(inputs[i])));
  }
  return absl::StrCat(" (", absl::StrJoin(parts, ", "), ")");
}

// Builds the error for `op`: "[op] what (x: f32[2, 3])".
absl::Status op_error(OpKind op, const std::vector<ValueType>& inputs, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("[", op_name(op), "] ", what, describe_inputs(op, inputs)));
}

absl::StatusOr<int> normalize_axis(int axis, int ndim) {
  if (axis < -ndim || axis >= ndim) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ",
                                                   ndim, " (expected ", -ndim, " <= axis < ", ndim,
                                                   ")"));
  }
  return axis < 0 ? axis + ndim : axis;
}

absl::StatusOr<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", format_shape(a), " and ", format_shape(b), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

DType scalar_dtype(DType tensor, double value) {
  // Beside a block-quantized tensor: f32, so that the op itself refuses the tensor by name.
  if (is_block_quantized(tensor)) return DType::F32;
  if (is_floating(tensor)) return tensor;
  if (std::isfinite(value) && value == std::trunc(value)) {
    return tensor == DType::Bool ? DType::I64 : tensor;
  }
  return DType::F32;
}

DType compute_dtype(OpKind op, const std::vector<DType>& operands) {
  DType dt = operands.empty() ? DType::F32 : operands[0];
  for (DType d : operands) dt = promote_types(dt, d);
  if (op_class(op) == OpClass::kUnary && !math::gives_bool(op)) return unary_dtype(op, dt);
  if (op_class(op) == OpClass::kBinary && !math::keeps_integers(op) && !is_floating(dt)) {
    return DType::F32;
  }
  return dt;
}

namespace {

absl::StatusOr<ValueType> infer_any(OpKind op, const std::vector<ValueType>& inputs, Attrs& attrs) {
  const OpInfo& info = op_info(op);
  if (info.arity >= 0 && static_cast<int>(inputs.size()) != info.arity) {
    return op_error(op, inputs, absl::StrCat("takes ", info.arity, " inputs, got ", inputs.size()));
  }
  switch (info.op_class) {
    case OpClass::kLeaf:
      return infer_leaf(op, attrs);
    case OpClass::kUnary:
      return infer_unary(op, inputs);
    case OpClass::kBinary:
      return infer_binary(op, inputs);
    case OpClass::kWhere:
      return infer_where(inputs);
    case OpClass::kCustom:
      return infer_custom(inputs, attrs);
    case OpClass::kCustomKernel:
      return infer_custom_kernel(inputs, attrs);
    case OpClass::kCast:
      return infer_cast(inputs, attrs);
    case OpClass::kReduce:
      return infer_reduce(op, inputs, attrs);
    case OpClass::kArgReduce:
      return infer_arg_reduce(op, inputs, attrs);
    case OpClass::kView:
      return infer_view(op, inputs, attrs);
    case OpClass::kMatmul:
      return infer_matmul(inputs);
    case OpClass::kConcat:
      return infer_concat(inputs, attrs);
    case OpClass::kRowNorm:
      return infer_row_op(op, inputs, attrs);
    case OpClass::kGather:
      return infer_gather(op, inputs, attrs);
    case OpClass::kUpdateSlice:
      if (op == OpKind::IndexAdd) return infer_index_add(inputs, attrs);
      return infer_update_slice(inputs, attrs);
    case OpClass::kAttention:
      return infer_attention(inputs, attrs);
    case OpClass::kCollective:
      return infer_collective(op, inputs, attrs);
  }
  return op_error(op, inputs, "unknown op class");
}

// An op over a block-quantized operand (docs/quantization.md): matmul's b (a weight, as in
// linear), take's x along any axis but the last (embedding), and the views permute, slice
// and reshape. The block tensor
// acts as its f32 values: the op is typed with f32 in its place, and a view stays in its
// block dtype. Any other op is an error that says to astype first.
absl::StatusOr<ValueType> infer_with_blocks(OpKind op, const std::vector<ValueType>& inputs,
                                            Attrs& attrs) {
  auto refuse = [&](const std::string& why) {
    return op_error(op, inputs,
                    absl::StrCat("takes no block-quantized operand ", why,
                                 ": astype it to f32, f16 or bf16 first"));
  };
  const bool view = op == OpKind::Permute || op == OpKind::Reshape || op == OpKind::Slice;
  const bool weight = op == OpKind::Matmul || op == OpKind::Take;
  if (!view && !weight) {
    return refuse("(block dtypes are read by matmul's b, take's x and row views only)");
  }
  for (size_t k = 1; k < inputs.size(); ++k) {
    if (is_block_quantized(inputs[k].dtype) && op != OpKind::Matmul) {
      return refuse(absl::StrCat("as input ", k));
    }
  }
  if (op == OpKind::Matmul && is_block_quantized(inputs[0].dtype)) {
    return refuse("as a (only the weight b may be block-quantized)");
  }
  std::vector<ValueType> as_f32 = inputs;
  for (ValueType& in : as_f32) {
    if (is_block_quantized(in.dtype)) in.dtype = DType::F32;
  }
  absl::StatusOr<ValueType> out = infer_any(op, as_f32, attrs);
  if (!out.ok()) return out;
  // A stored block tensor keeps its blocks along its last axis, so take reads whole rows
  // of it; jit/api/block_views.cc holds its slices and reshapes to the same rule. (A view
  // of a permuted weight is read in place by its matmul, through any further view.)
  if (op == OpKind::Take && attrs.axis == static_cast<int>(inputs[0].shape.size()) - 1) {
    return refuse("along its last axis, which holds the blocks (whole rows only)");
  }
  if (view) out->dtype = inputs[0].dtype;
  return out;
}

}  // namespace

absl::StatusOr<ValueType> infer_output(OpKind op, const std::vector<ValueType>& inputs,
                                       Attrs& attrs) {
  if (is_block_quantized(attrs.dtype)) {  // a leaf, or an astype loaded from a trace file
    return op_error(op, inputs,
                    absl::StrCat("cannot make a ", dtype_name(attrs.dtype),
                                 " tensor in a program: Tensor::astype quantizes on the host"));
  }
  const bool reads_blocks = std::any_of(inputs.begin(), inputs.end(), [](const ValueType& in) {
    return is_block_quantized(in.dtype);
  });
  absl::StatusOr<ValueType> out =
      reads_blocks ? infer_with_blocks(op, inputs, attrs) : infer_any(op, inputs, attrs);
  // Every op's output shape passes here, so no op makes a rank no device can index.
  if (out.ok()) {
    if (absl::Status s = check_rank(out->shape); !s.ok()) {
      return op_error(op, inputs, std::string(s.message()));
    }
  }
  return out;
}

}  // namespace kiln::ops
