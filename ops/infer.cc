// Shape and dtype inference with its error messages, for every op class. One file (a little
// over 500 lines) because the rules share the error helpers and read best side by side.
#include "ops/infer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/attention.h"
#include "ops/collective.h"
#include "ops/custom_functions.h"
#include "ops/gather.h"
#include "ops/scalar_math.h"
#include "ops/update_slice.h"

namespace kiln::ops {
namespace {

// Names operands the way the public API does, so messages read like the call.
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

}  // namespace

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

namespace {

// What a unary op gives, from its functor's traits (ops/scalar_math.inc): bool for logical
// ops, the input's dtype for ops defined on integers (neg of an i32 is an i32), otherwise
// a floating dtype (integers and bool compute in F32: exp of an i32 is an f32).
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

// A custom function: its registered arity, numpy broadcasting, computed in F32.
absl::StatusOr<ValueType> infer_custom(const std::vector<ValueType>& in, const Attrs& attrs) {
  const CustomFunction* f = custom_function(attrs.function);
  if (f == nullptr) {
    return op_error(
        OpKind::Custom, in,
        absl::StrCat("names function id ", attrs.function, ", which is not registered"));
  }
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("[custom ", f->name, "] ", what, describe_inputs(OpKind::Custom, in)));
  };
  if (static_cast<int>(in.size()) != f->arity) {
    return fail(absl::StrCat("takes ", f->arity, " inputs, got ", in.size()));
  }
  Shape shape = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    absl::StatusOr<Shape> joined = broadcast_shapes(shape, in[k].shape);
    if (!joined.ok()) return fail(std::string(joined.status().message()));
    shape = *joined;
  }
  return ValueType{shape, DType::F32};
}

// A custom kernel: its arity, then its own shape rule.
absl::StatusOr<ValueType> infer_custom_kernel(const std::vector<ValueType>& in,
                                              const Attrs& attrs) {
  const CustomKernel* k = custom_kernel(attrs.function);
  if (k == nullptr) {
    return op_error(OpKind::CustomKernel, in,
                    absl::StrCat("names kernel id ", attrs.function, ", which is not registered"));
  }
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("[custom_kernel ", k->name, "] ", what,
                                                   describe_inputs(OpKind::CustomKernel, in)));
  };
  if (static_cast<int>(in.size()) != k->arity) {
    return fail(absl::StrCat("takes ", k->arity, " inputs, got ", in.size()));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].shape.size() > 8) {  // KilnKernelArgs holds 8 dims per input
      return fail(absl::StrCat(operand_name(OpKind::CustomKernel, i), " has rank ",
                               in[i].shape.size(), "; a custom kernel takes at most 8 dimensions"));
    }
  }
  absl::StatusOr<ValueType> out = k->infer(in);
  if (!out.ok()) return fail(std::string(out.status().message()));
  for (int64_t d : out->shape) {
    if (d < 0) return fail(absl::StrCat("its shape rule gave a negative size ", d));
  }
  if (out->shape.size() > 8) return fail("its shape rule gave more than 8 dimensions");
  return out;
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

absl::StatusOr<ValueType> infer_reduce(OpKind op, const std::vector<ValueType>& in, Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  std::vector<int> axes;
  if (attrs.axes.empty()) {
    for (int i = 0; i < ndim; ++i) axes.push_back(i);
  }
  for (int axis : attrs.axes) {
    absl::StatusOr<int> a = normalize_axis(axis, ndim);
    if (!a.ok()) return op_error(op, in, std::string(a.status().message()));
    if (std::find(axes.begin(), axes.end(), *a) != axes.end()) {
      return op_error(op, in, absl::StrCat("axis ", axis, " appears more than once"));
    }
    axes.push_back(*a);
  }
  std::sort(axes.begin(), axes.end());
  Shape out;
  int64_t extent = 1;
  for (int i = 0; i < ndim; ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (reduced) extent *= x.shape[i];
    if (!reduced) out.push_back(x.shape[i]);
    if (reduced && attrs.keepdims) out.push_back(1);
  }
  if ((op == OpKind::Max || op == OpKind::Min) && extent == 0 && numel(out) > 0) {
    return op_error(op, in, "cannot reduce an empty extent (expected every reduced axis > 0)");
  }
  DType dt = x.dtype;
  if (op == OpKind::Sum && !is_floating(dt)) dt = DType::I64;
  if (op == OpKind::Mean && !is_floating(dt)) {
    return op_error(op, in, "needs a floating dtype (use astype first)");
  }
  attrs.axes = axes;
  return ValueType{out, dt};
}

