// nn.h: softmax, log_softmax, layer_norm, rms_norm as single ops; linear as matmul + add.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "jit/api/checked_axis.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/infer.h"
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

// The attention node: causal with `bottom_right` puts query i at key Sk - Sq + i.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                 bool bottom_right, std::optional<double> scale) {
  if (!q.defined() || !k.defined() || !v.defined()) {
    throw Error("[scaled_dot_product_attention] q, k and v must be defined tensors");
  }
  ops::Attrs attrs;
  attrs.causal = causal;
  attrs.bottom_right = causal && bottom_right;
  const double d = q.ndim() >= 1 ? static_cast<double>(q.shape().back()) : 1.0;
  attrs.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(std::max(d, 1.0));
  std::vector<Tensor> inputs{q, k, v};
  if (mask.defined() && q.ndim() >= 2 && k.ndim() >= 2) {
    // The node takes an additive mask of the scores' own shape; both steps are views or
    // elementwise ops that fuse into the attention kernel.
    std::vector<int64_t> scores = q.shape();
    scores.back() = k.shape()[k.ndim() - 2];
    absl::StatusOr<ops::Shape> joint = ops::broadcast_shapes(mask.shape(), scores);
    if (!joint.ok() || *joint != scores) {
      throw Error(absl::StrCat("[scaled_dot_product_attention] the mask ", jit::type_text(mask),
                               " does not broadcast to the scores' shape ",
                               ops::format_shape(scores)));
    }
    Tensor additive = mask;
    if (mask.dtype() == DType::Bool) {
      additive = where(mask, Tensor::full({}, 0.0, q.dtype()),
                       Tensor::full({}, -std::numeric_limits<double>::infinity(), q.dtype()));
    }
    inputs.push_back(additive.broadcast_to(scores));
  }
  return jit::record(OpKind::Attention, inputs, std::move(attrs));
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
    throw Error(
        absl::StrCat("[linear] expected x [..., in], w [out, in], b [out] (x: ", jit::type_text(x),
                     ", w: ", jit::type_text(w), ", b: ", jit::type_text(b), ")"));
  }
  return matmul(x, w.transpose(0, 1)) + b;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, bool causal, std::optional<double> scale) {
  return attention(q, k, v, mask, causal, /*bottom_right=*/false, scale);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, CausalAlignment causal,
                                    std::optional<double> scale) {
  return attention(q, k, v, mask, /*causal=*/true, causal == CausalAlignment::BottomRight, scale);
}

Tensor linear(const Tensor& x, const Tensor& w) {
  bool ok = x.defined() && w.defined() && x.ndim() >= 1 && w.ndim() == 2 &&
            x.shape().back() == w.shape()[1];
  if (!ok) {
    throw Error(absl::StrCat("[linear] expected x [..., in], w [out, in] (x: ", jit::type_text(x),
                             ", w: ", jit::type_text(w), ")"));
  }
  return matmul(x, w.transpose(0, 1));
}

}  // namespace kiln
