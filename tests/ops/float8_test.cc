// The OCP 8-bit floats (Float8E4M3, Float8E5M2 in kiln/dtype.h) against values computed
// independently: every code decoded from its fields with ldexp, and rounding checked as "no
// finite code lies closer, ties to the even code" by a search over all 256 codes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/test_util.h"

namespace kiln {
namespace {

// One format's parameters, as the OCP specification gives them.
struct Format {
  const char* name;
  int mantissa_bits;
  int bias;
  bool has_infinity;  // E5M2: exponent all ones is infinity or NaN; E4M3: only S.1111.111 is NaN
  double largest;
};
constexpr Format kE4M3{"e4m3", 3, 7, false, 448};
constexpr Format kE5M2{"e5m2", 2, 15, true, 57344};

// The value of `code` from its sign, exponent and mantissa fields.
double reference_value(const Format& f, uint32_t code) {
  const int exponent_bits = 7 - f.mantissa_bits;
  const uint32_t exponent = (code >> f.mantissa_bits) & ((1u << exponent_bits) - 1);
  const uint32_t mantissa = code & ((1u << f.mantissa_bits) - 1);
  const double sign = (code & 0x80u) ? -1.0 : 1.0;
  const bool top = exponent == (1u << exponent_bits) - 1;
  if (f.has_infinity && top) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity() : std::nan("");
  }
  if (!f.has_infinity && top && mantissa == (1u << f.mantissa_bits) - 1) return std::nan("");
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
  return sign * std::ldexp((1u << f.mantissa_bits) + mantissa,
                           static_cast<int>(exponent) - f.bias - f.mantissa_bits);
}

template <class Fp8>
float decode(uint32_t code) {
  Fp8 v;
  v.bits = static_cast<uint8_t>(code);
  return static_cast<float>(v);
}

// The code `x` must convert to: NaN to the NaN code; past the largest finite value
// (infinities included) the largest with x's sign; otherwise the nearest finite code, ties
// to the one whose mantissa is even.
uint32_t reference_code(const Format& f, double x) {
  const uint32_t nan_code = 0x7f;
  if (std::isnan(x)) return nan_code;
  const uint32_t sign = std::signbit(x) ? 0x80u : 0u;
  if (std::fabs(x) >= f.largest) {
    for (uint32_t c = 0; c < 128; ++c) {
      if (reference_value(f, c) == f.largest) return sign | c;
    }
  }
  uint32_t best = 0;
  double best_error = std::numeric_limits<double>::infinity();
  for (uint32_t c = 0; c < 128; ++c) {
    const double v = reference_value(f, c);
    if (!std::isfinite(v)) continue;
    const double error = std::fabs(std::fabs(x) - v);
    if (error < best_error || (error == best_error && (c & 1u) == 0)) {
      best = c;
      best_error = error;
    }
  }
  return sign | best;
}

template <class Fp8>
void expect_format(const Format& f) {
  SCOPED_TRACE(f.name);
  // Every code decodes to its value, and every non-NaN code encodes back to itself.
  for (uint32_t code = 0; code < 256; ++code) {
    const double want = reference_value(f, code);
    const float got = decode<Fp8>(code);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << code;
      EXPECT_TRUE(std::isnan(static_cast<float>(Fp8(got))));
      continue;
    }
    EXPECT_EQ(got, want) << "code " << code;
    if (std::isfinite(want)) EXPECT_EQ(Fp8(got).bits, code) << "value " << want;
  }
  // Infinities and overflow saturate; NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(static_cast<float>(Fp8(inf)), f.largest);
  EXPECT_EQ(static_cast<float>(Fp8(-inf)), -f.largest);
  EXPECT_EQ(static_cast<float>(Fp8(1e30f)), f.largest);
  EXPECT_TRUE(std::isnan(static_cast<float>(Fp8(std::nanf("")))));
  // Ties and near-ties between every pair of neighbouring finite codes, then random values of
  // every magnitude, against the brute-force nearest code.
  std::vector<double> xs;
  for (uint32_t c = 0; c + 1 < 128; ++c) {
    const double a = reference_value(f, c), b = reference_value(f, c + 1);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const double mid = (a + b) / 2;
    for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  std::uniform_real_distribution<double> exponent(-20, 18), unit(-1, 1);
  for (int i = 0; i < 20000; ++i) xs.push_back(unit(rng) * std::pow(2.0, exponent(rng)));
  for (double x : xs) {
    const auto value = static_cast<float>(x);  // what a kernel holds: f32
    EXPECT_EQ(Fp8(value).bits, reference_code(f, value)) << "x = " << value;
  }
}

TEST(Float8, E4M3MatchesTheOcpDefinition) { expect_format<Float8E4M3>(kE4M3); }
TEST(Float8, E5M2MatchesTheOcpDefinition) { expect_format<Float8E5M2>(kE5M2); }

// Casts to the 8-bit floats through Kiln ops give the same codes as the conversion structs
// (the reference evaluator, the CPU executor and, under emulation, the CUDA renderer), and
// integer casts truncate and saturate (from floats) or keep the low bits (from integers).
TEST(NarrowDTypes, CastsFollowTheDocumentedRules) {
  const std::vector<float> x = {300.7f,    -300.0f,       1.9f,
                                -1.9f,     std::nanf(""), std::numeric_limits<float>::infinity(),
                                100000.0f, 0.3f};
  Tensor t = Tensor::from_vector(x, {8});
  EXPECT_EQ(t.astype(DType::I8).to_vector<int8_t>(),
            (std::vector<int8_t>{127, -128, 1, -1, 0, 127, 127, 0}));
  EXPECT_EQ(t.astype(DType::U8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 1, 0, 0, 255, 255, 0}));
  EXPECT_EQ(t.astype(DType::I16).to_vector<int16_t>(),
            (std::vector<int16_t>{300, -300, 1, -1, 0, 32767, 32767, 0}));
  Tensor wide = Tensor::from_vector(std::vector<int32_t>{257, -129, 65535, -32769, 200}, {5});
  EXPECT_EQ(wide.astype(DType::I8).to_vector<int8_t>(), (std::vector<int8_t>{1, 127, -1, -1, -56}));
  EXPECT_EQ(wide.astype(DType::U8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{1, 127, 255, 255, 200}));
  EXPECT_EQ(wide.astype(DType::I16).to_vector<int16_t>(),
            (std::vector<int16_t>{257, -129, -1, 32767, 200}));
  // Arithmetic wraps in the narrow type: 100 + 100 in i8 is -56, 200 + 100 in u8 is 44.
  Tensor a = Tensor::from_vector(std::vector<int8_t>{100, -100}, {2});
  EXPECT_EQ((a + a).to_vector<int8_t>(), (std::vector<int8_t>{-56, 56}));
  Tensor b = Tensor::from_vector(std::vector<uint8_t>{200, 3}, {2});
  EXPECT_EQ((b + Tensor::from_vector(std::vector<uint8_t>{100, 5}, {2})).to_vector<uint8_t>(),
            (std::vector<uint8_t>{44, 8}));
  // u8 with i8 promotes to i16, so nothing wraps.
  Tensor mixed = b + Tensor::from_vector(std::vector<int8_t>{100, -5}, {2});
  EXPECT_EQ(mixed.dtype(), DType::I16);
  EXPECT_EQ(mixed.to_vector<int16_t>(), (std::vector<int16_t>{300, -2}));
  for (DType dt : {DType::F8E4M3, DType::F8E5M2}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<double> got = testing::values(t.astype(dt));
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = dt == DType::F8E4M3 ? static_cast<float>(Float8E4M3(x[i]))
                                              : static_cast<float>(Float8E5M2(x[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
      } else {
        EXPECT_EQ(got[i], want) << i;
      }
    }
  }
  // Every op on an 8-bit float rounds its result to 8 bits: 1 + 1/16 is 1 in e4m3.
  Tensor one = Tensor::full({4}, 1.0, DType::F8E4M3);
  for (double v : testing::values(one + 1.0 / 16)) EXPECT_EQ(v, 1.0);
  for (double v : testing::values(one + 1.0 / 8)) EXPECT_EQ(v, 1.125);
}

}  // namespace
}  // namespace kiln
