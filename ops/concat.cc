// Concat: inference and reference evaluation.
#include "ops/concat.h"

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_concat(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::Concat;
  if (in.empty()) return op_error(op, in, "needs at least one tensor");
  int ndim = static_cast<int>(in[0].shape.size());
  if (ndim == 0) return op_error(op, in, "cannot join 0-d tensors (expected rank >= 1)");
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, ndim);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  Shape out = in[0].shape;
  DType dt = in[0].dtype;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    bool fits = static_cast<int>(s.size()) == ndim;
    for (int d = 0; fits && d < ndim; ++d) fits = d == *axis || s[d] == out[d];
    if (!fits) {
      return op_error(
          op, in,
          absl::StrCat("tensors[", i, "] must match tensors[0] in every ", "dim but axis ", *axis));
    }
    out[*axis] += s[*axis];
    dt = promote_types(dt, in[i].dtype);
  }
  attrs.axis = *axis;
  return ValueType{out, dt};
}

void evaluate_concat(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                     base::Buffer& result) {
  RowLayout r = row_layout(out.shape, attrs.axis);
  int64_t offset = 0;  // along the axis
  for (const HostValue& v : in) {
    int64_t extent = v.type.shape[attrs.axis];
    for (int64_t o = 0; o < r.outer; ++o) {
      for (int64_t j = 0; j < extent * r.inner; ++j) {
        convert_element(*v.buffer, v.type.dtype, o * extent * r.inner + j, result, out.dtype,
                        (o * r.extent + offset) * r.inner + j);
      }
    }
    offset += extent;
  }
}

}  // namespace kiln::ops
