// take, take_along_axis, embedding and slice with a start tensor: gathers (ops/gather.h);
// topk; update_slice; index_add and the segment sums built on it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/value_type.h"

namespace kiln {

Tensor take(const Tensor& x, const Tensor& indices, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::Take, {x, indices}, std::move(attrs));
}

Tensor take_along_axis(const Tensor& x, const Tensor& indices, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::TakeAlongAxis, {x, indices}, std::move(attrs));
}

Tensor embedding(const Tensor& table, const Tensor& ids) { return take(table, ids, 0); }

// The selection is one row op (topk_indices); the values are a gather of x at its result,
// which fuses into the same kernel's epilogue or the values' consumers.
TopK topk(const Tensor& x, int64_t k, int axis, bool largest) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.k = k;
  attrs.largest = largest;
  Tensor indices = jit::record(ops::OpKind::TopkIndices, {x}, std::move(attrs));
  return TopK{take_along_axis(x, indices, axis), indices};
}

Tensor slice(const Tensor& x, int axis, const Tensor& start, int64_t length) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.k = length;
  return jit::record(ops::OpKind::DynamicSlice, {x, start}, std::move(attrs));
}

Tensor update_slice(const Tensor& x, const Tensor& update, int axis, int64_t start) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.start = start;
  return jit::record(ops::OpKind::UpdateSlice, {x, update}, std::move(attrs));
}

Tensor update_slice(const Tensor& x, const Tensor& update, const std::vector<int64_t>& starts) {
  if (starts.size() != x.shape().size() || starts.empty()) {
    throw Error(absl::StrCat("[update_slice] x ", ops::format_shape(x.shape()), " and update ",
                             ops::format_shape(update.shape()), " with ", starts.size(),
                             " starts (expected one per dim of x)"));
  }
  // The first dim's start is the node's parameter, as for a write along one axis; the others
  // are attributes. All zero but the first: the write along axis 0 it is.
  ops::Attrs attrs;
  attrs.axis = 0;
  attrs.start = starts[0];
  attrs.offsets = starts;
  attrs.offsets[0] = 0;
  if (std::all_of(attrs.offsets.begin(), attrs.offsets.end(), [](int64_t s) { return s == 0; }) &&
      update.shape().size() == x.shape().size() &&
      std::equal(update.shape().begin() + 1, update.shape().end(), x.shape().begin() + 1)) {
    attrs.offsets.clear();
  }
  return jit::record(ops::OpKind::UpdateSlice, {x, update}, std::move(attrs));
}

Tensor update_slice(const Tensor& x, const Tensor& update, int axis, const Tensor& start) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::UpdateSlice, {x, update, start}, std::move(attrs));
}

Tensor index_add(const Tensor& x, int axis, const Tensor& index, const Tensor& source) {
  ops::Attrs attrs;
  attrs.axis = axis;
  // Recorded as (x, source, index): source fuses into the kernel's prologue, as
  // update_slice's update does; index is read from its buffer.
  return jit::record(ops::OpKind::IndexAdd, {x, source, index}, std::move(attrs));
}

Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments) {
  if (data.ndim() == 0 || num_segments < 0) {
    throw Error(absl::StrCat("[segment_sum] data ", ops::format_shape(data.shape()),
                             " with num_segments ", num_segments,
                             " (expected data of rank >= 1 and num_segments >= 0)"));
  }
  const Tensor values = data.dtype() == DType::Bool ? data.astype(DType::I64) : data;
  std::vector<int64_t> shape = values.shape();
  shape[0] = num_segments;
  return index_add(Tensor::zeros(shape, values.dtype()), 0, segment_ids, values);
}

Tensor bincount(const Tensor& x, int64_t length) {
  if (x.ndim() != 1 || length < 0) {
    throw Error(absl::StrCat("[bincount] x ", ops::format_shape(x.shape()), " with length ", length,
                             " (expected one dim of I32 or I64 values and length >= 0)"));
  }
  return segment_sum(Tensor::ones(x.shape(), DType::I64), x, length);
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t length) {
  if (x.ndim() != 1 || weights.shape() != x.shape() || length < 0) {
    throw Error(absl::StrCat("[bincount] x ", ops::format_shape(x.shape()), " and weights ",
                             ops::format_shape(weights.shape()), ", length ", length,
                             " (expected one dim of I32 or I64 values, one weight each and "
                             "length >= 0)"));
  }
  return segment_sum(weights, x, length);
}

}  // namespace kiln
