// The quantized tile kernels (runtime/cpu/quantized_dot.h): every kernel this CPU runs gives
// the product of the dequantized weight with the 8-bit activations (exact integer dot
// products, then f32 scaling), for every format and for tiles of every shape the kernels cut
// (full tiles of 4 rows and 2 or 4 columns, and the single rows and columns after them).
#include "runtime/cpu/quantized_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/quantized_blocks.h"
#include "tests/quantized_util.h"
#include "tests/test_util.h"

namespace kiln::runtime::cpu {
namespace {

std::vector<uint8_t> random_rows(DType format, int64_t rows, int64_t k, std::mt19937_64& rng) {
  return testing::random_blocks(format, rows * k, rng);
}

struct Kernel {
  const char* name;
  DotTileKernel run;
};

std::vector<Kernel> kernels_here() {
  std::vector<Kernel> out = {{"portable", dot_tile_portable()}};
  if (DotTileKernel k = dot_tile_avx2()) out.push_back({"avx2", k});
  if (DotTileKernel k = dot_tile_avx512_vnni()) out.push_back({"avx512_vnni", k});
  if (DotTileKernel k = dot_tile_avx_vnni()) out.push_back({"avx_vnni", k});
  return out;
}

// c [rows, cols] against the rounded activations' product with the dequantized weight (plus
// bias[j] in column j, where given), in double: within f32 rounding of the sum of the terms'
// magnitudes.
void expect_exact_product(DType format, const std::vector<ActivationBlock>& qa, int rows,
                          const std::vector<uint8_t>& w, int cols, int64_t k,
                          const std::vector<float>& c, const std::vector<float>& bias = {}) {
  const int64_t blocks = k / 32;
  std::vector<float> wf(static_cast<size_t>(cols * k));
  ops::dequantize_row(format, w.data(), wf.data(), cols * k);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < cols; ++j) {
      double exact = bias.empty() ? 0.0 : bias[j], magnitude = std::fabs(exact);
      for (int64_t i = 0; i < k; ++i) {
        const ActivationBlock& b = qa[r * blocks + i / 32];
        const double term = static_cast<double>(b.d) * b.q[i % 32] * wf[j * k + i];
        exact += term;
        magnitude += std::fabs(term);
      }
      ASSERT_NEAR(c[r * cols + j], exact, 2e-6 * magnitude + 1e-30)
          << "row " << r << " column " << j;
    }
  }
}

TEST(QuantizedDot, EveryKernelGivesTheDequantizedProductWithTheRoundedActivations) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<Kernel> kernels = kernels_here();
  for (DType format : kBlockDTypes) {
    SCOPED_TRACE(dtype_name(format));
    const int64_t k = 2 * block_values(format), blocks = k / 32;
    for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{1, 1}, {4, 4}, {9, 11}}) {
      const std::vector<uint8_t> w = random_rows(format, cols, k, rng);
      std::vector<float> a = testing::random_floats(static_cast<size_t>(rows * k), rng);
      std::vector<ActivationBlock> qa(static_cast<size_t>(rows * blocks));
      for (int r = 0; r < rows; ++r) quantize_activations(&a[r * k], k, &qa[r * blocks]);
      for (const Kernel& kernel : kernels) {
        SCOPED_TRACE(kernel.name);
        std::vector<float> c(static_cast<size_t>(rows * cols),
                             std::numeric_limits<float>::quiet_NaN());
        kernel.run({format, qa.data(), blocks, rows, w.data(), storage_bytes(format, k), cols, k,
                    c.data(), cols});
        expect_exact_product(format, qa, rows, w, cols, k, c);
      }
    }
  }
}

