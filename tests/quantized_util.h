// Block-quantized test tensors: random blocks of any format, for tests of the ops that read
// quantized weights.
#ifndef KILN_TESTS_QUANTIZED_UTIL_H_
#define KILN_TESTS_QUANTIZED_UTIL_H_

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

}  // namespace kiln::testing

#endif  // KILN_TESTS_QUANTIZED_UTIL_H_
