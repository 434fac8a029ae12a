// The ops numerical code reaches for, composed from the catalog so that they fuse, run on
// every device and appear in trace files as the ops they are made of: clamp, pad, roll,
// norm and dot.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/api/checked_axis.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "ops/value_type.h"

namespace kiln {
namespace {

std::string describe(const char* name, const Tensor& t) {
  return absl::StrCat(name, ": ", dtype_name(t.dtype()), ops::format_shape(t.shape()));
}

void check_defined(const char* op, const Tensor& x) {
  if (!x.defined()) throw Error(absl::StrCat("[", op, "] the tensor is empty (undefined)"));
}

// x's shape with `extent` along `axis`.
std::vector<int64_t> with_extent(const Tensor& x, int axis, int64_t extent) {
  std::vector<int64_t> shape = x.shape();
  shape[axis] = extent;
  return shape;
}

}  // namespace

Tensor clamp(const Tensor& x, double lo, double hi) { return minimum(maximum(x, lo), hi); }

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  return minimum(maximum(x, lo), hi);
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value) {
  check_defined("pad", x);
  if (static_cast<int>(widths.size()) != x.ndim()) {
    throw Error(absl::StrCat("[pad] needs one {before, after} pair for each of x's ", x.ndim(),
                             " dims, got ", widths.size(), " (", describe("x", x), ")"));
  }
  Tensor y = x;
  for (int d = 0; d < x.ndim(); ++d) {
    const auto [before, after] = widths[d];
    if (before < 0 || after < 0) {
      throw Error(absl::StrCat("[pad] widths of dim ", d, " are {", before, ", ", after,
                               "} (expected both >= 0) (", describe("x", x), ")"));
    }
    if (before == 0 && after == 0) continue;
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(Tensor::full(with_extent(y, d, before), value, x.dtype()));
    parts.push_back(y);
    if (after > 0) parts.push_back(Tensor::full(with_extent(y, d, after), value, x.dtype()));
    y = concat(parts, d);
  }
  return y;
}

Tensor roll(const Tensor& x, int64_t shift, int axis) {
  check_defined("roll", x);
  const int a = jit::checked_axis("roll", axis, x.ndim(), x);
  const int64_t n = x.shape()[a];
  if (n == 0) return x;
  const int64_t s = ((shift % n) + n) % n;  // the first s elements come from the end
  if (s == 0) return x;
  return concat({x.slice(a, n - s, n), x.slice(a, 0, n - s)}, a);
}

Tensor roll(const Tensor& x, int64_t shift) {
  check_defined("roll", x);
  return roll(x.reshape({-1}), shift, 0).reshape(x.shape());
}

Tensor norm(const Tensor& x, std::vector<int> axes, bool keepdims, double ord) {
  check_defined("norm", x);
  if (std::isnan(ord)) throw Error(absl::StrCat("[norm] ord is NaN (", describe("x", x), ")"));
  const Tensor v = is_floating(x.dtype()) ? x : x.astype(DType::F32);
  if (ord == 2.0) return sqrt(sum(square(v), std::move(axes), keepdims));
  if (ord == 1.0) return sum(abs(v), std::move(axes), keepdims);
  if (std::isinf(ord)) {
    return ord > 0 ? max(abs(v), std::move(axes), keepdims)
                   : min(abs(v), std::move(axes), keepdims);
  }
  if (ord == 0.0) return sum(v != 0.0, std::move(axes), keepdims).astype(v.dtype());
  return pow(sum(pow(abs(v), ord), std::move(axes), keepdims), 1.0 / ord);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_defined("dot", a);
  check_defined("dot", b);
  if (a.ndim() != 1 || b.ndim() != 1 || a.shape()[0] != b.shape()[0]) {
    throw Error(absl::StrCat("[dot] needs two 1-D tensors of equal length (", describe("a", a),
                             ", ", describe("b", b), "); use matmul for matrices"));
  }
  return sum(a * b);
}

}  // namespace kiln
