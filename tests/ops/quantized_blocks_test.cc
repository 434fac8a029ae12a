// ggml's block formats against llama.cpp's gguf Python package (gguf.quants, numpy): the
// same bytes from quantizing, bit for bit the same floats from dequantizing, on random rows
// and adversarial ones (all zero, constant, the f16 extremes, ties in magnitude, every
// magnitude in one block), and random bytes for the super-block formats.
#include "ops/quantized_blocks.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kiln/io.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using ops::BlockFormat;

constexpr int64_t kRow = 256;  // a multiple of every block

// Rows of kRow values: random ones first, then the adversarial cases block by block.
std::vector<float> test_rows(std::mt19937_64& rng, int random_rows) {
  std::vector<float> x;
  std::normal_distribution<float> normal(0, 1);
  std::uniform_real_distribution<float> exponent(-8, 4);
  for (int r = 0; r < random_rows; ++r) {
    const float scale = std::pow(10.0f, exponent(rng));
    for (int64_t j = 0; j < kRow; ++j) x.push_back(normal(rng) * scale);
  }
  std::vector<float> row(kRow, 0.0f);  // all zero
  x.insert(x.end(), row.begin(), row.end());
  for (float c : {3.5f, -0.25f, 65504.0f, -65504.0f}) {  // constant blocks
    row.assign(kRow, c);
    x.insert(x.end(), row.begin(), row.end());
  }
  for (int64_t j = 0; j < kRow; ++j) {  // ties in magnitude (3 and -3), and +-max of f16
    row[j] = (j % 32 == 5) ? -3.0f : (j % 32 == 9 ? 3.0f : (j % 7 == 0 ? 65504.0f : 1.0f));
    if (j >= 128) row[j] = -row[j];
  }
  x.insert(x.end(), row.begin(), row.end());
  for (int64_t j = 0; j < kRow; ++j) {  // every magnitude in one block, and one large value
    row[j] = std::ldexp(j % 2 ? -1.0f : 1.0f, static_cast<int>(j % 40) - 30);
  }
  row[17] = 1e4f;
  x.insert(x.end(), row.begin(), row.end());
  return x;
}

std::vector<float> floats_of(const Tensor& t) { return t.to_vector<float>(); }

// Equal bits, or both NaN.
bool same_float(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

class QuantizedBlocksTest : public testing::ScratchDirTest {
 protected:
  // Runs the gguf package (scripts/install-deps.sh puts it in ~/.cache/kiln/tools/python).
  void python(const std::string& script) {
    std::string tools;
    if (const char* env = std::getenv("KILN_PYTHON_TOOLS")) {
      tools = env;
    } else if (const char* home = std::getenv("HOME")) {
      tools = std::string(home) + "/.cache/kiln/tools/python";
    }
    ASSERT_TRUE(std::filesystem::exists(tools + "/gguf"))
        << "the gguf Python package is missing from " << tools
        << ": run scripts/install-deps.sh, or set KILN_PYTHON_TOOLS";
    std::ofstream(path("script.py")) << script;
    testing::Result r =
        testing::run("cd " + path("") + " && PYTHONPATH=" + tools + " python3 script.py");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

TEST_F(QuantizedBlocksTest, MatchTheGgufPackageBitForBit) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> x = test_rows(rng, 24);
  const int64_t rows = static_cast<int64_t>(x.size()) / kRow;
  save_npy(path("x.npy"), Tensor::from_vector(x, {rows, kRow}));
  // Random bytes for the super-block formats (whose quantizers Kiln does not have yet).
  for (BlockFormat f : ops::kAllBlockFormats) {
    if (ops::can_quantize(f)) continue;
    const ops::BlockLayout& l = ops::block_layout(f);
    std::vector<uint8_t> bytes(static_cast<size_t>(8 * l.bytes));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    save_npy(path(std::string("k_") + l.name + ".npy"),
             Tensor::from_vector(bytes, {8, static_cast<int64_t>(l.bytes)}));
  }
  python(R"PY(
import numpy as np
from gguf import quants, GGMLQuantizationType as T
x = np.load("x.npy")
for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]:
    q = quants.quantize(x, T[name])
    np.save(f"q_{name}.npy", q)
    np.save(f"d_{name}.npy", quants.dequantize(q, T[name]).astype(np.float32))
for name in ["Q4_K", "Q5_K", "Q6_K"]:
    b = np.load(f"k_{name}.npy")
    np.save(f"d_{name}.npy", quants.dequantize(b, T[name]).astype(np.float32))
)PY");
  for (BlockFormat f : ops::kAllBlockFormats) {
    const ops::BlockLayout& l = ops::block_layout(f);
    SCOPED_TRACE(l.name);
    const std::vector<float> want = floats_of(load_npy(path(std::string("d_") + l.name + ".npy")));
    std::vector<uint8_t> blocks;
    if (ops::can_quantize(f)) {
      blocks = load_npy(path(std::string("q_") + l.name + ".npy")).to_vector<uint8_t>();
      const int64_t row_bytes = kRow / l.values * l.bytes;
      ASSERT_EQ(static_cast<int64_t>(blocks.size()), rows * row_bytes);
      std::vector<uint8_t> mine(static_cast<size_t>(row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        ops::quantize_row(f, x.data() + r * kRow, mine.data(), kRow);
        for (int64_t k = 0; k < row_bytes; ++k) {
          ASSERT_EQ(mine[k], blocks[r * row_bytes + k]) << "row " << r << " byte " << k;
        }
      }
    } else {
      blocks = load_npy(path(std::string("k_") + l.name + ".npy")).to_vector<uint8_t>();
    }
    const int64_t n = static_cast<int64_t>(blocks.size()) / l.bytes * l.values;
    ASSERT_EQ(static_cast<int64_t>(want.size()), n);
    std::vector<float> got(static_cast<size_t>(n), std::nanf(""));  // poisoned
    ops::dequantize_row(f, blocks.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same_float(got[i], want[i]))
          << "value " << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// A block holding NaN dequantizes to NaN throughout (its scale is NaN); its neighbours keep
// their values.
TEST_F(QuantizedBlocksTest, ABlockWithNanDequantizesToNan) {
  for (BlockFormat f : ops::kAllBlockFormats) {
    if (!ops::can_quantize(f)) continue;
    SCOPED_TRACE(ops::block_layout(f).name);
    std::vector<float> x(64, 1.5f);
    x[40] = std::nanf("");
    std::vector<uint8_t> blocks(2 * static_cast<size_t>(ops::block_layout(f).bytes));
    ops::quantize_row(f, x.data(), blocks.data(), 64);
    std::vector<float> y(64);
    ops::dequantize_row(f, blocks.data(), y.data(), 64);
    for (int j = 0; j < 32; ++j) EXPECT_NEAR(y[j], 1.5f, 0.01f) << j;
    for (int j = 32; j < 64; ++j) EXPECT_TRUE(std::isnan(y[j])) << j;
  }
}

}  // namespace
}  // namespace kiln
