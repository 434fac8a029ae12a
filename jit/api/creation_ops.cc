// Tensors made from nothing: full, zeros, ones, arange, rand, randn. All lazy leaves.
#include "jit/graph/record.h"
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
Tensor Tensor::rand(std::vector<int64_t> shape, uint64_t seed, DType dt) {
  return leaf(ops::OpKind::Rand, std::move(shape), dt, 0, seed);
}
Tensor Tensor::randn(std::vector<int64_t> shape, uint64_t seed, DType dt) {
  return leaf(ops::OpKind::Randn, std::move(shape), dt, 0, seed);
}

}  // namespace kiln
