// Reductions of the public API, and the running sum cumsum.
#include "jit/graph/record.h"
#include "kiln/ops.h"

namespace kiln {
namespace {

Tensor reduce(ops::OpKind op, const Tensor& x, std::vector<int> axes, bool keepdims) {
  ops::Attrs attrs;
  attrs.axes = std::move(axes);
  attrs.keepdims = keepdims;
  return jit::record(op, {x}, std::move(attrs));
}

Tensor arg_reduce(ops::OpKind op, const Tensor& x, int axis, bool keepdims) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.keepdims = keepdims;
  return jit::record(op, {x}, std::move(attrs));
}

}  // namespace

Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(ops::OpKind::Sum, x, std::move(axes), keepdims);
}
Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(ops::OpKind::Mean, x, std::move(axes), keepdims);
}
Tensor max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(ops::OpKind::Max, x, std::move(axes), keepdims);
}
Tensor min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce(ops::OpKind::Min, x, std::move(axes), keepdims);
}
Tensor argmax(const Tensor& x, int axis, bool keepdims) {
  return arg_reduce(ops::OpKind::Argmax, x, axis, keepdims);
}
Tensor argmin(const Tensor& x, int axis, bool keepdims) {
  return arg_reduce(ops::OpKind::Argmin, x, axis, keepdims);
}

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.exclusive = exclusive;
  attrs.reverse = reverse;
  return jit::record(ops::OpKind::Cumsum, {x}, std::move(attrs));
}

}  // namespace kiln
