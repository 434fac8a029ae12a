// Tensors made from nothing: full, zeros, ones, arange, rand, randn, all lazy leaves; and
// arange over a range, linspace and eye, composed from arange so that they fuse.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "jit/graph/record.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

Tensor leaf(ops::OpKind op, std::vector<int64_t> shape, DType dt, double value = 0,
            uint64_t seed = 0) {
  ops::Attrs attrs;
  attrs.shape = std::move(shape);
  attrs.dtype = dt;
  attrs.value = value;
  attrs.seed = seed;
  return jit::record(op, {}, std::move(attrs));
}

}  // namespace

Tensor Tensor::full(std::vector<int64_t> shape, double value, DType dt) {
  return leaf(ops::OpKind::Constant, std::move(shape), dt, value);
}
Tensor Tensor::zeros(std::vector<int64_t> shape, DType dt) { return full(std::move(shape), 0, dt); }
Tensor Tensor::ones(std::vector<int64_t> shape, DType dt) { return full(std::move(shape), 1, dt); }
Tensor Tensor::arange(int64_t n, DType dt) { return leaf(ops::OpKind::Arange, {n}, dt); }
Tensor Tensor::arange(double start, double stop, double step, DType dt) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    throw Error(absl::StrCat("[arange] start ", start, ", stop ", stop, ", step ", step,
                             " (expected finite values and step != 0)"));
  }
  const double count = std::ceil((stop - start) / step);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  return (arange(n, DType::F64) * step + start).astype(dt);
}

Tensor Tensor::linspace(double start, double stop, int64_t num, DType dt) {
  if (num < 0 || !std::isfinite(start) || !std::isfinite(stop)) {
    throw Error(absl::StrCat("[linspace] start ", start, ", stop ", stop, ", num ", num,
                             " (expected finite values and num >= 0)"));
  }
  if (num <= 1) return full({num}, start, DType::F64).astype(dt);
  const double step = (stop - start) / static_cast<double>(num - 1);
  const Tensor i = arange(num, DType::F64);
  return where(i == static_cast<double>(num - 1), full({}, stop, DType::F64), i * step + start)
      .astype(dt);
}

Tensor Tensor::eye(int64_t n, DType dt) { return eye(n, n, 0, dt); }

Tensor Tensor::eye(int64_t n, int64_t m, int64_t k, DType dt) {
  if (n < 0 || m < 0) {
    throw Error(absl::StrCat("[eye] ", n, " x ", m, " (expected sizes >= 0)"));
  }
  // Column minus row over [n, m], in I64 so that no offset rounds.
  const Tensor offset =
      arange(m, DType::I64).reshape({1, m}) - arange(n, DType::I64).reshape({n, 1});
  return (offset == static_cast<double>(k)).astype(dt);
}

Tensor Tensor::rand(std::vector<int64_t> shape, uint64_t seed, DType dt) {
  return leaf(ops::OpKind::Rand, std::move(shape), dt, 0, seed);
}
Tensor Tensor::randn(std::vector<int64_t> shape, uint64_t seed, DType dt) {
  return leaf(ops::OpKind::Randn, std::move(shape), dt, 0, seed);
}

}  // namespace kiln
