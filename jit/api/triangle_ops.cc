// tril and triu: where over a mask of positions, so that the planner fuses them like any
// elementwise op (a causal mask costs no kernel of its own).
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

// Keeps x[..., i, j] where `keep(j - i)` over the last two dims of x, zero elsewhere.
template <class Keep>
Tensor keep_triangle(const char* op, const Tensor& x, Keep keep) {
  if (!x.defined()) throw Error(absl::StrCat("[", op, "] the tensor is empty (undefined)"));
  if (x.ndim() < 2) {
    throw Error(absl::StrCat("[", op, "] needs a tensor of rank >= 2 (x: ", dtype_name(x.dtype()),
                             ops::format_shape(x.shape()), ")"));
  }
  const int64_t rows = x.shape()[x.ndim() - 2];
  const int64_t cols = x.shape()[x.ndim() - 1];
  // j - i over [rows, cols], in I64 so that no offset rounds.
  Tensor offset = Tensor::arange(cols, DType::I64).reshape({1, cols}) -
                  Tensor::arange(rows, DType::I64).reshape({rows, 1});
  return where(keep(offset), x, Tensor::zeros({}, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t k) {
  return keep_triangle("tril", x,
                       [k](const Tensor& offset) { return offset <= static_cast<double>(k); });
}

Tensor triu(const Tensor& x, int64_t k) {
  return keep_triangle("triu", x,
                       [k](const Tensor& offset) { return offset >= static_cast<double>(k); });
}

}  // namespace kiln
