// Reductions: inference and reference evaluation.
#include "ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"
#include "ops/scalar_math.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_reduce(OpKind op, const std::vector<ValueType>& in, Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  std::vector<int> axes;
  if (attrs.axes.empty()) {
    for (int i = 0; i < ndim; ++i) axes.push_back(i);
  }
  for (int axis : attrs.axes) {
    absl::StatusOr<int> a = normalize_axis(axis, ndim);
    if (!a.ok()) return op_error(op, in, std::string(a.status().message()));
    if (std::find(axes.begin(), axes.end(), *a) != axes.end()) {
      return op_error(op, in, absl::StrCat("axis ", axis, " appears more than once"));
    }
    axes.push_back(*a);
  }
  std::sort(axes.begin(), axes.end());
  Shape out;
  int64_t extent = 1;
  for (int i = 0; i < ndim; ++i) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    if (reduced) extent *= x.shape[i];
    if (!reduced) out.push_back(x.shape[i]);
    if (reduced && attrs.keepdims) out.push_back(1);
  }
  if ((op == OpKind::Max || op == OpKind::Min) && extent == 0 && numel(out) > 0) {
    return op_error(op, in, "cannot reduce an empty extent (expected every reduced axis > 0)");
  }
  DType dt = x.dtype;
  if (op == OpKind::Sum && !is_floating(dt)) dt = DType::I64;
  if (op == OpKind::Mean && !is_floating(dt)) {
    return op_error(op, in, "needs a floating dtype (use astype first)");
  }
  attrs.axes = axes;
  return ValueType{out, dt};
}

absl::StatusOr<ValueType> infer_arg_reduce(OpKind op, const std::vector<ValueType>& in,
                                           Attrs& attrs) {
  const ValueType& x = in[0];
  int ndim = static_cast<int>(x.shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  Shape out;
  for (int i = 0; i < ndim; ++i) {
    if (i != *axis) out.push_back(x.shape[i]);
    if (i == *axis && attrs.keepdims) out.push_back(1);
  }
  if (x.shape[*axis] == 0 && numel(out) > 0) {
    return op_error(op, in, absl::StrCat("cannot reduce the empty axis ", *axis));
  }
  attrs.axis = *axis;
  return ValueType{out, DType::I64};
}

void evaluate_reduce(OpKind op, const Attrs& attrs, const ValueType& out, const HostValue& in,
                     base::Buffer& result) {
  const Shape& shape = in.type.shape;
  // Map every input element to its output element: reduced axes get stride 0.
  Strides out_strides(shape.size(), 0);
  {
    Shape kept;
    for (size_t d = 0; d < shape.size(); ++d) {
      bool reduced =
          std::find(attrs.axes.begin(), attrs.axes.end(), static_cast<int>(d)) != attrs.axes.end();
      if (!reduced) kept.push_back(shape[d]);
    }
    Strides kept_strides = contiguous_strides(kept);
    size_t k = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      bool reduced =
          std::find(attrs.axes.begin(), attrs.axes.end(), static_cast<int>(d)) != attrs.axes.end();
      if (!reduced) out_strides[d] = kept_strides[k++];
    }
  }
  const int64_t out_count = numel(out.shape);
  const int64_t extent = out_count == 0 ? 0 : numel(shape) / out_count;
  const DType dt = in.type.dtype;
  const bool floating = is_floating(dt);
  std::vector<double> acc_f(out_count, 0.0);
  std::vector<int64_t> acc_i(out_count, 0);
  std::vector<bool> seen(out_count, false);
  for_each_index(shape, {contiguous_strides(shape), out_strides},
                 [&](int64_t, const std::vector<int64_t>& off) {
                   int64_t o = off[1];
                   if (floating) {
                     double v = load_double(*in.buffer, dt, off[0]);
                     double& a = acc_f[o];
                     if (op == OpKind::Sum || op == OpKind::Mean) {
                       a += v;
                     } else if (!seen[o] || std::isnan(v)) {
                       a = v;
                     } else if (!std::isnan(a)) {
                       a = op == OpKind::Max ? std::max(a, v) : std::min(a, v);
                     }
                   } else {
                     int64_t v = load_int(*in.buffer, dt, off[0]);
                     int64_t& a = acc_i[o];
                     if (op == OpKind::Sum) {
                       a = math::wrapping_add(a, v);
                     } else if (!seen[o]) {
                       a = v;
                     } else {
                       a = op == OpKind::Max ? std::max(a, v) : std::min(a, v);
                     }
                   }
                   seen[o] = true;
                 });
  for (int64_t o = 0; o < out_count; ++o) {
    if (floating) {
      double v = op == OpKind::Mean ? acc_f[o] / static_cast<double>(extent) : acc_f[o];
      store_double(result, out.dtype, o, v);
    } else {
      store_int(result, out.dtype, o, acc_i[o]);
    }
  }
}

void evaluate_arg_reduce(OpKind op, const Attrs& attrs, const HostValue& in, base::Buffer& result) {
  RowLayout r = row_layout(in.type.shape, attrs.axis);
  const DType dt = in.type.dtype;
  const bool want_max = op == OpKind::Argmax;
  for (int64_t o = 0; o < r.outer; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < r.extent; ++k) {
        bool better;
        if (is_floating(dt)) {
          double b = load_double(*in.buffer, dt, r.at(o, best, i));
          double v = load_double(*in.buffer, dt, r.at(o, k, i));
          better = !std::isnan(b) && (std::isnan(v) || (want_max ? v > b : v < b));
        } else {
          int64_t b = load_int(*in.buffer, dt, r.at(o, best, i));
          int64_t v = load_int(*in.buffer, dt, r.at(o, k, i));
          better = want_max ? v > b : v < b;
        }
        if (better) best = k;
      }
      result.as<int64_t>()[o * r.inner + i] = best;
    }
  }
}

}  // namespace kiln::ops
