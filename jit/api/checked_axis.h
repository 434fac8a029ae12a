// The axis check and the operand description the public ops share, so that their errors read
// alike.
#ifndef KILN_JIT_API_CHECKED_AXIS_H_
#define KILN_JIT_API_CHECKED_AXIS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "kiln/tensor.h"
#include "ops/value_type.h"

namespace kiln::jit {

// An operand as errors name it: "f32[2, 3]", or "empty" for an undefined tensor.
inline std::string type_text(const Tensor& t) {
  return t.defined() ? absl::StrCat(dtype_name(t.dtype()), ops::format_shape(t.shape())) : "empty";
}

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
