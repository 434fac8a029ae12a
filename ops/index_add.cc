#include "ops/index_add.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "ops/element_access.h"
#include "ops/gather.h"
#include "ops/infer.h"
#include "ops/scalar_math.h"

namespace kiln::ops {

absl::StatusOr<ValueType> infer_index_add(const std::vector<ValueType>& in, Attrs& attrs) {
  const OpKind op = OpKind::IndexAdd;
  const ValueType &x = in[0], &source = in[1], &index = in[2];
  if (x.dtype == DType::Bool) {
    return op_error(op, in, "cannot add into a bool x (expected a numeric dtype; use astype)");
  }
  if (!is_index_dtype(index.dtype) || index.shape.size() != 1) {
    return op_error(op, in, "needs index as one dim of i32 or i64 values");
  }
  const int rank = static_cast<int>(x.shape.size());
  if (rank == 0) return op_error(op, in, "cannot index a 0-d x (expected rank >= 1)");
  if (static_cast<int>(source.shape.size()) != rank) {
    return op_error(op, in, absl::StrCat("source must have x's rank ", rank));
  }
  absl::StatusOr<int> axis = normalize_axis(attrs.axis, rank);
  if (!axis.ok()) return op_error(op, in, std::string(axis.status().message()));
  attrs.axis = *axis;
  for (int d = 0; d < rank; ++d) {
    if (d == *axis && source.shape[d] != index.shape[0]) {
      return op_error(op, in,
                      absl::StrCat("source has ", source.shape[d], " slices along axis ", d,
                                   " but index has ", index.shape[0], " (expected one each)"));
    }
    if (d != *axis && source.shape[d] != x.shape[d]) {
      return op_error(op, in,
                      absl::StrCat("dim ", d, " of source must equal x's (", x.shape[d], ")"));
    }
  }
  return x;
}

namespace {

// position[l] for each index of type I, without a branch per element; whether all are in
// range.
template <class I>
bool positions_of(const I* index, int64_t count, int64_t extent, int64_t* position) {
  bool all_in_range = true;
  for (int64_t l = 0; l < count; ++l) {
    position[l] = math::gather_position<int64_t>(index[l], extent);
    all_in_range &= position[l] >= 0;
  }
  return all_in_range;
}

}  // namespace

std::vector<int64_t> index_add_positions(const base::Buffer& index, DType dt, int64_t count,
                                         int64_t extent) {
  std::vector<int64_t> position(static_cast<size_t>(count));
  if (dt == DType::I64 && positions_of(index.as<int64_t>(), count, extent, position.data())) {
    return position;
  }
  if (dt == DType::I32 && positions_of(index.as<int32_t>(), count, extent, position.data())) {
    return position;
  }
  for (int64_t l = 0; l < count; ++l) {  // other dtypes, and the first bad index's error
    const int64_t i = load_int(index, dt, l);
    position[l] = math::gather_position<int64_t>(i, extent);
    if (position[l] < 0) throw Error(index_error_message(OpKind::IndexAdd, i, extent));
  }
  return position;
}

void evaluate_index_add(const Attrs& attrs, const ValueType& out, const std::vector<HostValue>& in,
                        base::Buffer& result) {
  const HostValue &x = in[0], &source = in[1], &index = in[2];
  const RowLayout from = row_layout(source.type.shape, attrs.axis);
  const RowLayout to = row_layout(out.shape, attrs.axis);
  // Every position first, so that a bad index leaves nothing half-added.
  const std::vector<int64_t> position =
      index_add_positions(*index.buffer, index.type.dtype, from.extent, to.extent);
  std::memcpy(result.data(), x.buffer->data(), static_cast<size_t>(result.nbytes()));
  // source cast to x's dtype first, as its kernel's prologue casts it.
  base::Buffer cast(numel(source.type.shape) * dtype_size(out.dtype));
  for (int64_t e = 0; e < numel(source.type.shape); ++e) {
    convert_element(*source.buffer, source.type.dtype, e, cast, out.dtype, e);
  }
  const bool floating = is_floating(out.dtype);
  for (int64_t o = 0; o < from.outer; ++o) {
    for (int64_t l = 0; l < from.extent; ++l) {
      for (int64_t i = 0; i < from.inner; ++i) {
        const int64_t at = to.at(o, position[l], i), e = from.at(o, l, i);
        if (floating) {
          store_double(result, out.dtype, at,
                       load_double(result, out.dtype, at) + load_double(cast, out.dtype, e));
        } else {  // two's complement wrap, as the devices add
          const uint64_t sum = static_cast<uint64_t>(load_int(result, out.dtype, at)) +
                               static_cast<uint64_t>(load_int(cast, out.dtype, e));
          store_int(result, out.dtype, at, static_cast<int64_t>(sum));
        }
      }
    }
  }
}

}  // namespace kiln::ops
