// Views and casts, as Tensor methods. transpose, unsqueeze and squeeze record as permute
// and reshape, and flip as backward slices, so the catalog stays small.
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "jit/api/block_astype.h"
#include "jit/api/block_views.h"
#include "jit/api/checked_axis.h"
#include "jit/graph/node.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

using jit::checked_axis;
using ops::OpKind;

}  // namespace

Tensor Tensor::astype(DType dt) const {
  if (is_block_quantized(dt) || (defined() && is_block_quantized(dtype()))) {
    return jit::block_astype(*this, dt);
  }
  ops::Attrs attrs;
  attrs.dtype = dt;
  return jit::record(OpKind::Astype, {*this}, std::move(attrs));
}

Tensor Tensor::contiguous() const {
  if (!defined()) throw Error("[contiguous] the tensor is empty (undefined)");
  const std::shared_ptr<detail::Node>& node = detail::TensorAccess::node(*this);
  if (node->realized() || node->op == OpKind::Contiguous) return *this;
  return jit::record(OpKind::Contiguous, {*this}, {});
}

Tensor Tensor::reshape(std::vector<int64_t> shape) const {
  ops::Attrs attrs;
  attrs.shape = std::move(shape);
  if (defined() && is_block_quantized(dtype())) {
    if (std::optional<Tensor> view = jit::block_row_view(*this, OpKind::Reshape, attrs)) {
      return *view;
    }
  }
  return jit::record(OpKind::Reshape, {*this}, std::move(attrs));
}

Tensor Tensor::permute(std::vector<int> axes) const {
  ops::Attrs attrs;
  attrs.axes = std::move(axes);
  return jit::record(OpKind::Permute, {*this}, std::move(attrs));
}

Tensor Tensor::transpose(int a, int b) const {
  int n = ndim();
  a = checked_axis("transpose", a, n, *this);
  b = checked_axis("transpose", b, n, *this);
  std::vector<int> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[a], axes[b]);
  return permute(std::move(axes));
}

Tensor Tensor::broadcast_to(std::vector<int64_t> shape) const {
  ops::Attrs attrs;
  attrs.shape = std::move(shape);
  return jit::record(OpKind::BroadcastTo, {*this}, std::move(attrs));
}

Tensor Tensor::unsqueeze(int axis) const {
  axis = checked_axis("unsqueeze", axis, ndim() + 1, *this);
  std::vector<int64_t> shape = this->shape();
  shape.insert(shape.begin() + axis, 1);
  return reshape(std::move(shape));
}

Tensor Tensor::squeeze(int axis) const {
  axis = checked_axis("squeeze", axis, ndim(), *this);
  if (shape()[axis] != 1) {
    throw Error(absl::StrCat("[squeeze] axis ", axis, " has size ", shape()[axis],
                             " (expected 1) (x: ", dtype_name(dtype()), ops::format_shape(shape()),
                             ")"));
  }
  std::vector<int64_t> shape = this->shape();
  shape.erase(shape.begin() + axis);
  return reshape(std::move(shape));
}

Tensor Tensor::slice(int axis, int64_t start, int64_t stop, int64_t step) const {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.start = start;
  attrs.stop = stop;
  attrs.step = step;
  if (defined() && is_block_quantized(dtype())) {
    if (std::optional<Tensor> view = jit::block_row_view(*this, OpKind::Slice, attrs)) {
      return *view;
    }
  }
  return jit::record(OpKind::Slice, {*this}, std::move(attrs));
}

Tensor Tensor::index(const std::vector<Slice>& slices) const {
  if (static_cast<int>(slices.size()) > ndim()) {
    throw Error(absl::StrCat("[slice] ", slices.size(), " slices for a tensor of rank ", ndim(),
                             " (expected at most ", ndim(), ") (x: ", dtype_name(dtype()),
                             ops::format_shape(shape()), ")"));
  }
  Tensor y = *this;
  for (size_t a = 0; a < slices.size(); ++a) {
    const Slice& s = slices[a];
    const bool whole = s.start == 0 && s.step == 1 && s.stop >= shape()[a];
    if (!whole) y = y.slice(static_cast<int>(a), s.start, s.stop, s.step);
  }
  return y;
}

Tensor flip(const Tensor& x, std::vector<int> axes) {
  if (!x.defined()) throw Error("[flip] the tensor is empty (undefined)");
  const int n = x.ndim();
  std::vector<bool> flipped(n, axes.empty());
  for (int axis : axes) {
    const int a = checked_axis("flip", axis, n, x);
    if (flipped[a]) {
      throw Error(absl::StrCat("[flip] axis ", axis, " appears more than once (x: ",
                               dtype_name(x.dtype()), ops::format_shape(x.shape()), ")"));
    }
    flipped[a] = true;
  }
  // x[::-1] along each axis: from the last element to before the first (Python's stop None).
  Tensor y = x;
  for (int a = 0; a < n; ++a) {
    if (flipped[a] && x.shape()[a] > 1) {
      y = y.slice(a, -1, std::numeric_limits<int64_t>::min(), -1);
    }
  }
  return y;
}

}  // namespace kiln
