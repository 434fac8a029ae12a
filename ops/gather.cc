#include "ops/gather.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/scalar_math.h"

namespace kiln::ops {
namespace {

// take_along_axis: indices of x's rank whose other dims broadcast against x's.
absl::StatusOr<Shape> take_along_axis_shape(const std::vector<ValueType>& in, int axis) {
  const Shape& x = in[0].shape;
  const Shape& indices = in[1].shape;
  if (indices.size() != x.size()) {
    return op_error(
        OpKind::TakeAlongAxis, in,
        absl::StrCat("indices must have x's rank ", x.size(), ", not ", indices.size()));
  }
  Shape out(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int>(d) == axis) {
      out[d] = indices[d];
    } else if (x[d] == indices[d] || indices[d] == 1 || x[d] == 1) {
      out[d] = x[d] == 1 ? indices[d] : x[d];
    } else {
      return op_error(OpKind::TakeAlongAxis, in,
                      absl::StrCat("dim ", d, " of indices (", indices[d],
                                   ") does not broadcast with x's (", x[d], ")"));
    }
  }
  return out;
}

// Where gather `op`'s output element at multi-index `out_index` reads x: x's multi-index with
// the gathered axis left at 0 (the caller adds the index). Broadcast dims read 0.
std::vector<int64_t> gather_source_index(OpKind op, const Shape& x, const Shape& indices, int axis,
                                         const std::vector<int64_t>& out_index) {
  std::vector<int64_t> source(x.size(), 0);
  const int rank = static_cast<int>(x.size());
  for (int d = 0; d < rank; ++d) {
    if (d == axis) continue;
    if (op == OpKind::Take) {
      source[d] = out_index[d < axis ? d : d - 1 + static_cast<int>(indices.size())];
    } else {
      source[d] = x[d] == 1 ? 0 : out_index[d];
    }
  }
  return source;
}

// dynamic_slice: x[start : start + length] along axis, start one I32 or I64 value.
absl::StatusOr<ValueType> infer_dynamic_slice(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::DynamicSlice;
  if (!is_index_dtype(in[1].dtype) || numel(in[1].shape) != 1) {
    return op_error(op, in, "start must be one I32 or I64 value (a 0-d tensor)");
  }
  const int ndim = static_cast<int>(in[0].shape.size());
  if (ndim == 0) return op_error(op, in, "cannot slice a 0-d x (expected rank >= 1)");
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  attrs.axis = *axis;
  const int64_t extent = in[0].shape[*axis];
  if (attrs.k < 0 || attrs.k > extent) {
    return op_error(op, in,
                    absl::StrCat("length ", attrs.k, " does not fit in axis ", *axis, " of extent ",
                                 extent, " (expected 0 <= length <= ", extent, ")"));
  }
  Shape out = in[0].shape;
  out[*axis] = attrs.k;
  return ValueType{out, in[0].dtype};
}

// dynamic_slice's reference evaluation: one checked start, then a strided copy.
void evaluate_dynamic_slice(const Attrs& attrs, const ValueType& out,
                            const std::vector<HostValue>& in, base::Buffer& result) {
  const Shape& x = in[0].type.shape;
  const int axis = attrs.axis;
  const int64_t count = slice_start_count(x[axis], out.shape[axis]);
  const int64_t start = load_int(*in[1].buffer, in[1].type.dtype, 0);
  const int64_t position = math::slice_start_position<int64_t>(start, count);
  if (position < 0) throw Error(index_error_message(OpKind::DynamicSlice, start, count));
  const std::vector<int64_t> x_strides = contiguous_strides(x);
  const size_t width = dtype_size(out.dtype);
  const int64_t elements = numel(out.shape);
  std::vector<int64_t> out_index(out.shape.size(), 0);
  for (int64_t e = 0; e < elements; ++e) {
    int64_t rest = e, at = 0;
    for (int d = static_cast<int>(out.shape.size()) - 1; d >= 0; --d) {
      out_index[d] = rest % out.shape[d];
      rest /= out.shape[d];
      at += (out_index[d] + (d == axis ? position : 0)) * x_strides[d];
    }
    std::memcpy(result.as<char>() + e * width, in[0].buffer->as<char>() + at * width, width);
  }
}

}  // namespace