// A K format's row that ends inside a super-block (a view of the first 288 values of rows of
// 512): the one-row product takes its per-chunk path there (whole super-blocks take the
// 512-bit one with AVX-512 VNNI), against the same exact product.
TEST(QuantizedDot, OneRowOfAKFormatMayEndInsideASuperBlock) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int64_t full = 512, k = 288, blocks = k / 32;
  const int cols = 3;
  for (DType format : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(format));
    const std::vector<uint8_t> w = random_rows(format, cols, full, rng);
    std::vector<float> wf(static_cast<size_t>(cols * full));
    ops::dequantize_row(format, w.data(), wf.data(), cols * full);
    const std::vector<float> a = testing::random_floats(k, rng);
    std::vector<ActivationBlock> qa(static_cast<size_t>(blocks));
    quantize_activations(a.data(), k, qa.data());
    for (const Kernel& kernel : kernels_here()) {
      SCOPED_TRACE(kernel.name);
      std::vector<float> c(cols, std::numeric_limits<float>::quiet_NaN());
      kernel.run({format, qa.data(), blocks, 1, w.data(), storage_bytes(format, full), cols, k,
                  c.data(), cols});
      for (int j = 0; j < cols; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double term =
              static_cast<double>(qa[i / 32].d) * qa[i / 32].q[i % 32] * wf[j * full + i];
          exact += term;
          magnitude += std::fabs(term);
        }
        ASSERT_NEAR(c[j], exact, 2e-6 * magnitude + 1e-30) << "column " << j;
      }
    }
  }
}

// One row of a 32-value block format long enough for the 512-bit path of AVX-512 VNNI (8
// chunks at a time, the rest one by one): 8 chunks exactly, and 19 (two groups and a tail
// of 3), against the exact product; a non-finite activation in the second group makes every
// column NaN.
TEST(QuantizedDot, OneLongRowOfABlockFormatGivesTheProduct) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int cols = 5;
  for (DType format : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(format));
    for (int64_t k : {256, 608}) {
      const int64_t blocks = k / 32;
      const std::vector<uint8_t> w = random_rows(format, cols, k, rng);
      std::vector<float> a = testing::random_floats(static_cast<size_t>(k), rng);
      std::vector<ActivationBlock> qa(static_cast<size_t>(blocks));
      quantize_activations(a.data(), k, qa.data());
      for (const Kernel& kernel : kernels_here()) {
        SCOPED_TRACE(kernel.name);
        std::vector<float> c(cols, std::numeric_limits<float>::quiet_NaN());
        kernel.run({format, qa.data(), blocks, 1, w.data(), storage_bytes(format, k), cols, k,
                    c.data(), cols});
        expect_exact_product(format, qa, 1, w, cols, k, c);
      }
      a[k - 250] = std::numeric_limits<float>::infinity();
      quantize_activations(a.data(), k, qa.data());
      for (const Kernel& kernel : kernels_here()) {
        std::vector<float> c(cols, 0.0f);
        kernel.run({format, qa.data(), blocks, 1, w.data(), storage_bytes(format, k), cols, k,
                    c.data(), cols});
        for (int j = 0; j < cols; ++j) EXPECT_TRUE(std::isnan(c[j])) << kernel.name << " " << j;
      }
    }
  }
}

// The panel kernels (columns in vector lanes), where this CPU has them: the same product, for
// whole panels (16 or 8 columns) and partial ones, decoded once and run over blocks of rows.
TEST(QuantizedDot, ThePanelKernelsGiveTheSameProduct) {
  std::vector<std::pair<const char*, PanelKernel>> panels;
  if (PanelKernel k = panel_kernel_avx512_vnni(); k.run) panels.emplace_back("avx512_vnni", k);
  if (PanelKernel k = panel_kernel_avx_vnni(); k.run) panels.emplace_back("avx_vnni", k);
  if (panels.empty()) GTEST_SKIP() << "no VNNI on this CPU";
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  for (const auto& [name, panel] : panels) {
    SCOPED_TRACE(name);
    for (DType format : kBlockDTypes) {
      SCOPED_TRACE(dtype_name(format));
      const int64_t k = 2 * block_values(format), blocks = k / 32;
      for (const int cols : {panel.columns, panel.columns - 5, 2}) {
        // A bias for the whole panel and for the 2 columns: added as they are stored.
        const std::vector<float> bias =
            cols == panel.columns - 5 ? std::vector<float>{} : testing::random_floats(cols, rng);
        const int rows = 13;  // runs of 4 and 9 rows: whole blocks of 8 and 4 rows, and single ones
        const std::vector<uint8_t> w = random_rows(format, cols, k, rng);
        std::vector<float> a = testing::random_floats(static_cast<size_t>(rows * k), rng);
        std::vector<ActivationBlock> qa(static_cast<size_t>(rows * blocks));
        for (int r = 0; r < rows; ++r) quantize_activations(&a[r * k], k, &qa[r * blocks]);
        std::vector<float> got(static_cast<size_t>(rows * cols), std::nanf(""));
        struct alignas(64) Line {
          uint8_t bytes[64];
        };
        std::vector<Line> scratch(static_cast<size_t>(panel.bytes(k) / 64));
        const DotTile tile{format, qa.data(), blocks,     0,   w.data(), storage_bytes(format, k),
                           cols,   k,         got.data(), cols};
        panel.run({tile, scratch.data()->bytes, false});  // decode only
        for (const auto& [r0, n] : std::vector<std::pair<int, int>>{{0, 4}, {4, 9}}) {
          DotTile part = tile;
          part.a = qa.data() + r0 * blocks;
          part.rows = n;
          part.c = got.data() + r0 * cols;
          panel.run({part, scratch.data()->bytes, true, bias.empty() ? nullptr : bias.data()});
        }
        SCOPED_TRACE(cols);
        expect_exact_product(format, qa, rows, w, cols, k, got, bias);
      }
    }
  }
}

