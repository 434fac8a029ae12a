// Block-quantized test tensors: random blocks of any format, for tests of the ops that read
// quantized weights.
#ifndef KILN_TESTS_QUANTIZED_UTIL_H_
#define KILN_TESTS_QUANTIZED_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/tensor.h"
#include "tests/test_util.h"

namespace kiln::testing {

// Where each format keeps its f16 scales (byte offsets within a block).
inline std::vector<int> f16_fields(DType format) {
  switch (format) {
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

// n values of `format` as random blocks: random integers and scales, each f16 scale a finite
// value between 0.002 and 0.05 (so no block overflows and none is all zero).
inline std::vector<uint8_t> random_blocks(DType format, int64_t n, std::mt19937_64& rng) {
  const int64_t bytes = storage_bytes(format, n), block = block_bytes(format);
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (uint8_t& b : data) b = static_cast<uint8_t>(byte(rng));
  for (int64_t b = 0; b < bytes / block; ++b) {
    for (int field : f16_fields(format)) {
      const uint16_t bits = Half(scale(rng)).bits;
      std::memcpy(data.data() + b * block + field, &bits, 2);
    }
  }
  return data;
}

// A tensor of `format` and logical `shape` holding random_blocks.
inline Tensor random_block_tensor(DType format, std::vector<int64_t> shape, std::mt19937_64& rng) {
  const std::vector<uint8_t> blocks = random_blocks(format, testing::count(shape), rng);
  auto* data = new uint8_t[blocks.size()];
  std::memcpy(data, blocks.data(), blocks.size());
  return Tensor::from_blob(data, std::move(shape), format,
                           [](void* p) { delete[] static_cast<uint8_t*>(p); });
}

// How far a quantized product may be from the exact product of x and the dequantized weight
// w (k values each; docs/contracts.md): each activation block of 32 rounded to 8 bits moves
// the result by at most max|x| / 254 times the block's sum of |w|, plus f32 accumulation.
inline double quantized_product_bound(const float* x, const float* w, int64_t k) {
  double bound = 0, magnitude = 0;
  for (int64_t b = 0; b < k; b += 32) {
    double amax = 0, wsum = 0;
    for (int64_t i = b; i < b + 32; ++i) {
      amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      wsum += std::fabs(static_cast<double>(w[i]));
      magnitude += std::fabs(static_cast<double>(x[i]) * w[i]);
    }
    bound += amax / 254.0 * wsum;
  }
  return bound + 1e-5 * magnitude + 1e-30;
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_QUANTIZED_UTIL_H_
