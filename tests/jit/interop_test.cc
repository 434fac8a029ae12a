// Interop without copies: Tensor::from_blob over a caller's memory (borrowed, or owned with a
// deleter), a write into the caller's memory through update_slice in place, and
// kiln/eigen.h in both storage orders.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/eigen.h"
#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// A borrowed buffer is read in place: no allocation for the tensor itself, values as the
// caller wrote them, and the caller's memory unchanged by what is computed from it.
TEST(FromBlob, ReadsTheCallersMemoryInPlace) {
  std::mt19937_64 rng(testing::test_seed() + 71);
  std::vector<float> data = testing::random_floats(6 * 5, rng);
  const std::vector<float> before = data;
  const Stats s0 = stats();
  const Tensor t = Tensor::from_blob(data.data(), {6, 5}, DType::F32);
  EXPECT_EQ(stats().bytes_allocated, s0.bytes_allocated) << "from_blob copies nothing";
  EXPECT_TRUE(t.is_realized());
  EXPECT_EQ(t.to_vector<float>(), data);
  const std::vector<float> doubled = (t * 2.0 + 1.0).to_vector<float>();
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(doubled[i], data[i] * 2.0f + 1.0f) << i;
  EXPECT_EQ(data, before) << "computing from a borrowed buffer never writes it";
  // Every dtype, bool as bytes.
  std::vector<int64_t> ints = {5, -7, 9};
  EXPECT_EQ(Tensor::from_blob(ints.data(), {3}, DType::I64).sum().item(), 7.0);
  bool flags[4] = {true, false, true, true};
  EXPECT_EQ(Tensor::from_blob(flags, {2, 2}, DType::Bool).sum().item(), 3.0);
}

TEST(FromBlob, BadPointersAreErrors) {
  alignas(8) unsigned char bytes[16] = {};
  testing::expect_error([&] { Tensor::from_blob(bytes + 1, {2}, DType::F32); },
                        {"[from_blob]", "not aligned to 4 bytes", "f32"});
  testing::expect_error([] { Tensor::from_blob(nullptr, {3}, DType::F64); },
                        {"[from_blob]", "null", "f64[3]"});
  EXPECT_EQ(Tensor::from_blob(nullptr, {0}, DType::F32).numel(), 0) << "an empty tensor needs none";
  testing::expect_error([&] { Tensor::from_blob(bytes, {-1}, DType::F32); }, {"[from_blob]"});
}

// With a deleter Kiln owns the memory: it is freed once, after the last tensor and the last
// pending value that reads it are gone, not before.
TEST(FromBlob, CallsTheDeleterOnceWhenTheLastReferenceGoes) {
  int deleted = 0;
  auto* owned = new std::vector<double>{1, 2, 3, 4};
  Tensor pending;
  {
    const Tensor t = Tensor::from_blob(owned->data(), {4}, DType::F64, [&, owned](void* p) {
      EXPECT_EQ(p, owned->data());
      ++deleted;
      delete owned;
    });
    pending = t * 10.0;
  }
  EXPECT_EQ(deleted, 0) << "a pending value still reads it";
  EXPECT_EQ(pending.to_vector<double>(), (std::vector<double>{10, 20, 30, 40}));
  pending = Tensor();
  EXPECT_EQ(deleted, 1);
}

// update_slice with no other handle to x writes in place: into the caller's memory when x
// is borrowed.
TEST(FromBlob, UpdateSliceInPlaceWritesTheCallersMemory) {
  std::vector<float> out(4 * 3, -1.0f);
  Tensor t = Tensor::from_blob(out.data(), {4, 3}, DType::F32);
  const Tensor rows = Tensor::arange(6).reshape({2, 3}) * 0.5;
  t = update_slice(t, rows, 0, 1);
  t.eval();
  EXPECT_EQ(out, (std::vector<float>{-1, -1, -1, 0, 0.5f, 1, 1.5f, 2, 2.5f, -1, -1, -1}));
  EXPECT_EQ(t.to_vector<float>(), out);
}

TEST(EigenInterop, BothStorageOrdersKeepEveryElementInPlace) {
  std::mt19937_64 rng(testing::test_seed() + 72);
  Eigen::MatrixXd column_major(3, 4);  // Eigen's default order
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) column_major(i, j) = std::uniform_real_distribution<>(-1, 1)(rng);
  }
  eigen::RowMajorMatrix<double> row_major = column_major;
  const Tensor copied = eigen::copy(column_major);
  const Tensor borrowed = eigen::borrow(row_major);
  ASSERT_EQ(copied.shape(), (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(borrowed.shape(), (std::vector<int64_t>{3, 4}));
  const std::vector<double> c = copied.to_vector<double>(), b = borrowed.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(c[i * 4 + j], column_major(i, j)) << i << "," << j;
      EXPECT_EQ(b[i * 4 + j], column_major(i, j)) << i << "," << j;
    }
  }
  const Stats s0 = stats();
  eigen::borrow(row_major);
  EXPECT_EQ(stats().bytes_allocated, s0.bytes_allocated) << "borrow copies nothing";
  // An expression, an array and a vector.
  const Tensor expr = eigen::copy(column_major.transpose() * 2.0);
  ASSERT_EQ(expr.shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(expr.to_vector<double>()[1 * 3 + 2], 2.0 * column_major(2, 1));
  Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(5, 0, 4);
  const Tensor tv = eigen::borrow(v);
  EXPECT_EQ(tv.shape(), std::vector<int64_t>{5});
  EXPECT_EQ(tv.sum().item(), 10.0);
  Eigen::ArrayXXf a = Eigen::ArrayXXf::Constant(2, 2, 3.0f);
  EXPECT_EQ(eigen::copy(a).sum().item(), 12.0);
  // Back out, row-major, and through a Kiln matmul that must agree with Eigen's.
  const eigen::RowMajorMatrix<double> product =
      eigen::to_matrix<double>(matmul(copied, eigen::copy(column_major.transpose())));
  const Eigen::MatrixXd want = column_major * column_major.transpose();
  ASSERT_EQ(product.rows(), 3);
  ASSERT_EQ(product.cols(), 3);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(product(i, j), want(i, j), 1e-12) << i << "," << j;
  }
  EXPECT_EQ(eigen::to_matrix<float>(tv).rows(), 5);
  testing::expect_error([&] { eigen::to_matrix<float>(copied); }, {"[to_vector]", "f64"});
  testing::expect_error(
      [&] {
        eigen::to_matrix<float>(Tensor::ones({1, 1, 1}));
      },
      {"[eigen::to_matrix]", "1-D or 2-D"});
}

}  // namespace
}  // namespace kiln