absl::StatusOr<ValueType> infer_arg_reduce(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  Shape out;
  for (int i = 0; i < ndim; ++i) {
    if (i != *axis) out.push_back(x.shape[i]);
    if (i == *axis && attrs.keepdims) out.push_back(1);
  }
  if (x.shape[*axis] == 0 && numel(out) > 0) {
    return op_error(op, in, absl::StrCat("cannot reduce the empty axis ", *axis));
  }
  attrs.axis = *axis;
  return ValueType{out, DType::I64};
}

absl::StatusOr<ValueType> infer_reshape(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Reshape;
  int64_t total = numel(in[0].shape);
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < attrs.shape.size(); ++i) {
    int64_t d = attrs.shape[i];
    if (d == -1) {
      if (infer_at >= 0) {
        return op_error(op, in,
                        absl::StrCat("shape ", format_shape(attrs.shape), " has more than one -1"));
      }
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < 0) {
      return op_error(
          op, in, absl::StrCat("shape ", format_shape(attrs.shape), " has a negative dimension"));
    }
    if (__builtin_mul_overflow(known, d, &known)) {
      return op_error(op, in,
                      absl::StrCat("shape ", format_shape(attrs.shape),
                                   " has more elements than fit in int64"));
    }
  }
  Shape out = attrs.shape;
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return op_error(op, in,
                      absl::StrCat("cannot infer the -1 in ", format_shape(attrs.shape), " for ",
                                   total, " elements"));
    }
    out[infer_at] = total / known;
  } else if (known != total) {
    return op_error(op, in,
                    absl::StrCat("shape ", format_shape(attrs.shape), " has ", known,
                                 " elements but the input has ", total));
  }
  attrs.shape = out;
  return ValueType{out, in[0].dtype};
}

absl::StatusOr<ValueType> infer_permute(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Permute;
  int ndim = static_cast<int>(in[0].shape.size());
  if (static_cast<int>(attrs.axes.size()) != ndim) {
    return op_error(op, in,
                    absl::StrCat("axes [", absl::StrJoin(attrs.axes, ", "),
                                 "] must name each of the ", ndim, " axes once"));
  }
  std::vector<int> axes;
  std::vector<bool> seen(ndim, false);
  Shape out;
  for (int axis : attrs.axes) {
    absl::StatusOr<int> a = normalize_axis(axis, ndim);
    if (!a.ok()) return op_error(op, in, std::string(a.status().message()));
    if (seen[*a]) {
      return op_error(
          op, in,
          absl::StrCat("axes [", absl::StrJoin(attrs.axes, ", "), "] name axis ", *a, " twice"));
    }
    seen[*a] = true;
    axes.push_back(*a);
    out.push_back(in[0].shape[*a]);
  }
  attrs.axes = axes;
  return ValueType{out, in[0].dtype};
}

absl::StatusOr<ValueType> infer_broadcast_to(const std::vector<ValueType>& in, const Attrs& attrs) {
  const OpKind op = OpKind::BroadcastTo;
  const Shape& from = in[0].shape;
  const Shape& to = attrs.shape;
  auto fail = [&] {
    return op_error(op, in,
                    absl::StrCat("cannot broadcast to ", format_shape(to),
                                 " (each dim must equal the target's or be 1)"));
  };
  if (to.size() < from.size()) return fail();
  absl::StatusOr<int64_t> count = checked_numel(to);
  if (!count.ok()) return op_error(op, in, std::string(count.status().message()));
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[offset + i] && from[i] != 1) return fail();
  }
  return ValueType{to, in[0].dtype};
}

