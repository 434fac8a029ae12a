// nn.h: softmax, log_softmax, layer_norm, rms_norm as single ops; linear as matmul + add.
#include "absl/strings/str_cat.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

using ops::OpKind;

Tensor row_op(OpKind op, const std::vector<Tensor>& inputs, int axis, double eps) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.eps = eps;
  return jit::record(op, inputs, std::move(attrs));
}

std::string type_of(const Tensor& t) {
  return t.defined() ? absl::StrCat(dtype_name(t.dtype()), ops::format_shape(t.shape())) : "empty";
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) { return row_op(OpKind::Softmax, {x}, axis, 0); }
Tensor log_softmax(const Tensor& x, int axis) { return row_op(OpKind::LogSoftmax, {x}, axis, 0); }
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return row_op(OpKind::LayerNorm, {x, weight, bias}, -1, eps);
}
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return row_op(OpKind::RmsNorm, {x, weight}, -1, eps);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  // Checked here so the message names linear and its PyTorch layout, not the pieces.
  bool ok = x.defined() && w.defined() && b.defined() && x.ndim() >= 1 && w.ndim() == 2 &&
            b.ndim() == 1 && x.shape().back() == w.shape()[1] && b.shape()[0] == w.shape()[0];
  if (!ok) {
    throw Error(absl::StrCat("[linear] expected x [..., in], w [out, in], b [out] (x: ", type_of(x),
                             ", w: ", type_of(w), ", b: ", type_of(b), ")"));
  }
  return matmul(x, w.transpose(0, 1)) + b;
}

Tensor linear(const Tensor& x, const Tensor& w) {
  bool ok = x.defined() && w.defined() && x.ndim() >= 1 && w.ndim() == 2 &&
            x.shape().back() == w.shape()[1];
  if (!ok) {
    throw Error(absl::StrCat("[linear] expected x [..., in], w [out, in] (x: ", type_of(x),
                             ", w: ", type_of(w), ")"));
  }
  return matmul(x, w.transpose(0, 1));
}

}  // namespace kiln