bool is_index_dtype(DType dt) { return dt == DType::I32 || dt == DType::I64; }

int64_t slice_start_count(int64_t extent, int64_t length) { return extent - length + 1; }

absl::StatusOr<ValueType> infer_gather(OpKind op, const std::vector<ValueType>& in, Attrs& attrs) {
  if (op == OpKind::DynamicSlice) return infer_dynamic_slice(in, attrs);
  if (!is_index_dtype(in[1].dtype)) {
    return op_error(op, in,
                    absl::StrCat("needs i32 or i64 indices, not ", dtype_name(in[1].dtype)));
  }
  const int ndim = static_cast<int>(in[0].shape.size());
  if (ndim == 0) return op_error(op, in, "cannot index a 0-d x (expected rank >= 1)");
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  attrs.axis = *axis;
  if (op == OpKind::TakeAlongAxis) {
    absl::StatusOr<Shape> out = take_along_axis_shape(in, *axis);
    if (!out.ok()) return out.status();
    return ValueType{*out, in[0].dtype};
  }
  const Shape& x = in[0].shape;
  Shape out(x.begin(), x.begin() + *axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), x.begin() + *axis + 1, x.end());
  return ValueType{out, in[0].dtype};
}

std::string index_error_message(OpKind op, int64_t index, int64_t extent) {
  if (op == OpKind::UpdateSlice) {  // a start tensor; `extent` is the last valid start
    return absl::StrCat("[update_slice] start ", index,
                        " puts the update outside x (expected 0 <= start <= ", extent, ")");
  }
  if (op == OpKind::DynamicSlice) {  // `extent` is the number of starts that fit
    return absl::StrCat("[dynamic_slice] start ", index,
                        " puts the slice outside x (expected 0 <= start <= ", extent - 1, ")");
  }
  return absl::StrCat("[", op_name(op), "] index ", index,
                      " is out of range for an axis of extent ", extent, " (expected ", -extent,
                      " <= index < ", extent, ")");
}

void evaluate_gather(OpKind op, const Attrs& attrs, const ValueType& out,
                     const std::vector<HostValue>& in, base::Buffer& result) {
  if (op == OpKind::DynamicSlice) {
    evaluate_dynamic_slice(attrs, out, in, result);
    return;
  }
  const Shape& x = in[0].type.shape;
  const Shape& indices = in[1].type.shape;
  const int axis = attrs.axis;
  const int64_t extent = x[axis];
  const std::vector<int64_t> x_strides = contiguous_strides(x);
  const std::vector<int64_t> index_strides = contiguous_strides(indices);
  const size_t width = dtype_size(out.dtype);
  const int64_t count = numel(out.shape);
  std::vector<int64_t> out_index(out.shape.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e;
    for (int d = static_cast<int>(out.shape.size()) - 1; d >= 0; --d) {
      out_index[d] = rest % out.shape[d];
      rest /= out.shape[d];
    }
    // The element of indices this output reads its position from.
    int64_t index_at = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t i = op == OpKind::Take ? out_index[axis + d] : out_index[d];
      index_at += (indices[d] == 1 ? 0 : i) * index_strides[d];
    }
    const int64_t index = load_int(*in[1].buffer, in[1].type.dtype, index_at);
    const int64_t position = math::gather_position<int64_t>(index, extent);
    if (position < 0) throw Error(index_error_message(op, index, extent));
    std::vector<int64_t> source = gather_source_index(op, x, indices, axis, out_index);
    source[axis] = position;
    int64_t at = 0;
    for (size_t d = 0; d < x.size(); ++d) at += source[d] * x_strides[d];
    std::memcpy(result.as<char>() + e * width, in[0].buffer->as<char>() + at * width, width);
  }
}

}  // namespace kiln::ops
