// Views: inference and reference evaluation.
#include "ops/view.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/infer.h"
#include "ops/reference_loops.h"

namespace kiln::ops {
namespace {

absl::StatusOr<ValueType> infer_reshape(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Reshape;
  int64_t total = numel(in[0].shape);
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < attrs.shape.size(); ++i) {
    int64_t d = attrs.shape[i];
    if (d == -1) {
      if (infer_at >= 0) {
        return op_error(op, in,
                        absl::StrCat("shape ", format_shape(attrs.shape), " has more than one -1"));
      }
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d < 0) {
      return op_error(
          op, in, absl::StrCat("shape ", format_shape(attrs.shape), " has a negative dimension"));
    }
    if (__builtin_mul_overflow(known, d, &known)) {
      return op_error(op, in,
                      absl::StrCat("shape ", format_shape(attrs.shape),
                                   " has more elements than fit in int64"));
    }
  }
  Shape out = attrs.shape;
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return op_error(op, in,
                      absl::StrCat("cannot infer the -1 in ", format_shape(attrs.shape), " for ",
                                   total, " elements"));
    }
    out[infer_at] = total / known;
  } else if (known != total) {
    return op_error(op, in,
                    absl::StrCat("shape ", format_shape(attrs.shape), " has ", known,
                                 " elements but the input has ", total));
  }
  attrs.shape = out;
  return ValueType{out, in[0].dtype};
}

absl::StatusOr<ValueType> infer_permute(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Permute;
  int ndim = static_cast<int>(in[0].shape.size());
  if (static_cast<int>(attrs.axes.size()) != ndim) {
    return op_error(op, in,
                    absl::StrCat("axes [", absl::StrJoin(attrs.axes, ", "),
                                 "] must name each of the ", ndim, " axes once"));
  }
  std::vector<int> axes;
  std::vector<bool> seen(ndim, false);
  Shape out;
  for (int axis : attrs.axes) {
    absl::StatusOr<int> a = normalize_axis(axis, ndim);
    if (!a.ok()) return op_error(op, in, std::string(a.status().message()));
    if (seen[*a]) {
      return op_error(
          op, in,
          absl::StrCat("axes [", absl::StrJoin(attrs.axes, ", "), "] name axis ", *a, " twice"));
    }
    seen[*a] = true;
    axes.push_back(*a);
    out.push_back(in[0].shape[*a]);
  }
  attrs.axes = axes;
  return ValueType{out, in[0].dtype};
}

absl::StatusOr<ValueType> infer_broadcast_to(const std::vector<ValueType>& in, const Attrs& attrs) {
  const OpKind op = OpKind::BroadcastTo;
  const Shape& from = in[0].shape;
  const Shape& to = attrs.shape;
  auto fail = [&] {
    return op_error(op, in,
                    absl::StrCat("cannot broadcast to ", format_shape(to),
                                 " (each dim must equal the target's or be 1)"));
  };
  if (to.size() < from.size()) return fail();
  absl::StatusOr<int64_t> count = checked_numel(to);
  if (!count.ok()) return op_error(op, in, std::string(count.status().message()));
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[offset + i] && from[i] != 1) return fail();
  }
  return ValueType{to, in[0].dtype};
}

// Python's slice.indices: a negative bound counts from the end, then bounds are clamped to
// [0, dim] for a forward step and to [-1, dim - 1] for a backward one (-1: before element 0).
// The canonical form keeps `start` as the first element taken. A backward slice's stop of -1
// is written as -(dim + 1), which means "before element 0" when read again (a plain -1 would
// mean the last element), so a dumped trace loads to the same shape.
absl::StatusOr<ValueType> infer_slice(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Slice;
  int ndim = static_cast<int>(in[0].shape.size());
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  const int64_t step = attrs.step;
  if (step == 0) return op_error(op, in, "step 0 is not allowed (expected step != 0)");
  if (step == std::numeric_limits<int64_t>::min()) {
    return op_error(op, in,
                    absl::StrCat("step ", step, " is out of range (expected |step| < 2^63)"));
  }
  const int64_t dim = in[0].shape[*axis];
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? dim : dim - 1;
  auto clamp = [&](int64_t i) {
    if (i < 0) i += dim;
    return std::clamp<int64_t>(i, lower, upper);
  };
  int64_t start = clamp(attrs.start), stop = clamp(attrs.stop), extent = 0;
  if (step > 0) {
    stop = std::max(stop, start);
    extent = stop > start ? (stop - start - 1) / step + 1 : 0;
  } else if (start > stop) {
    extent = (start - stop - 1) / -step + 1;
    if (stop < 0) stop = -(dim + 1);
  } else {
    start = stop = 0;  // empty
  }
  Shape out = in[0].shape;
  out[*axis] = extent;
  attrs.axis = *axis;
  attrs.start = start;
  attrs.stop = stop;
  return ValueType{out, in[0].dtype};
}

}  // namespace

absl::StatusOr<ValueType> infer_view(OpKind op, const std::vector<ValueType>& in, Attrs& attrs) {
  switch (op) {
    case OpKind::Reshape:
      return infer_reshape(in, attrs);
    case OpKind::Permute:
      return infer_permute(in, attrs);
    case OpKind::BroadcastTo:
      return infer_broadcast_to(in, attrs);
    case OpKind::Slice:
      return infer_slice(in, attrs);
    case OpKind::Contiguous:
      return in[0];
      KILN_LEAF_OPS(KILN_OP_CASE)
      KILN_UNARY_OPS(KILN_OP_CASE)
      KILN_BINARY_OPS(KILN_OP_CASE)
      KILN_STRUCTURED_OPS(KILN_OP_CASE)
      break;
  }
  return op_error(op, in, "is not a view op");
}

void evaluate_view(OpKind op, const Attrs& attrs, const ValueType& out, const HostValue& in,
                   base::Buffer& result) {
  const int64_t size = dtype_size(out.dtype);
  if (op == OpKind::Reshape || op == OpKind::Contiguous) {
    std::memcpy(result.data(), in.buffer->data(), static_cast<size_t>(numel(out.shape) * size));
    return;
  }
  Strides in_strides = contiguous_strides(in.type.shape);
  Strides strides;
  int64_t base = 0;
  if (op == OpKind::Permute) {
    for (int axis : attrs.axes) strides.push_back(in_strides[axis]);
  } else if (op == OpKind::BroadcastTo) {
    strides = broadcast_strides(in.type.shape, out.shape);
  } else {  // Slice
    strides = in_strides;
    strides[attrs.axis] *= attrs.step;
    base = attrs.start * in_strides[attrs.axis];
  }
  const std::byte* src = in.buffer->data();
  std::byte* dst = result.data();
  for_each_index(out.shape, {strides},
                 [&](int64_t i, const std::vector<int64_t>& off) {
                   std::memcpy(dst + i * size, src + off[0] * size, static_cast<size_t>(size));
                 },
                 {base});
}

}  // namespace kiln::ops