// The vector rounding of activations gives the portable loop's bits, NaN blocks included.
TEST(QuantizedDot, ActivationsRoundTheSameInVectors) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  std::vector<float> a = testing::random_floats(32 * 64, rng, -300, 300);
  for (int b = 0; b < 64; b += 7) a[32 * b + b % 32] *= 1e-3f;  // one value far from the rest
  std::fill_n(a.begin() + 32 * 5, 32, 0.0f);                    // a zero block
  for (int i = 0; i < 32; ++i) a[32 * 13 + i] = (i % 3 - 1) * 1e-38f;  // 1 / d overflows
  a[32 * 13 + 7] = 2e-37f;
  a[32 * 9 + 3] = std::numeric_limits<float>::infinity();
  a[32 * 11 + 30] = std::nanf("");
  std::vector<ActivationBlock> got(64), want(64);
  quantize_activations(a.data(), 32 * 64, got.data());
  quantize_activations_portable(a.data(), 32 * 64, want.data());
  for (int b = 0; b < 64; ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(std::memcmp(got[b].q, want[b].q, 32), 0);
    EXPECT_EQ(got[b].sum_low, want[b].sum_low);
    EXPECT_EQ(got[b].sum_high, want[b].sum_high);
    EXPECT_TRUE(got[b].d == want[b].d || (std::isnan(got[b].d) && std::isnan(want[b].d)));
    EXPECT_TRUE(got[b].dsum == want[b].dsum ||
                (std::isnan(got[b].dsum) && std::isnan(want[b].dsum)));
  }
  EXPECT_TRUE(std::isnan(got[9].d));
  EXPECT_TRUE(std::isnan(got[11].d));
  EXPECT_EQ(got[5].d, 0.0f);
  EXPECT_EQ(got[13].q[7], 127);  // the largest value, positive
  EXPECT_EQ(got[13].q[0], -6);   // -1e-38 / 2e-37 * 127, rounded
  EXPECT_EQ(got[13].q[1], 0);
}

TEST(QuantizedDot, ANonFiniteActivationMakesItsRowNan) {
  std::mt19937_64 rng(testing::test_seed());
  const int64_t k = 64;
  const std::vector<uint8_t> w = random_rows(DType::Q4_0, 3, k, rng);
  std::vector<float> a = testing::random_floats(2 * k, rng);
  a[40] = std::numeric_limits<float>::infinity();
  std::vector<ActivationBlock> qa(4);
  for (int r = 0; r < 2; ++r) quantize_activations(&a[r * k], k, &qa[r * 2]);
  for (const Kernel& kernel : kernels_here()) {
    std::vector<float> c(6, 0.0f);
    kernel.run(
        {DType::Q4_0, qa.data(), 2, 2, w.data(), storage_bytes(DType::Q4_0, k), 3, k, c.data(), 3});
    for (int j = 0; j < 3; ++j) {
      EXPECT_TRUE(std::isnan(c[j])) << kernel.name;
      EXPECT_TRUE(std::isfinite(c[3 + j])) << kernel.name;
    }
  }
}

}  // namespace
}  // namespace kiln::runtime::cpu
