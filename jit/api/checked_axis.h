// The axis check the public ops share, so that their errors read alike.
#ifndef KILN_JIT_API_CHECKED_AXIS_H_
#define KILN_JIT_API_CHECKED_AXIS_H_

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "ops/value_type.h"

namespace kiln::jit {

// Checks `axis` against `limit` (ndim, or ndim + 1 for unsqueeze) for an op whose error
// should name it; returns the non-negative axis.
inline int checked_axis(const char* op, int axis, int limit, const Tensor& x) {
  if (axis < -limit || axis >= limit) {
    throw Error(absl::StrCat("[", op, "] axis ", axis, " is out of range for rank ", x.ndim(),
                             " (expected ", -limit, " <= axis < ", limit,
                             ") (x: ", dtype_name(x.dtype()), ops::format_shape(x.shape()), ")"));
  }
  return axis < 0 ? axis + limit : axis;
}

}  // namespace kiln::jit

#endif  // KILN_JIT_API_CHECKED_AXIS_H_