// Python's slice.indices: a negative bound counts from the end, then bounds are clamped to
// [0, dim] for a forward step and to [-1, dim - 1] for a backward one (-1: before element 0).
// The canonical form keeps `start` as the first element taken. A backward slice's stop of -1
// is written as -(dim + 1), which means "before element 0" when read again (a plain -1 would
// mean the last element), so a dumped trace loads to the same shape.
absl::StatusOr<ValueType> infer_slice(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Slice;
  int ndim = static_cast<int>(in[0].shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  const int64_t step = attrs.step;
  if (step == 0) return op_error(op, in, "step 0 is not allowed (expected step != 0)");
  if (step == std::numeric_limits<int64_t>::min()) {
    return op_error(op, in,
                    absl::StrCat("step ", step, " is out of range (expected |step| < 2^63)"));
  }
  const int64_t dim = in[0].shape[*axis];
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? dim : dim - 1;
  auto clamp = [&](int64_t i) {
    if (i < 0) i += dim;
    return std::clamp<int64_t>(i, lower, upper);
  };
  int64_t start = clamp(attrs.start), stop = clamp(attrs.stop), extent = 0;
  if (step > 0) {
    stop = std::max(stop, start);
    extent = stop > start ? (stop - start - 1) / step + 1 : 0;
  } else if (start > stop) {
    extent = (start - stop - 1) / -step + 1;
    if (stop < 0) stop = -(dim + 1);
  } else {
    start = stop = 0;  // empty
  }
  Shape out = in[0].shape;
  out[*axis] = extent;
  attrs.axis = *axis;
  attrs.start = start;
  attrs.stop = stop;
  return ValueType{out, in[0].dtype};
}

absl::StatusOr<ValueType> infer_matmul(const std::vector<ValueType>& in) {
  const OpKind op = OpKind::Matmul;
  Shape a = in[0].shape;
  Shape b = in[1].shape;
  if (a.empty() || b.empty()) return op_error(op, in, "needs operands of rank >= 1");
  DType dt = promote_types(in[0].dtype, in[1].dtype);
  if (dt == DType::Bool) return op_error(op, in, "does not support dtype bool");
  bool a_vector = a.size() == 1;
  bool b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  int64_t k_a = a[a.size() - 1];
  int64_t k_b = b[b.size() - 2];
  if (k_a != k_b) {
    return op_error(op, in, absl::StrCat("inner dimensions ", k_a, " and ", k_b, " differ"));
  }
  absl::StatusOr<Shape> batch =
      broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch.ok()) {
    return op_error(op, in, absl::StrCat("batch dimensions: ", batch.status().message()));
  }
  Shape out = *batch;
  if (!a_vector) out.push_back(a[a.size() - 2]);
  if (!b_vector) out.push_back(b[b.size() - 1]);
  return ValueType{out, dt};
}

absl::StatusOr<ValueType> infer_concat(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Concat;
  if (in.empty()) return op_error(op, in, "needs at least one tensor");
  int ndim = static_cast<int>(in[0].shape.size());
  if (ndim == 0) return op_error(op, in, "cannot join 0-d tensors (expected rank >= 1)");
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  Shape out = in[0].shape;
  DType dt = in[0].dtype;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    bool fits = static_cast<int>(s.size()) == ndim;
    for (int d = 0; fits && d < ndim; ++d) fits = d == *axis || s[d] == out[d];
    if (!fits) {
      return op_error(
          op, in,
          absl::StrCat("tensors[", i, "] must match tensors[0] in every ", "dim but axis ", *axis));
    }
    out[*axis] += s[*axis];
    dt = promote_types(dt, in[i].dtype);
  }
  attrs.axis = *axis;
  return ValueType{out, dt};
}

