#include "ops/update_slice.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/element_access.h"
#include "ops/infer.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_update_slice(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::UpdateSlice;
  const ValueType &x = in[0], &update = in[1];
  const int rank = static_cast<int>(x.shape.size());
  if (static_cast<int>(update.shape.size()) != rank) {
    return op_error(op, in, absl::StrCat("update must have x's rank ", rank));
  }
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, rank);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  attrs.axis = *axis;
  for (int d = 0; d < rank; ++d) {
    if (d != *axis && update.shape[d] != x.shape[d]) {
      return op_error(op, in,
                      absl::StrCat("dim ", d, " of update must equal x's (", x.shape[d], ")"));
    }
  }
  const int64_t extent = x.shape[*axis], length = update.shape[*axis];
  if (attrs.start < 0 || attrs.start > extent - length) {
    return op_error(op, in,
                    absl::StrCat("start ", attrs.start, " puts [", attrs.start, ", ",
                                 attrs.start + length, ") outside axis ", *axis, " of extent ",
                                 extent, " (expected 0 <= start <= ", extent - length, ")"));
  }
  return x;
}

void evaluate_update_slice(const Attrs& attrs, const ValueType& out,
                           const std::vector<HostValue>& in, runtime::Buffer& result) {
  const HostValue &x = in[0], &update = in[1];
  std::memcpy(result.data(), x.buffer->data(), static_cast<size_t>(result.nbytes()));
  // The update's rows along the axis land at start within x's rows.
  const RowLayout from = row_layout(update.type.shape, attrs.axis);
  const RowLayout to = row_layout(out.shape, attrs.axis);
  for (int64_t o = 0; o < from.outer; ++o) {
    for (int64_t k = 0; k < from.extent; ++k) {
      for (int64_t i = 0; i < from.inner; ++i) {
        convert_element(*update.buffer, update.type.dtype, from.at(o, k, i), result, out.dtype,
                        to.at(o, attrs.start + k, i));
      }
    }
  }
}

}  // namespace kiln::ops
