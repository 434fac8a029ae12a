// The CPU GEMM core (runtime/cpu/gemm.h) against a double-precision loop: every element of
// fresh random inputs, every stride layout, edge sizes around its tile and block sizes, and
// its packed-weight cache.
#include "runtime/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/buffer.h"
#include "kiln/dtype.h"

namespace kiln::runtime::cpu {
namespace {

constexpr float kSentinel = 12345.0f;

// A matrix of random values, stored row-major or column-major.
struct TestMatrix {
  std::vector<float> values;
  int64_t rows, cols;
  bool column_major;
  float at(int64_t i, int64_t j) const {
    return values[column_major ? j * rows + i : i * cols + j];
  }
  GemmOperand operand(uint64_t version = 0) const {
    return {values.data(), column_major ? 1 : cols, column_major ? rows : 1, version};
  }
};

TestMatrix random_matrix(std::mt19937& rng, int64_t rows, int64_t cols, bool column_major) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TestMatrix m{std::vector<float>(rows * cols), rows, cols, column_major};
  for (float& v : m.values) v = dist(rng);
  return m;
}

// Runs the GEMM into a C with a padded row stride (poisoned with NaN inside, a sentinel in
// the padding) and checks every element against a double sum, and that the padding stayed.
void expect_product(const TestMatrix& a, const TestMatrix& b, uint64_t b_version = 0) {
  const int64_t m = a.rows, k = a.cols, n = b.cols, ldc = n + 3;
  std::vector<float> c(m * ldc, kSentinel);
  for (int64_t i = 0; i < m; ++i) {
    std::fill_n(c.begin() + i * ldc, n, std::numeric_limits<float>::quiet_NaN());
  }
  gemm_f32(m, n, k, a.operand(), b.operand(b_version), c.data(), ldc);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<double>(a.at(i, p)) * b.at(p, j);
        magnitude += std::fabs(static_cast<double>(a.at(i, p)) * b.at(p, j));
      }
      ASSERT_NEAR(c[i * ldc + j], sum, 1e-6 * magnitude + 1e-30)
          << "C(" << i << ", " << j << ") of " << m << " x " << k << " x " << n;
    }
    for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[i * ldc + j], kSentinel) << "row " << i;
  }
}

// Sizes around the inner tile (6 or 12 rows, 2 vectors of columns), the row block (72 to 264
// rows by L2 size: 601 rows are several blocks on any CPU, 150 several where they are 72) and
// the depth slice (384), with both tile heights where the CPU has the registers for 12 (each
// forced in turn; elsewhere both runs take 6).
TEST(Gemm, MatchesDoubleSumsForEveryLayoutAndEdgeSize) {
  std::mt19937 rng(std::random_device{}());
  const int64_t ms[] = {1, 5, 6, 7, 12, 13, 23, 71, 73, 150, 601};
  const int64_t ns[] = {1, 7, 16, 17, 33, 65};
  const int64_t ks[] = {1, 3, 255, 257, 520};
  for (int rows : {6, 12}) {
    set_gemm_row_tile_for_test(rows);
    SCOPED_TRACE(testing::Message() << "tiles of " << rows << " rows where the CPU has them");
    for (int64_t m : ms) {
      for (int64_t n : ns) {
        const int64_t k = ks[rng() % std::size(ks)];
        const bool a_columns = rng() % 2, b_columns = rng() % 2;
        SCOPED_TRACE(testing::Message() << m << " x " << k << " x " << n << " A col-major "
                                        << a_columns << " B col-major " << b_columns);
        expect_product(random_matrix(rng, m, k, a_columns), random_matrix(rng, k, n, b_columns));
      }
    }
  }
  set_gemm_row_tile_for_test(0);
}

// Empty operands may have no data at all (a zero-size buffer); neither is read. Both a
// transient B and a versioned one (packed through the cache) write zeros.
TEST(Gemm, ZeroDepthWritesZeros) {
  for (uint64_t version : {uint64_t{0}, uint64_t{4242}}) {
    std::vector<float> c(4 * 5, std::numeric_limits<float>::quiet_NaN());
    gemm_f32(4, 5, 0, {nullptr, 0, 1, 0}, {nullptr, 5, 1, version}, c.data(), 5);
    for (float v : c) EXPECT_EQ(v, 0.0f) << "version " << version;
  }
}

