// take, take_along_axis and embedding: gathers (ops/gather.h); topk; update_slice.
#include <string>

#include "absl/strings/str_cat.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "ops/value_type.h"

namespace kiln {

Tensor take(const Tensor& x, const Tensor& indices, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::Take, {x, indices}, std::move(attrs));
}

Tensor take_along_axis(const Tensor& x, const Tensor& indices, int axis) {
  ops::Attrs attrs;
  attrs.axis = axis;
  return jit::record(ops::OpKind::TakeAlongAxis, {x, indices}, std::move(attrs));
}

Tensor embedding(const Tensor& table, const Tensor& ids) { return take(table, ids, 0); }

// The selection is one row op (topk_indices); the values are a gather of x at its result,
// which fuses into the same kernel's epilogue or the values' consumers.
TopK topk(const Tensor& x, int64_t k, int axis, bool largest) {
  ops::Attrs attrs;
  attrs.axis = axis;
  attrs.k = k;
  attrs.largest = largest;
  Tensor indices = jit::record(ops::OpKind::TopkIndices, {x}, std::move(attrs));
  return TopK{take_along_axis(x, indices, axis), indices};
}

namespace {

std::string described(const char* name, const Tensor& t) {
  return absl::StrCat(name, ": ", dtype_name(t.dtype()), ops::format_shape(t.shape()));
}

[[noreturn]] void update_slice_error(const Tensor& x, const Tensor& update,
                                     const std::string& why) {
  throw Error(absl::StrCat("[update_slice] ", why, " (", described("x", x), ", ",
                           described("update", update), ")"));
}

}  // namespace

// For now a concat of x's parts around the update (so it fuses and runs on every device);
// docs/semantics.md says what is still to come (start as a launch parameter, in place).
Tensor update_slice(const Tensor& x, const Tensor& update, int axis, int64_t start) {
  if (!x.defined() || !update.defined()) {
    throw Error("[update_slice] an input tensor is empty (undefined)");
  }
  const int rank = x.ndim();
  if (update.ndim() != rank) {
    update_slice_error(x, update, absl::StrCat("update must have x's rank ", rank));
  }
  if (axis < -rank || axis >= rank) {
    update_slice_error(x, update,
                       absl::StrCat("axis ", axis, " is out of range for rank ", rank,
                                    " (expected ", -rank, " <= axis < ", rank, ")"));
  }
  if (axis < 0) axis += rank;
  for (int d = 0; d < rank; ++d) {
    if (d != axis && update.shape()[d] != x.shape()[d]) {
      update_slice_error(x, update,
                         absl::StrCat("dim ", d, " of update must equal x's (", x.shape()[d], ")"));
    }
  }
  const int64_t extent = x.shape()[axis];
  const int64_t length = update.shape()[axis];
  if (start < 0 || start > extent - length) {
    update_slice_error(x, update,
                       absl::StrCat("start ", start, " puts [", start, ", ", start + length,
                                    ") outside axis ", axis, " of extent ", extent,
                                    " (expected 0 <= start <= ", extent - length, ")"));
  }
  std::vector<Tensor> parts;
  if (start > 0) parts.push_back(x.slice(axis, 0, start));
  parts.push_back(update.dtype() == x.dtype() ? update : update.astype(x.dtype()));
  if (start + length < extent) parts.push_back(x.slice(axis, start + length, extent));
  return parts.size() == 1 ? parts[0] : concat(parts, axis);
}

}  // namespace kiln