// cumsum keeps x's shape; a floating x keeps its dtype, integers and bool sum in I64 (as
// numpy and PyTorch). topk_indices gives the I64 positions of the k largest (or smallest)
// along axis: x's shape with that extent replaced by k.
absl::StatusOr<ValueType> infer_row_scan(OpKind op, const ValueType& x, Attrs& attrs) {
  const int ndim = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, std::max(ndim, 1));
  if (!axis.ok()) return op_error(op, {x}, std::string(axis.status().message()));
  attrs.axis = *axis;
  if (op == OpKind::Cumsum) return ValueType{x.shape, is_floating(x.dtype) ? x.dtype : DType::I64};
  if (ndim == 0) return op_error(op, {x}, "needs x of rank >= 1");
  if (x.dtype == DType::Bool) return op_error(op, {x}, "needs a numeric x, not bool");
  const int64_t extent = x.shape[*axis];
  if (attrs.k < 0 || attrs.k > extent) {
    return op_error(op, {x},
                    absl::StrCat("k ", attrs.k, " is out of range for axis ", *axis, " of extent ",
                                 extent, " (expected 0 <= k <= ", extent, ")"));
  }
  Shape out = x.shape;
  out[*axis] = attrs.k;
  return ValueType{out, DType::I64};
}

absl::StatusOr<ValueType> infer_row_norm(OpKind op, const std::vector<ValueType>& in,
                                         Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  if (op == OpKind::Cumsum || op == OpKind::TopkIndices) return infer_row_scan(op, x, attrs);
  DType dt = x.dtype;
  for (const ValueType& v : in) dt = promote_types(dt, v.dtype);
  if (!is_floating(x.dtype)) return op_error(op, in, "needs a floating x (use astype first)");
  if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
    absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
    if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
    attrs.axis = *axis;
    return ValueType{x.shape, dt};
  }
  if (ndim == 0) return op_error(op, in, "needs x of rank >= 1");
  Shape row{x.shape.back()};
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != row) {
      return op_error(op, in,
                      absl::StrCat(operand_name(op, i), " must have shape ", format_shape(row),
                                   " (x's last dim)"));
    }
  }
  if (!(attrs.eps >= 0) || !std::isfinite(attrs.eps)) {
    return op_error(op, in, absl::StrCat("eps ", attrs.eps, " must be finite and >= 0"));
  }
  attrs.axis = ndim - 1;
  return ValueType{x.shape, dt};
}

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

}  // namespace

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
      return ValueType{inputs[0].shape, attrs.dtype};
    case OpClass::kReduce:
      return infer_reduce(op, inputs, attrs);
    case OpClass::kArgReduce:
      return infer_arg_reduce(op, inputs, attrs);
    case OpClass::kView:
      switch (op) {
        case OpKind::Reshape:
          return infer_reshape(inputs, attrs);
        case OpKind::Permute:
          return infer_permute(inputs, attrs);
        case OpKind::BroadcastTo:
          return infer_broadcast_to(inputs, attrs);
        case OpKind::Slice:
          return infer_slice(inputs, attrs);
        case OpKind::Contiguous:
          return inputs[0];
          KILN_LEAF_OPS(KILN_OP_CASE)
          KILN_UNARY_OPS(KILN_OP_CASE)
          KILN_BINARY_OPS(KILN_OP_CASE)
          KILN_STRUCTURED_OPS(KILN_OP_CASE)
          break;
      }
      return op_error(op, inputs, "is not a view op");
    case OpClass::kMatmul:
      return infer_matmul(inputs);
    case OpClass::kConcat:
      return infer_concat(inputs, attrs);
    case OpClass::kRowNorm:
      return infer_row_norm(op, inputs, attrs);
    case OpClass::kGather:
      return infer_gather(op, inputs, attrs);
    case OpClass::kUpdateSlice:
      return infer_update_slice(inputs, attrs);
    case OpClass::kAttention:
      return infer_attention(inputs, attrs);
    case OpClass::kCollective:
      return infer_collective(op, inputs, attrs);
  }
  return op_error(op, inputs, "unknown op class");
}

}  // namespace

absl::StatusOr<ValueType> infer_output(OpKind op, const std::vector<ValueType>& inputs,
                                       Attrs& attrs) {
  absl::StatusOr<ValueType> out = infer_any(op, inputs, attrs);
  // Every op's output shape passes here, so no op makes a rank no device can index.
  if (out.ok()) {
    if (absl::Status s = check_rank(out->shape); !s.ok()) {
      return op_error(op, inputs, std::string(s.message()));
    }
  }
  return out;
}

}  // namespace kiln::ops