// The summation order depends on m, n and k only: a transposed B, a cached packed B and a
// fresh one give the same bits.
TEST(Gemm, ResultDoesNotDependOnLayoutOrCache) {
  std::mt19937 rng(std::random_device{}());
  const int64_t m = 37, k = 600, n = 45;
  const TestMatrix a = random_matrix(rng, m, k, false);
  const TestMatrix b = random_matrix(rng, k, n, false);
  TestMatrix bt{std::vector<float>(k * n), k, n, true};
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) bt.values[j * k + p] = b.at(p, j);
  }
  std::vector<float> c0(m * n), c1(m * n), c2(m * n);
  gemm_f32(m, n, k, a.operand(), b.operand(), c0.data(), n);
  gemm_f32(m, n, k, a.operand(), bt.operand(), c1.data(), n);
  for (int call = 0; call < 3; ++call) {  // packed, kept, then found in the cache
    gemm_f32(m, n, k, a.operand(), bt.operand(987654321), c2.data(), n);
    ASSERT_EQ(std::memcmp(c0.data(), c2.data(), c0.size() * sizeof(float)), 0) << call;
  }
  EXPECT_EQ(std::memcmp(c0.data(), c1.data(), c0.size() * sizeof(float)), 0);
}

// A bias row added by the core as it stores C gives the bits of the product followed by a
// separate f32 add (what the unfused epilogue computes), and the finishing step is applied
// once to every element after it, told the element's position (with or without the bias),
// for sizes around the tile, the panel, the depth slice and the task's row block, and k = 0
// (C = the bias). Poisoned C, padded row stride. The step |v| + 1 + (row * n + col) / 1024
// shows an element missed, done twice or given the wrong position.
TEST(Gemm, BiasRowAndFinishingStepAreAppliedAsTheEpilogueWouldApplyThem) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int64_t n = 0;  // the product's columns, set per size below
  auto finish = [&n](float* values, int64_t row, int64_t col, int64_t count) {
    for (int64_t j = 0; j < count; ++j) {
      const float position = static_cast<float>(row * n + col + j) / 1024.0f;
      values[j] = (std::fabs(values[j]) + 1.0f) + position;
    }
  };
  for (int64_t m : {1, 7, 73, 150, 601}) {
    for (int64_t columns : {1, 17, 33, 64}) {
      n = columns;
      for (int64_t k : {0, 3, 257, 520}) {
        const TestMatrix a = random_matrix(rng, m, k, false);
        const TestMatrix b = random_matrix(rng, k, n, rng() % 2);
        std::vector<float> bias(n);
        for (float& v : bias) v = dist(rng);
        const int64_t ldc = n + 3;
        std::vector<float> plain(m * ldc, kSentinel);
        gemm_f32(m, n, k, a.operand(), b.operand(), plain.data(), ldc);
        for (int form = 0; form < 3; ++form) {  // bias; bias and finish; finish
          SCOPED_TRACE(testing::Message() << m << " x " << k << " x " << n << ", form " << form);
          GemmEpilogue epilogue;
          if (form < 2) epilogue.bias = bias.data();
          if (form > 0) epilogue.finish = finish;
          std::vector<float> fused(m * ldc, kSentinel);
          for (int64_t i = 0; i < m; ++i) {
            std::fill_n(fused.begin() + i * ldc, n, std::numeric_limits<float>::quiet_NaN());
          }
          gemm_f32(m, a.operand(), pack_gemm_b(k, n, b.operand()), fused.data(), ldc, epilogue);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              float want = plain[i * ldc + j];
              if (epilogue.bias != nullptr) want += bias[j];
              if (epilogue.finish) finish(&want, i, j, 1);
              ASSERT_EQ(std::memcmp(&fused[i * ldc + j], &want, sizeof(float)), 0)
                  << "C(" << i << ", " << j << "): " << fused[i * ldc + j] << " vs " << want;
            }
            for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(fused[i * ldc + j], kSentinel);
          }
        }
      }
    }
  }
}

// A weight is kept packed on its second use and found on its third; writing the buffer
// (mark_written, as the executor does before a kernel writes it) gives it a new version, so
// the next product reads the new contents.
TEST(Gemm, PackedWeightCacheKeepsReusedWeightsAndNeverServesStaleOnes) {
  clear_packed_weights();
  std::mt19937 rng(std::random_device{}());
  const int64_t m = 3, k = 40, n = 24;
  const TestMatrix a = random_matrix(rng, m, k, false);
  base::Buffer weight(k * n * static_cast<int64_t>(sizeof(float)));
  TestMatrix b = random_matrix(rng, k, n, true);
  std::memcpy(weight.data(), b.values.data(), b.values.size() * sizeof(float));
  auto product = [&] {
    std::vector<float> c(m * n);
    gemm_f32(m, n, k, a.operand(), {weight.as<float>(), 1, k, weight.version()}, c.data(), n);
    return c;
  };
  auto expect_equals_fresh = [&](const std::vector<float>& c) {
    std::vector<float> fresh(m * n);
    gemm_f32(m, n, k, a.operand(), b.operand(), fresh.data(), n);
    EXPECT_EQ(std::memcmp(c.data(), fresh.data(), c.size() * sizeof(float)), 0);
  };
  expect_equals_fresh(product());
  EXPECT_EQ(packed_weight_stats().entries, 0) << "kept after one use";
  expect_equals_fresh(product());
  EXPECT_EQ(packed_weight_stats().entries, 1);
  const int64_t hits = packed_weight_stats().hits;
  expect_equals_fresh(product());
  EXPECT_EQ(packed_weight_stats().hits, hits + 1);

  b = random_matrix(rng, k, n, true);
  weight.mark_written();
  std::memcpy(weight.data(), b.values.data(), b.values.size() * sizeof(float));
  expect_equals_fresh(product());
  expect_equals_fresh(product());
  expect_equals_fresh(product());
  clear_packed_weights();
}

