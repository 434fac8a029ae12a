// Creation ops, metadata and data in and out.
#include <array>
#include <cmath>
#include <numeric>

#include "jit/backend/backend.h"
#include "ops/scalar_math.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(Creation, FromVectorKeepsDataAndShapeForEveryDtype) {
  Tensor f = Tensor::from_vector<float>({1.5f, -2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_EQ(f.numel(), 6);
  EXPECT_EQ(f.ndim(), 2);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f, -2, 3, 4, 5, 6}));
  EXPECT_EQ(Tensor::from_vector<double>({1e300}, {}).item(), 1e300);
  EXPECT_EQ(Tensor::from_vector<int32_t>({-7, 8}, {2}).to_vector<int32_t>(),
            (std::vector<int32_t>{-7, 8}));
  EXPECT_EQ(Tensor::from_vector<int64_t>({int64_t{1} << 60}, {1}).to_vector<int64_t>()[0],
            int64_t{1} << 60);
  EXPECT_EQ(Tensor::from_vector<bool>({true, false, true}, {3}).to_vector<bool>(),
            (std::vector<bool>{true, false, true}));
  Tensor h = Tensor::from_vector<Half>({Half(0.5f), Half(-3.0f)}, {2});
  EXPECT_EQ(h.dtype(), DType::F16);
  EXPECT_EQ(static_cast<float>(h.to_vector<Half>()[1]), -3.0f);
  Tensor b = Tensor::from_vector<BFloat16>({BFloat16(0.25f)}, {1, 1});
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.item(), 0.25);
}

TEST(Creation, EmptyAndScalarShapes) {
  Tensor e = Tensor::from_vector<float>({}, {3, 0});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
  Tensor z = Tensor::zeros({0, 4}, DType::I32);
  EXPECT_TRUE(z.to_vector<int32_t>().empty());
  Tensor s = Tensor::full({}, 2.5);
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.item(), 2.5);
}

TEST(Creation, FullZerosOnesArange) {
  EXPECT_EQ(Tensor::full({2, 2}, -1.25, DType::F64).to_vector<double>(),
            (std::vector<double>(4, -1.25)));
  EXPECT_EQ(Tensor::zeros({3}, DType::I64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Tensor::ones({2}, DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true}));
  std::vector<int32_t> want(17);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(Tensor::arange(17, DType::I32).to_vector<int32_t>(), want);
  std::vector<float> got = Tensor::arange(5).to_vector<float>();
  EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3, 4}));
  // full with an integer dtype truncates toward zero and saturates (docs/semantics.md).
  EXPECT_EQ(Tensor::full({1}, -2.7, DType::I32).item(), -2);
  EXPECT_EQ(Tensor::full({1}, 1e20, DType::I32).item(), 2147483647);
}

// Known-answer vectors of Philox-4x32-10 from the Random123 distribution (kat_vectors).
TEST(Random, PhiloxMatchesKnownAnswers) {
  auto philox = [](std::array<uint32_t, 4> counter, uint64_t key) {
    unsigned int c[4] = {counter[0], counter[1], counter[2], counter[3]};
    math::philox4x32(c, key);
    return std::array<uint32_t, 4>{c[0], c[1], c[2], c[3]};
  };
  EXPECT_EQ(philox({0, 0, 0, 0}, 0),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffffffffffffull),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                   (uint64_t{0x299f31d0} << 32) | 0xa4093822),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Random, RandIsDeterministicUniformAndSeedDependent) {
  std::vector<float> a = Tensor::rand({64, 64}, 42).to_vector<float>();
  std::vector<float> b = Tensor::rand({64, 64}, 42).to_vector<float>();
  std::vector<float> c = Tensor::rand({64, 64}, 43).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0;
  for (float v : a) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
    mean += v;
  }
  mean /= a.size();
  EXPECT_NEAR(mean, 0.5, 0.02);
  // Element i depends only on (seed, i): a prefix of a larger tensor is the smaller tensor.
  std::vector<float> small = Tensor::rand({10}, 42).to_vector<float>();
  EXPECT_EQ(small, std::vector<float>(a.begin(), a.begin() + 10));
  // Element 0 by hand: the top 24 bits of the first Philox word of block 0.
  unsigned int block[4];
  math::philox_block(0, 42, block);
  EXPECT_EQ(a[0], static_cast<float>((block[0] >> 8) / 16777216.0));
}

TEST(Random, RandNeverReachesOneInNarrowDtypes) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (double v : testing::values(Tensor::rand({4096}, 7, dt))) {
      EXPECT_GE(v, 0.0);
      EXPECT_LT(v, 1.0);
    }
  }
}

TEST(Random, RandnHasStandardNormalMoments) {
  std::vector<double> v = Tensor::randn({200000}, 5, DType::F64).to_vector<double>();
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
  EXPECT_THROW(Tensor::randn({2}, 1, DType::I32), Error);
}

TEST(Creation, ItemWorksOnAnyOneElementTensor) {
  EXPECT_EQ(Tensor::full({1, 1, 1}, 3, DType::I64).item(), 3.0);
  EXPECT_EQ(Tensor::ones({}, DType::Bool).item(), 1.0);
  testing::expect_error([] { Tensor::zeros({2}).item(); }, {"[item]", "f32[2]"});
}

TEST(Creation, EmptyHandleThrows) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.shape(), Error);
  EXPECT_THROW(t.eval(), Error);
  EXPECT_THROW(exp(t), Error);
}

TEST(Device, DefaultIsCpuWithoutCuda) {
  EXPECT_EQ(Tensor::zeros({1}).device().type, default_device().type);
  EXPECT_EQ(device_name({DeviceType::CPU, 0}), "cpu");
  if (jit::device_usable({DeviceType::CUDA, 0}).ok()) {
    testing::DefaultDevice gpu({DeviceType::CUDA, 0});  // a GPU is there: no throw
    EXPECT_EQ(Tensor::zeros({1}).device().type, DeviceType::CUDA);
  } else {
    EXPECT_EQ(default_device().type, DeviceType::CPU);
    EXPECT_THROW(set_default_device({DeviceType::CUDA, 0}), Error);
  }
}

}  // namespace
}  // namespace kiln
