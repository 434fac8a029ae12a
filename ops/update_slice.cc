#include "ops/update_slice.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/element_access.h"
#include "ops/infer.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_update_slice(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::UpdateSlice;
  if (in.size() != 2 && in.size() != 3) {
    return op_error(
        op, in,
        absl::StrCat("takes x, update and optionally a start tensor, got ", in.size(), " inputs"));
  }
  const ValueType &x = in[0], &update = in[1];
  const bool start_tensor = in.size() == 3;
  if (start_tensor &&
      ((in[2].dtype != DType::I32 && in[2].dtype != DType::I64) || numel(in[2].shape) != 1)) {
    return op_error(op, in, "start must be one I32 or I64 value (a 0-d tensor)");
  }
  const int rank = static_cast<int>(x.shape.size());
  if (static_cast<int>(update.shape.size()) != rank) {
    return op_error(op, in, absl::StrCat("update must have x's rank ", rank));
  }
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, rank);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  attrs.axis = *axis;
  const std::vector<int64_t>& offsets = attrs.offsets;
  if (!offsets.empty() && (static_cast<int>(offsets.size()) != rank || offsets[*axis] != 0)) {
    return op_error(op, in,
                    absl::StrCat("a region's starts must be one per dim of x (", rank,
                                 "), 0 at the axis (", *axis, ")"));
  }
  for (int d = 0; d < rank; ++d) {
    if (d == *axis) continue;
    if (offsets.empty() && update.shape[d] != x.shape[d]) {
      return op_error(op, in,
                      absl::StrCat("dim ", d, " of update must equal x's (", x.shape[d], ")"));
    }
    if (!offsets.empty() && (offsets[d] < 0 || offsets[d] > x.shape[d] - update.shape[d])) {
      return op_error(op, in, update_start_error(offsets[d], update.shape[d], x.shape[d], d));
    }
  }
  const int64_t extent = x.shape[*axis], length = update.shape[*axis];
  if (length > extent) {
    return op_error(op, in,
                    absl::StrCat("update's ", length, " along axis ", *axis,
                                 " do not fit in x's extent ", extent));
  }
  if (start_tensor) {
    attrs.start = 0;  // read from the tensor when the kernel runs
  } else if (attrs.start < 0 || attrs.start > extent - length) {
    return op_error(op, in, update_start_error(attrs.start, length, extent, *axis));
  }
  return x;
}

std::string update_start_error(int64_t start, int64_t length, int64_t extent, int axis) {
  return absl::StrCat("start ", start, " puts [", start, ", ", start + length, ") outside axis ",
                      axis, " of extent ", extent, " (expected 0 <= start <= ", extent - length,
                      ")");
}

void evaluate_update_slice(const Attrs& attrs, const ValueType& out,
                           const std::vector<HostValue>& in, base::Buffer& result) {
  const HostValue &x = in[0], &update = in[1];
  int64_t start = attrs.start;
  if (in.size() == 3) {
    start = static_cast<int64_t>(load_double(*in[2].buffer, in[2].type.dtype, 0));
    const int64_t length = update.type.shape[attrs.axis], extent = out.shape[attrs.axis];
    if (start < 0 || start > extent - length) {
      throw Error(
          absl::StrCat("[update_slice] ", update_start_error(start, length, extent, attrs.axis)));
    }
  }
  std::memcpy(result.data(), x.buffer->data(), static_cast<size_t>(result.nbytes()));
  if (!attrs.offsets.empty()) {  // a region: each element at its index plus the starts
    const Shape& shape = update.type.shape;
    const std::vector<int64_t> to = contiguous_strides(out.shape);
    std::vector<int64_t> index(shape.size(), 0);
    for (int64_t e = 0; e < numel(shape); ++e) {
      int64_t at = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t first = static_cast<int>(d) == attrs.axis ? start : attrs.offsets[d];
        at += (index[d] + first) * to[d];
      }
      convert_element(*update.buffer, update.type.dtype, e, result, out.dtype, at);
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0 && ++index[d] == shape[d]; --d) {
        index[d] = 0;
      }
    }
    return;
  }
  // The update's rows along the axis land at start within x's rows.
  const RowLayout from = row_layout(update.type.shape, attrs.axis);
  const RowLayout to = row_layout(out.shape, attrs.axis);
  for (int64_t o = 0; o < from.outer; ++o) {
    for (int64_t k = 0; k < from.extent; ++k) {
      for (int64_t i = 0; i < from.inner; ++i) {
        convert_element(*update.buffer, update.type.dtype, from.at(o, k, i), result, out.dtype,
                        to.at(o, start + k, i));
      }
    }
  }
}

}  // namespace kiln::ops
