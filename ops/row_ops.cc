// Row ops: inference and reference evaluation.
#include "ops/row_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"
#include "ops/scalar_math.h"

namespace kiln::ops {
namespace {

// cumsum keeps x's shape; a floating x keeps its dtype, integers and bool sum in I64 (as
// numpy and PyTorch). topk_indices gives the I64 positions of the k largest (or smallest)
// along axis: x's shape with that extent replaced by k.
absl::StatusOr<ValueType> infer_row_scan(OpKind op, const ValueType& x, Attrs& attrs) {
  const int ndim = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, std::max(ndim, 1));
  if (!axis.ok()) return op_error(op, {x}, std::string(axis.status().message()));
  attrs.axis = *axis;
  if (op == OpKind::Cumsum) return ValueType{x.shape, is_floating(x.dtype) ? x.dtype : DType::I64};
  if (ndim == 0) return op_error(op, {x}, "needs x of rank >= 1");
  if (x.dtype == DType::Bool) return op_error(op, {x}, "needs a numeric x, not bool");
  const int64_t extent = x.shape[*axis];
  if (attrs.k < 0 || attrs.k > extent) {
    return op_error(op, {x},
                    absl::StrCat("k ", attrs.k, " is out of range for axis ", *axis, " of extent ",
                                 extent, " (expected 0 <= k <= ", extent, ")"));
  }
  Shape out = x.shape;
  out[*axis] = attrs.k;
  return ValueType{out, DType::I64};
}

// cumsum along the axis: floats add in double, integers and bool in int64 (wrapping). The
// scan walks the row from its end when reverse; exclusive stores the sum before adding.
void eval_cumsum(const Attrs& attrs, const ValueType& out, const HostValue& x,
                 base::Buffer& result) {
  const RowLayout r = row_layout(out.shape, attrs.axis);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      double total = 0;
      uint64_t int_total = 0;
      for (int64_t step = 0; step < r.extent; ++step) {
        const int64_t at = r.at(o, attrs.reverse ? r.extent - 1 - step : step, i);
        if (is_floating(out.dtype)) {
          const double before = total;
          total += load_double(*x.buffer, x.type.dtype, at);
          store_double(result, out.dtype, at, attrs.exclusive ? before : total);
        } else {
          const uint64_t before = int_total;
          int_total += static_cast<uint64_t>(load_int(*x.buffer, x.type.dtype, at));
          result.as<int64_t>()[at] = static_cast<int64_t>(attrs.exclusive ? before : int_total);
        }
      }
    }
  }
}

// The positions of the k first elements of each row in topk's order (math::topk_before).
void eval_topk_indices(const Attrs& attrs, const ValueType& out, const HostValue& x,
                       base::Buffer& result) {
  const RowLayout in = row_layout(x.type.shape, attrs.axis);
  const RowLayout r = row_layout(out.shape, attrs.axis);
  std::vector<int64_t> order(in.extent);
  for (int64_t o = 0; o < in.outer; ++o) {
    for (int64_t i = 0; i < in.inner; ++i) {
      for (int64_t k = 0; k < in.extent; ++k) order[k] = k;
      auto before = [&](int64_t a, int64_t b) {
        const int64_t pa = in.at(o, a, i), pb = in.at(o, b, i);
        if (is_floating(x.type.dtype)) {
          return math::topk_before(load_double(*x.buffer, x.type.dtype, pa), a,
                                   load_double(*x.buffer, x.type.dtype, pb), b, attrs.largest);
        }
        return math::topk_before(load_int(*x.buffer, x.type.dtype, pa), a,
                                 load_int(*x.buffer, x.type.dtype, pb), b, attrs.largest);
      };
      std::partial_sort(order.begin(), order.begin() + r.extent, order.end(), before);
      for (int64_t k = 0; k < r.extent; ++k) result.as<int64_t>()[r.at(o, k, i)] = order[k];
    }
  }
}

}  // namespace

absl::StatusOr<ValueType> infer_row_op(OpKind op, const std::vector<ValueType>& in, Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  if (op == OpKind::Cumsum || op == OpKind::TopkIndices) return infer_row_scan(op, x, attrs);
  DType dt = x.dtype;
  for (const ValueType& v : in) dt = promote_types(dt, v.dtype);
  if (!is_floating(x.dtype)) return op_error(op, in, "needs a floating x (use astype first)");
  if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
    absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
    if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
    attrs.axis = *axis;
    return ValueType{x.shape, dt};
  }
  if (ndim == 0) return op_error(op, in, "needs x of rank >= 1");
  Shape row{x.shape.back()};
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != row) {
      return op_error(op, in,
                      absl::StrCat(operand_name(op, i), " must have shape ", format_shape(row),
                                   " (x's last dim)"));
    }
  }
  if (!(attrs.eps >= 0) || !std::isfinite(attrs.eps)) {
    return op_error(op, in, absl::StrCat("eps ", attrs.eps, " must be finite and >= 0"));
  }
  attrs.axis = ndim - 1;
  return ValueType{x.shape, dt};
}

void evaluate_row_op(OpKind op, const Attrs& attrs, const ValueType& out,
                     const std::vector<HostValue>& in, base::Buffer& result) {
  if (op == OpKind::Cumsum) return eval_cumsum(attrs, out, in[0], result);
  if (op == OpKind::TopkIndices) return eval_topk_indices(attrs, out, in[0], result);
  RowLayout r = row_layout(out.shape, attrs.axis);
  auto x = [&](int64_t idx) {
    return round_to(out.dtype, load_double(*in[0].buffer, in[0].type.dtype, idx));
  };
  auto param = [&](size_t which, int64_t k) {
    return round_to(out.dtype, load_double(*in[which].buffer, in[which].type.dtype, k));
  };
  const double n = static_cast<double>(r.extent);
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      if (op == OpKind::Softmax || op == OpKind::LogSoftmax) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t k = 0; k < r.extent; ++k) max = std::max(max, x(r.at(o, k, i)));
        if (std::isinf(max)) max = 0;  // all -inf rows: avoid inf - inf
        double total = 0;
        for (int64_t k = 0; k < r.extent; ++k) total += std::exp(x(r.at(o, k, i)) - max);
        for (int64_t k = 0; k < r.extent; ++k) {
          double v = x(r.at(o, k, i)) - max;
          double y = op == OpKind::Softmax ? std::exp(v) / total : v - std::log(total);
          store_double(result, out.dtype, r.at(o, k, i), y);
        }
        continue;
      }
      double mean = 0, square_mean = 0;
      for (int64_t k = 0; k < r.extent; ++k) mean += x(r.at(o, k, i));
      mean /= n;
      for (int64_t k = 0; k < r.extent; ++k) {
        double v = x(r.at(o, k, i));
        square_mean += op == OpKind::LayerNorm ? (v - mean) * (v - mean) : v * v;
      }
      double scale = 1.0 / std::sqrt(square_mean / n + attrs.eps);
      for (int64_t k = 0; k < r.extent; ++k) {
        double v = x(r.at(o, k, i));
        double y = op == OpKind::LayerNorm ? (v - mean) * scale * param(1, k) + param(2, k)
                                           : v * scale * param(1, k);
        store_double(result, out.dtype, r.at(o, k, i), y);
      }
    }
  }
}

}  // namespace kiln::ops