// 16-bit operands (bf16 and f16 bits), read through strides and widened as they are packed:
// every element against a double sum of the widened values, for A packed (any 16-bit A is)
// and B packed transiently or through the cache (a versioned B: packed, kept, then found).
template <class E>
void expect_16_bit_products(std::mt19937& rng, int64_t m, int64_t k, int64_t n, bool a_columns,
                            bool b_columns, uint64_t b_version) {
  const GemmElement element = std::is_same_v<E, BFloat16> ? GemmElement::kBF16 : GemmElement::kF16;
  auto to_16_bit = [](const TestMatrix& x) {
    std::vector<E> bits(x.values.size());
    for (size_t e = 0; e < bits.size(); ++e) bits[e] = E(x.values[e]);
    return bits;
  };
  const TestMatrix a = random_matrix(rng, m, k, a_columns), b = random_matrix(rng, k, n, b_columns);
  const std::vector<E> a16 = to_16_bit(a), b16 = to_16_bit(b);
  auto widened = [](const TestMatrix& x, const std::vector<E>& bits, int64_t i, int64_t j) {
    const E v = bits[x.column_major ? j * x.rows + i : i * x.cols + j];
    return static_cast<double>(static_cast<float>(v));
  };
  GemmOperand ga = a.operand(), gb = b.operand(b_version);
  ga.data = a16.data();
  ga.element = element;
  gb.data = b16.data();
  gb.element = element;
  for (int call = 0; call < (b_version != 0 ? 3 : 1); ++call) {
    std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
    gemm_f32(m, n, k, ga, gb, c.data(), n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double product = widened(a, a16, i, p) * widened(b, b16, p, j);
          sum += product;
          magnitude += std::fabs(product);
        }
        ASSERT_NEAR(c[i * n + j], sum, 1e-6 * magnitude + 1e-30)
            << "C(" << i << ", " << j << ") of " << m << " x " << k << " x " << n << ", call "
            << call;
      }
    }
  }
}

TEST(Gemm, SixteenBitOperandsAreWidenedAsTheyArePacked) {
  clear_packed_weights();
  std::mt19937 rng(std::random_device{}());
  const int64_t shapes[][3] = {{1, 9, 17}, {7, 257, 33}, {73, 40, 65}, {6, 520, 16}};
  uint64_t version = 1000;  // a new one per B: a freed B's address may come back
  for (const auto& [m, k, n] : shapes) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool a_columns = layout & 1, b_columns = layout & 2;
      SCOPED_TRACE(testing::Message() << m << " x " << k << " x " << n << " A col-major "
                                      << a_columns << " B col-major " << b_columns);
      for (bool cached : {false, true}) {
        expect_16_bit_products<BFloat16>(rng, m, k, n, a_columns, b_columns,
                                         cached ? ++version : 0);
        expect_16_bit_products<Half>(rng, m, k, n, a_columns, b_columns, cached ? ++version : 0);
      }
    }
  }
  EXPECT_GT(packed_weight_stats().hits, 0);
  clear_packed_weights();
}

// The same bytes read as bf16 and as f16 are different matrices: the packed-weight cache
// must key on the element type, not only on the data, version and view.
TEST(Gemm, PackedWeightCacheTellsElementTypesApart) {
  clear_packed_weights();
  const int64_t m = 2, k = 3, n = 4;
  std::vector<uint16_t> bits(k * n);
  for (size_t e = 0; e < bits.size(); ++e) bits[e] = BFloat16(0.5f + static_cast<float>(e)).bits;
  const std::vector<float> a(m * k, 1.0f);
  auto product = [&](GemmElement element) {
    std::vector<float> c(m * n);
    gemm_f32(m, n, k, {a.data(), k, 1, 0}, {bits.data(), n, 1, 4242, element}, c.data(), n);
    return c;
  };
  for (int call = 0; call < 3; ++call) product(GemmElement::kBF16);  // kept, then found
  const std::vector<float> as_f16 = product(GemmElement::kF16);
  for (int64_t j = 0; j < n; ++j) {
    double want = 0;
    for (int64_t p = 0; p < k; ++p) {
      Half h;
      h.bits = bits[p * n + j];
      want += static_cast<float>(h);
    }
    EXPECT_EQ(as_f16[j], static_cast<float>(want)) << "column " << j;
  }
  clear_packed_weights();
}

}  // namespace
}  // namespace kiln::runtime::cpu
