// matmul and concat.
#include "jit/record.h"
#include "kiln/ops.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b) {
  return jit::record(ops::OpKind::Matmul, {a, b}, {});
}

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::Concat, tensors, std::move(attrs));
}

}  // namespace kiln
