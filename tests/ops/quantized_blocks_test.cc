// ggml's block formats against llama.cpp's gguf Python package (gguf.quants, numpy): the
// same bytes from quantizing, bit for bit the same floats from dequantizing, on random rows
// and adversarial ones (all zero, constant, the f16 extremes, ties in magnitude, every
// magnitude in one block), and random bytes for the super-block formats.
#include "ops/quantized_blocks.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/graph/node.h"
#include "kiln/io.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

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

// ggml's name of a block dtype: "Q4_0" for q4_0.
std::string ggml_name(DType f) {
  std::string name = dtype_name(f);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// Equal bits, or both NaN.
bool same_float(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

class QuantizedBlocksTest : public testing::ScratchDirTest {
 protected:
  // Runs a Python script in the scratch folder with the gguf package.
  void python(const std::string& script) {
    const testing::Result r = testing::run_python_tools(script, path(""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

TEST_F(QuantizedBlocksTest, MatchTheGgufPackageBitForBit) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> x = test_rows(rng, 24);
  const int64_t rows = static_cast<int64_t>(x.size()) / kRow;
  save_npy(path("x.npy"), Tensor::from_vector(x, {rows, kRow}));
  // Random bytes for the super-block formats, which the package does not quantize (their
  // quantizers are checked against llama.cpp's below).
  auto from_package = [](DType f) { return block_values(f) == 32; };
  for (DType f : kBlockDTypes) {
    if (from_package(f)) continue;
    std::vector<uint8_t> bytes(static_cast<size_t>(8 * block_bytes(f)));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    save_npy(path(std::string("k_") + ggml_name(f) + ".npy"),
             Tensor::from_vector(bytes, {8, static_cast<int64_t>(block_bytes(f))}));
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
  for (DType f : kBlockDTypes) {
    const std::string name = ggml_name(f);
    const int64_t values = block_values(f), bytes = block_bytes(f);
    SCOPED_TRACE(name);
    const std::vector<float> want = floats_of(load_npy(path("d_" + name + ".npy")));
    std::vector<uint8_t> blocks;
    if (from_package(f)) {
      blocks = load_npy(path("q_" + name + ".npy")).to_vector<uint8_t>();
      const int64_t row_bytes = kRow / values * bytes;
      ASSERT_EQ(static_cast<int64_t>(blocks.size()), rows * row_bytes);
      std::vector<uint8_t> mine(static_cast<size_t>(row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        ops::quantize_row(f, x.data() + r * kRow, mine.data(), kRow);
        for (int64_t k = 0; k < row_bytes; ++k) {
          ASSERT_EQ(mine[k], blocks[r * row_bytes + k]) << "row " << r << " byte " << k;
        }
      }
    } else {
      blocks = load_npy(path("k_" + name + ".npy")).to_vector<uint8_t>();
    }
    const int64_t n = static_cast<int64_t>(blocks.size()) / bytes * values;
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
  for (DType f : kBlockDTypes) {
    SCOPED_TRACE(dtype_name(f));
    const int64_t values = block_values(f);
    std::vector<float> x(static_cast<size_t>(2 * values), 1.5f);
    x[values + 8] = std::nanf("");
    std::vector<uint8_t> blocks(2 * static_cast<size_t>(block_bytes(f)));
    ops::quantize_row(f, x.data(), blocks.data(), 2 * values);
    std::vector<float> y(static_cast<size_t>(2 * values));
    ops::dequantize_row(f, blocks.data(), y.data(), 2 * values);
    for (int64_t j = 0; j < values; ++j) EXPECT_NEAR(y[j], 1.5f, 0.01f) << j;
    for (int64_t j = values; j < 2 * values; ++j) EXPECT_TRUE(std::isnan(y[j])) << j;
  }
}

// Signed zeros as ggml's reference quantizers treat them: the search for the value of
// largest magnitude starts from +0 (a block of -0 stores d = -0 / -8 = -0), and the minimum
// keeps the first of equal zeros.
TEST(QuantizedBlocks, SignedZerosAsGgmlStoresThem) {
  std::vector<float> x(32, -0.0f);
  std::vector<uint8_t> b(34);
  ops::quantize_row(DType::Q4_0, x.data(), b.data(), 32);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x80);
  x[0] = 0.0f;  // +0 first, then -0: the minimum is +0
  ops::quantize_row(DType::Q4_1, x.data(), b.data(), 32);
  EXPECT_EQ(b[2], 0x00);
  EXPECT_EQ(b[3], 0x00);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The f32 values `blocks` of `format` hold, by the codec.
std::vector<float> codec_values(DType format, const std::vector<uint8_t>& blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  ops::dequantize_row(format, blocks.data(), out.data(), n);
  return out;
}

std::vector<uint8_t> codec_blocks(DType format, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(static_cast<size_t>(storage_bytes(format, n)));
  ops::quantize_row(format, x.data(), out.data(), n);
  return out;
}

// astype quantizes and dequantizes whole tensors as the codec does; a block-quantized tensor
// is storage that every other op refuses, naming it and saying to astype first.
TEST(BlockDTypes, AstypeQuantizesAndDequantizesAsTheCodecDoes) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> x = testing::random_floats(3 * 64, rng);
  const Tensor t = Tensor::from_vector(x, {3, 64}) * 1.0;  // lazy: astype evaluates it
  for (DType f : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(f));
    const Tensor q = t.astype(f);
    EXPECT_EQ(q.dtype(), f);
    EXPECT_EQ(q.shape(), (std::vector<int64_t>{3, 64}));
    EXPECT_TRUE(q.is_realized());
    const std::vector<float> want = codec_values(f, codec_blocks(f, x), 3 * 64);
    const std::vector<float> got = q.astype(DType::F32).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
    EXPECT_EQ(q.astype(DType::BF16).dtype(), DType::BF16);
    // Between two block formats: through f32.
    const std::vector<float> requantized =
        codec_values(DType::Q8_0, codec_blocks(DType::Q8_0, want), 3 * 64);
    EXPECT_EQ(q.astype(DType::Q8_0).astype(DType::F32).to_vector<float>(), requantized);
  }
  const Tensor q = t.astype(DType::Q8_0);
  testing::expect_error(
      [&] {
        (void)Tensor::zeros({3, 40}).astype(DType::Q4_0);
      },
      {"[astype]", "f32[3, 40]", "multiple of 32"});
  testing::expect_error([&] { (void)(q + 1.0); }, {"block-quantized", "q8_0", "astype"});
  testing::expect_error([&] { (void)q.reshape({192}); }, {"[reshape]", "block-quantized"});
  testing::expect_error([&] { (void)sum(q); }, {"[sum]", "block-quantized"});
  testing::expect_error([&] { (void)Tensor::full({32}, 1.0, DType::Q4_0); }, {"q4_0"});
  testing::expect_error([&] { (void)q.to_vector<float>(); }, {"astype"});
  testing::expect_error([] { (void)promote_types(DType::Q4_0, DType::F32); }, {"q4_0", "astype"});
  // q is unchanged by the failed calls.
  EXPECT_EQ(q.astype(DType::F32).to_vector<float>(),
            codec_values(DType::Q8_0, codec_blocks(DType::Q8_0, x), 3 * 64));
}

// Block-quantized tensors in GGUF files as the gguf package writes them (its own quantizer
// for the 32-value formats, random blocks for the K formats): Kiln reads each with its
// dtype and logical shape, and astype(F32) gives the package's dequantized values bit for
// bit; writing them back gives a file the package reads the same.
TEST_F(QuantizedBlocksTest, GgufFilesOfEveryBlockFormatReadAsThePackageReadsThem) {
  python(R"PY(
import numpy as np, gguf
from gguf import quants, GGMLQuantizationType as T
rng = np.random.default_rng(7)
w = gguf.GGUFWriter("q.gguf", "llama")
for name in ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]:
    t = T[name]
    values, nbytes = quants.GGML_QUANT_SIZES[t]
    if name.endswith("_K"):
        raw = rng.integers(0, 256, size=(3, 2 * nbytes), dtype=np.uint8)
        raw.reshape(3, 2, nbytes)[..., -2:] = 0x10  # finite f16 scales at the end (Q6_K's d)
        if name != "Q6_K":
            raw.reshape(3, 2, nbytes)[..., 0:4] = 0x11  # Q4_K/Q5_K: finite d and dmin first
    else:
        raw = quants.quantize(rng.standard_normal((3, 2 * values)).astype(np.float32), t)
    w.add_tensor(name.lower(), raw, raw_dtype=t)
    np.save(name.lower() + ".npy", quants.dequantize(raw, t).astype(np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
)PY");
  GgufFile f = load_gguf(path("q.gguf"));
  for (DType q : kBlockDTypes) {
    const std::string name = dtype_name(q);
    SCOPED_TRACE(name);
    const Tensor& t = f.tensors.at(name);
    EXPECT_EQ(t.dtype(), q);
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{3, 2 * block_values(q)}));
    const std::vector<float> want = load_npy(path(name + ".npy")).to_vector<float>();
    const std::vector<float> got = t.astype(DType::F32).to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same_float(got[i], want[i])) << i;
  }
  save_gguf(path("back.gguf"), f);
  GgufFile back = load_gguf(path("back.gguf"));
  for (DType q : kBlockDTypes) {
    const std::string name = dtype_name(q);
    EXPECT_EQ(back.tensors.at(name).dtype(), q);
    const std::vector<float> a = back.tensors.at(name).astype(DType::F32).to_vector<float>();
    const std::vector<float> b = f.tensors.at(name).astype(DType::F32).to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_float(a[i], b[i])) << name << " " << i;
  }
}

// The K formats' quantizers against llama.cpp's own (quantize_row_q4_K_ref and the others),
// byte for byte: tests/data/k_quant_references.gguf holds rows of every kind (random at three
// scales, zero, constant, one-signed, outliers, a zero sub-block, every magnitude) and the
// bytes llama.cpp wrote for them (scripts/make-k-quant-references.py says how).
TEST(BlockDTypes, KFormatsQuantizeAsLlamaCppDoes) {
  const GgufFile file =
      load_gguf(std::string(KILN_SOURCE_DIR) + "/tests/data/k_quant_references.gguf");
  const Tensor input = file.tensors.at("input");
  const std::vector<float> x = input.to_vector<float>();
  for (DType format : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(format));
    const Tensor want = file.tensors.at(dtype_name(format));
    ASSERT_EQ(want.dtype(), format);
    ASSERT_EQ(want.shape(), input.shape());
    const std::shared_ptr<const base::Buffer> bytes =
        jit::host_view(detail::TensorAccess::node(want)->buffer);
    const std::vector<uint8_t> got = codec_blocks(format, x);
    ASSERT_EQ(static_cast<int64_t>(got.size()), bytes->nbytes());
    const int64_t row_bytes = storage_bytes(format, input.shape()[1]);
    for (int64_t i = 0; i < bytes->nbytes(); ++i) {
      ASSERT_EQ(got[i], bytes->as<uint8_t>()[i])
          << "row " << i / row_bytes << ", byte " << i % row_bytes;
    }
    // And through astype, on the tensor.
    EXPECT_EQ(input.astype(format).astype(DType::F32).to_vector<float>(),
              want.astype(DType::F32).to_vector<float>());
  }
}

}  // namespace
}  // namespace kiln
