// DType facts, PyTorch promotion and the 16-bit float conversions.
#include <bit>
#include <cmath>
#include <limits>

#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType dt : kAllDTypes) EXPECT_EQ(dtype_from_name(dtype_name(dt)), dt);
  EXPECT_STREQ(dtype_name(DType::F8E4M3), "f8e4m3");
  EXPECT_STREQ(dtype_name(DType::U8), "u8");
  EXPECT_THROW(dtype_from_name("float32"), Error);
  EXPECT_EQ(dtype_size(DType::Bool), 1);
  EXPECT_EQ(dtype_size(DType::BF16), 2);
  EXPECT_EQ(dtype_size(DType::I64), 8);
  EXPECT_EQ(dtype_size(DType::I8), 1);
  EXPECT_EQ(dtype_size(DType::U8), 1);
  EXPECT_EQ(dtype_size(DType::I16), 2);
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1);
  EXPECT_EQ(dtype_size(DType::F8E5M2), 1);
  EXPECT_TRUE(is_integral(DType::U8));
  EXPECT_FALSE(is_integral(DType::F8E5M2));
  EXPECT_TRUE(is_floating(DType::F8E4M3));
  // The block formats: their names, ggml's block sizes, and no element size of their own.
  for (DType dt : kBlockDTypes) {
    EXPECT_EQ(dtype_from_name(dtype_name(dt)), dt);
    EXPECT_TRUE(is_block_quantized(dt));
    EXPECT_FALSE(is_floating(dt) || is_integral(dt));
    EXPECT_EQ(dtype_size(dt), 0);
  }
  EXPECT_EQ(block_values(DType::Q4_1), 32);
  EXPECT_EQ(block_values(DType::Q6_K), 256);
  EXPECT_EQ(block_values(DType::F32), 1);
  EXPECT_EQ(storage_bytes(DType::Q4_0, 64), 36);
  EXPECT_EQ(storage_bytes(DType::Q5_K, 512), 352);
  EXPECT_EQ(storage_bytes(DType::Q6_K, 256), 210);
  EXPECT_EQ(storage_bytes(DType::F16, 10), 20);
  EXPECT_FALSE(is_block_quantized(DType::I8));
}

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::Bool, DType::I32), DType::I32);
  EXPECT_EQ(promote_types(DType::I32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::I64, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::F16, DType::BF16), DType::F32);
  EXPECT_EQ(promote_types(DType::BF16, DType::F16), DType::F32);
  EXPECT_EQ(promote_types(DType::BF16, DType::F32), DType::F32);
  EXPECT_EQ(promote_types(DType::F32, DType::F64), DType::F64);
  EXPECT_EQ(promote_types(DType::I64, DType::F32), DType::F32);
  EXPECT_EQ(promote_types(DType::Bool, DType::Bool), DType::Bool);
}

// torch.promote_types for the 8- and 16-bit integers, both ways round; the two 8-bit floats
// (which PyTorch does not promote) give F16, which holds both exactly.
TEST(DType, PromotionOfTheNarrowTypes) {
  const struct {
    DType a, b, want;
  } cases[] = {
      {DType::U8, DType::I8, DType::I16},         {DType::U8, DType::I16, DType::I16},
      {DType::I8, DType::I16, DType::I16},        {DType::U8, DType::I32, DType::I32},
      {DType::I8, DType::I64, DType::I64},        {DType::Bool, DType::U8, DType::U8},
      {DType::U8, DType::F16, DType::F16},        {DType::I16, DType::BF16, DType::BF16},
      {DType::I64, DType::F8E4M3, DType::F8E4M3}, {DType::F8E4M3, DType::F8E5M2, DType::F16},
      {DType::F8E4M3, DType::BF16, DType::BF16},  {DType::F8E5M2, DType::F16, DType::F16},
      {DType::F8E4M3, DType::F32, DType::F32},    {DType::Bool, DType::F8E5M2, DType::F8E5M2},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(promote_types(c.a, c.b), c.want) << dtype_name(c.a) << " " << dtype_name(c.b);
    EXPECT_EQ(promote_types(c.b, c.a), c.want) << dtype_name(c.b) << " " << dtype_name(c.a);
  }
  // Symmetric over every pair, and a dtype that holds both operands' kinds.
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      const DType p = promote_types(a, b);
      EXPECT_EQ(p, promote_types(b, a));
      if (is_floating(a) || is_floating(b)) EXPECT_TRUE(is_floating(p));
    }
  }
}

// Every finite half converts to float and back to the same bits.
TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    Half h;
    h.bits = static_cast<uint16_t>(bits);
    float f = static_cast<float>(h);
    if (std::isnan(f)) {
      EXPECT_TRUE((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0);
      EXPECT_TRUE(std::isnan(static_cast<float>(Half(f))));
      continue;
    }
    EXPECT_EQ(Half(f).bits, bits) << "bits " << bits << " value " << f;
  }
}

// Independent check of rounding: the nearest half (ties to even) by brute force over
// neighbouring representable values.
TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(Half(1.0f + 1.0f / 2048)), 1.0f);                // tie: down to even
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);  // tie: up
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  std::uniform_real_distribution<float> dist(-70000, 70000);
  for (int i = 0; i < 20000; ++i) {
    float x = i % 2 ? dist(rng) : dist(rng) * 1e-5f;
    float got = static_cast<float>(Half(x));
    if (std::fabs(x) >= 65520) {
      EXPECT_TRUE(std::isinf(got));
      continue;
    }
    // No half lies strictly closer to x than `got`.
    Half h(x);
    for (int delta : {-1, 1}) {
      Half n;
      n.bits = static_cast<uint16_t>(h.bits + delta);
      float other = static_cast<float>(n);
      if (std::isnan(other) || std::isinf(other)) continue;
      EXPECT_LE(std::fabs(got - x), std::fabs(other - x)) << x;
    }
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 1.0f / 256)), 1.0f);  // tie: even
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(static_cast<float>(BFloat16(std::numeric_limits<float>::infinity()))));
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    BFloat16 b;
    b.bits = static_cast<uint16_t>(bits);
    float f = static_cast<float>(b);
    if (!std::isnan(f)) EXPECT_EQ(BFloat16(f).bits, bits);
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Inside a fused kernel every f16/bf16 op rounds to 16 bits, as if each result were stored
// (docs/semantics.md): (1 + tiny) - 1 is 0 in 16 bits, tiny in f32. Checked through a
// pointwise chain, a reduction's prologue, a row norm's epilogue and a cast, against the
// reference evaluator too.
TEST(SixteenBitFloats, EveryOpInsideAFusedKernelRounds) {
  for (auto [dt, tiny] : {std::pair{DType::BF16, 1.0 / 512}, std::pair{DType::F16, 1.0 / 4096}}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor one = Tensor::full({3, 1000}, 1.0, dt).eval();
    Tensor chain = (one + tiny) - 1.0;                                 // pointwise
    Tensor reduced = sum((one + tiny) - 1.0, {1});                     // in a reduction's prologue
    Tensor normed = softmax(one.reshape({3000, 1}), -1) + tiny - 1.0;  // a row norm's epilogue
    Tensor cast = ((one.astype(DType::F32) + tiny).astype(dt) - 1.0).astype(DType::F32);
    for (const Tensor& t : {chain, reduced, normed, cast}) {
      // The reference first: once t is computed, the reference would just read its result.
      const std::vector<double> want = testing::values(testing::reference_tensor(t));
      const std::vector<double> got = testing::values(t);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], 0.0) << i;
        EXPECT_EQ(want[i], 0.0) << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
