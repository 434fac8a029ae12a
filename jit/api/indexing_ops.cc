// take, take_along_axis, embedding and slice with a start tensor: gathers (ops/gather.h);
// topk; update_slice.
#include <string>

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

Tensor update_slice(const Tensor& x, const Tensor& update, int axis, const Tensor& start) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::UpdateSlice, {x, update, start}, std::move(attrs));
}

}  // namespace kiln
