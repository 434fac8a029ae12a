#include "tests/cuda/kernel_corpus.h"

#include <cstdint>
#include <limits>

#include "kiln/nn.h"

namespace kiln {

std::vector<Tensor> kernel_corpus() {
  std::vector<Tensor> outs;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Tensor x = Tensor::rand({4, 6}, 1, dt), w = Tensor::rand({6}, 2, dt);
    Tensor m = Tensor::rand({6, 3}, 3, dt), v = Tensor::rand({5, 4, 6}, 4, dt);
    outs.push_back(relu(x * 2.0 + w) - exp(x) / (abs(w) + 1.0));
    outs.push_back(sum(exp(x - 1.0) * 2.0, {1}));
    outs.push_back(mean(v, {0, 2}, true) + 1.0);
    outs.push_back(max(x, {0}));
    outs.push_back(softmax(x) * 3.0);
    outs.push_back(log_softmax(v, 1));
    outs.push_back(layer_norm(x, w, w * 0.5));
    outs.push_back(rms_norm(v, w));
    outs.push_back(cumsum(v * 2.0, 1) + 1.0);
    outs.push_back(cumsum(v, 1, /*exclusive=*/true, /*reverse=*/true) * 2.0);
    outs.push_back(cumsum(x, 1, /*exclusive=*/true));  // rows along the innermost dim
    outs.push_back(cumsum(x, -1, /*exclusive=*/false, /*reverse=*/true));
    outs.push_back(topk(x, 3, 1).values * 2.0);
    outs.push_back(topk(v, 2, 0, /*largest=*/false).indices);
    outs.push_back(update_slice(v, x.reshape({1, 4, 6}) * 2.0, 0, 3));
    outs.push_back(index_add(v, 1, Tensor::from_vector(std::vector<int64_t>{-2, 0, 1, -2}, {4}),
                             exp(v) * 2.0));
    outs.push_back(scaled_dot_product_attention(v, v, v, Tensor(), true));
    outs.push_back(rope(v, Tensor::arange(4, DType::I64) + 7.0, RopePairs::Halves) * 2.0);
    outs.push_back(rope(v.reshape({5, 4, 3, 2}), Tensor::arange(4, DType::I32).reshape({4, 1}),
                        RopePairs::Adjacent, 500.0, 2.0));
    outs.push_back(scaled_dot_product_attention(v, v.slice(1, 0, 3), v.slice(1, 0, 3), Tensor(),
                                                CausalAlignment::BottomRight));
    outs.push_back(matmul(softmax(matmul(v, v.transpose(-2, -1)) * 0.5 + 1.0, -1), v));
    outs.push_back(relu(matmul(x, m) + 1.0).astype(DType::F32));
    outs.push_back(matmul(v, m));
    outs.push_back(matmul(w, m));
    outs.push_back(concat({x, x * 2.0}, 1));
    outs.push_back(argmax(x, 1));
    outs.push_back(where(x > 0.5, sigmoid(x), gelu(x)) + silu(w) + erf(w) + tanh(w));
    outs.push_back(pow(abs(x) + 0.5, 1.5) + sin(x) + cos(x) + log(x + 1.0) + sqrt(x) +
                   rsqrt(x + 1.0));
    outs.push_back(floor(x * 4.0) + ceil(x) + reciprocal(x + 1.0) + square(x) + neg(x));
    outs.push_back(x.transpose(0, 1).slice(0, 1, 6, 2).unsqueeze(0) *
                   Tensor::randn({3, 1, 4}, 5, dt));
    // Reversed views: along the innermost dim, and along an outer one with rows contiguous.
    outs.push_back(flip(x, {1}) * 2.0 + x.slice(0, -1, std::numeric_limits<int64_t>::min(), -1));
  }
  for (DType dt : {DType::I32, DType::I64, DType::Bool}) {
    Tensor a = Tensor::arange(12, DType::I32).reshape({3, 4}).astype(dt);
    Tensor b = Tensor::ones({4}, dt);
    outs.push_back(sum(a, {1}));
    outs.push_back(logical_or(logical_and(a > 1.0, b < 2.0), logical_not(a == b)));
    outs.push_back(max(a, {1}, true));
    outs.push_back(argmin(a, 0));
    outs.push_back(cumsum(a, 1));
    outs.push_back(cumsum(a, 0, /*exclusive=*/true, /*reverse=*/true));
    outs.push_back(update_slice(a, b.reshape({1, 4}), 0, 1));
    outs.push_back(concat({a, a}, 0));
    outs.push_back((a / (b + 1.0)).astype(dt));
    if (dt != DType::Bool) {
      outs.push_back(matmul(a, a.transpose(0, 1)));
      outs.push_back(index_add(a, 0, Tensor::arange(3, DType::I32), a * 2.0));
      outs.push_back(topk(a, 2, 0).indices);
      outs.push_back(pow(a, b) * a - neg(abs(a)) + square(a) + maximum(a, b) + minimum(a, b));
      outs.push_back(Tensor::full({2, 2}, 3, dt) + a.slice(0, 0, 2).slice(1, 0, 2));
    }
  }
  // The narrow dtypes: their loads, stores and casts, the 8-bit floats' rounding and the
  // narrow integers' wrapping, in each family that stores them, and index_add's atomics on
  // elements narrower than a 32-bit word.
  for (DType dt : {DType::F8E4M3, DType::F8E5M2}) {
    Tensor x = Tensor::rand({4, 6}, 1, dt), w = Tensor::rand({6}, 2, dt);
    outs.push_back(relu(x * 2.0 + w) - exp(x) / (abs(w) + 1.0));
    outs.push_back(sum(x, {1}) + 1.0);
    outs.push_back(softmax(x) * 3.0);
    outs.push_back(cumsum(x, 1));
    outs.push_back(matmul(x, x.transpose(0, 1)));
    outs.push_back(index_add(x, 0, Tensor::arange(4, DType::I32), x * 2.0));
    outs.push_back(x.astype(DType::F32) + x.astype(DType::BF16).astype(DType::F32));
  }
  for (DType dt : {DType::I8, DType::U8, DType::I16}) {
    Tensor a = Tensor::arange(12, DType::I32).reshape({3, 4}).astype(dt);
    outs.push_back(a * a + Tensor::full({4}, 100, dt));
    outs.push_back(sum(a, {1}));
    outs.push_back(max(a, {0}));
    outs.push_back(cumsum(a, 1));
    outs.push_back(index_add(a, 0, Tensor::arange(3, DType::I32), a * 2.0));
    outs.push_back((a.astype(DType::F32) * 40.0).astype(dt));
    outs.push_back(a.astype(DType::F8E4M3));
  }
  return outs;
}

}  // namespace kiln
