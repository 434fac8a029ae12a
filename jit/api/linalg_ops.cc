// matmul and concat.
#include <algorithm>

#include "jit/graph/record.h"
#include "kiln/ops.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b) {
  return jit::record(ops::OpKind::Matmul, {a, b}, {});
}

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  // Many parts become a concat of concats, so no kernel reads more than a bounded number of
  // buffers (jit/fusion/planner.h); concatenation is associative along one axis.
  constexpr size_t kMaxParts = 32;
  if (tensors.size() > kMaxParts) {
    jit::check_op(ops::OpKind::Concat, tensors, attrs);  // errors name the caller's operands
    std::vector<Tensor> groups;
    for (size_t begin = 0; begin < tensors.size(); begin += kMaxParts) {
      const size_t end = std::min(tensors.size(), begin + kMaxParts);
      groups.push_back(
          concat(std::vector<Tensor>(tensors.begin() + begin, tensors.begin() + end), axis));
    }
    return concat(groups, axis);
  }
  return jit::record(ops::OpKind::Concat, tensors, std::move(attrs));
}

}  // namespace kiln
