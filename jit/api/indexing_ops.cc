// take, take_along_axis and embedding: gathers (ops/gather.h).
#include "jit/graph/record.h"
#include "kiln/nn.h"
#include "kiln/ops.h"

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

}  // namespace kiln
