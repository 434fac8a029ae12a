// Compiled arg-reductions (runtime/cpu/compiled_arg_reduce.h): k-means' nearest center as one
// compiled loop gives the positions an independent loop and the tile evaluator give, over
// fresh random points with NaNs, infinities and tied centers among them, on a row count that
// leaves a tail; forms it does not compile stay on the evaluator.
#include "runtime/cpu/compiled_arg_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "runtime/cpu/host_compiler.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace cpu = runtime::cpu;

bool compiler_available() {
  return cpu::host_compiler_enabled() && default_device().type == DeviceType::CPU;
}

// Points [n, 2] with NaNs and infinities among their coordinates.
std::vector<float> points_with_specials(int64_t n, std::mt19937_64& rng) {
  std::vector<float> p = testing::random_floats(static_cast<size_t>(n * 2), rng, -10, 10);
  std::uniform_int_distribution<size_t> at(0, p.size() - 1);
  for (int r = 0; r < 12; ++r) {
    p[at(rng)] = std::numeric_limits<float>::quiet_NaN();
    p[at(rng)] = std::numeric_limits<float>::infinity();
    p[at(rng)] = -std::numeric_limits<float>::infinity();
  }
  return p;
}

// The position of each point's nearest center, written out: squared distances in f32 in the
// kernel's order, the first NaN, else the first smallest.
std::vector<int64_t> nearest_by_loop(const std::vector<float>& p, const std::vector<float>& c) {
  const size_t n = p.size() / 2, k = c.size() / 2;
  std::vector<int64_t> nearest(n);
  for (size_t i = 0; i < n; ++i) {
    float best = 0;
    for (size_t j = 0; j < k; ++j) {
      const float dx = p[2 * i] - c[2 * j], dy = p[2 * i + 1] - c[2 * j + 1];
      const float d2 = dx * dx + dy * dy;
      const bool take = j == 0 || (!std::isnan(best) && (std::isnan(d2) || d2 < best));
      if (take) {
        best = d2;
        nearest[i] = static_cast<int64_t>(j);
      }
    }
  }
  return nearest;
}

Tensor nearest(const Tensor& points, const Tensor& centers) {
  return argmin(sum(square(points.unsqueeze(1) - centers.unsqueeze(0)), 2), 1);
}

TEST(CompiledArgReduce, NearestCentersMatchALoopAndTheEvaluator) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 1003, k = 13;
  const std::vector<float> p = points_with_specials(n, rng);
  std::vector<float> c = testing::random_floats(k * 2, rng, -10, 10);
  c[10] = c[4];  // centers 2 and 5 tie for every point: 2 wins
  c[11] = c[5];
  const Tensor points = Tensor::from_vector(p, {n, 2}), centers = Tensor::from_vector(c, {k, 2});

  cpu::set_compiled_pointwise_min_elements(std::numeric_limits<int64_t>::max());
  const std::vector<int64_t> evaluated = nearest(points, centers).to_vector<int64_t>();
  cpu::set_compiled_pointwise_min_elements(0);
  cpu::set_host_compile_mode(cpu::HostCompileMode::kWait);  // the loop from its first launch
  const int64_t runs = cpu::compiled_pointwise_runs();
  const std::vector<int64_t> compiled = nearest(points, centers).to_vector<int64_t>();
  // With an epilogue: the positions as floats, plus one.
  const std::vector<float> shifted =
      (nearest(points, centers).astype(DType::F32) + 1.0).to_vector<float>();
  // A NaN center is every finite point's answer (the first NaN wins), wherever it stands.
  std::vector<float> c_nan = c;
  c_nan[2 * 8 + 1] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<int64_t> compiled_nan =
      nearest(points, Tensor::from_vector(c_nan, {k, 2})).to_vector<int64_t>();
  const int64_t compiled_runs = cpu::compiled_pointwise_runs() - runs;
  cpu::set_compiled_pointwise_min_elements(-1);
  cpu::set_host_compile_mode(std::nullopt);

  EXPECT_EQ(compiled_runs, 3);
  const std::vector<int64_t> want = nearest_by_loop(p, c);
  const std::vector<int64_t> want_nan = nearest_by_loop(p, c_nan);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(compiled[i], want[i])
        << "point " << i << " (" << p[2 * i] << ", " << p[2 * i + 1] << ")";
    ASSERT_EQ(evaluated[i], want[i]) << "point " << i;
    ASSERT_EQ(shifted[i], static_cast<float>(want[i] + 1)) << "point " << i;
    ASSERT_NE(compiled[i], 5) << "a tie goes to the first center";
    ASSERT_EQ(compiled_nan[i], want_nan[i]) << "point " << i << " with a NaN center";
  }
  EXPECT_EQ(std::count(want_nan.begin(), want_nan.end(), 8),
            n - std::count(want_nan.begin(), want_nan.end(), 0))
      << "every point whose distances are numbers names the NaN center";
}

// argmax along k of a scaled expression (a parameter), with keepdims.
TEST(CompiledArgReduce, ArgmaxWithAParameterMatchesALoop) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed() + 1);
  const int64_t n = 517, k = 9;
  const std::vector<float> a = testing::random_floats(static_cast<size_t>(n), rng, -3, 3);
  const std::vector<float> b = testing::random_floats(static_cast<size_t>(k), rng, -3, 3);
  const Tensor column = Tensor::from_vector(a, {n, 1}), row = Tensor::from_vector(b, {1, k});
  auto largest = [&] { return argmax(exp(column * row * 0.75), 1, /*keepdims=*/true); };
  cpu::set_compiled_pointwise_min_elements(std::numeric_limits<int64_t>::max());
  const std::vector<int64_t> evaluated = largest().to_vector<int64_t>();
  cpu::set_compiled_pointwise_min_elements(0);
  cpu::set_host_compile_mode(cpu::HostCompileMode::kWait);  // the loop from its first launch
  const int64_t runs = cpu::compiled_pointwise_runs();
  const Tensor got_tensor = largest();
  const std::vector<int64_t> got = got_tensor.to_vector<int64_t>();
  EXPECT_EQ(cpu::compiled_pointwise_runs() - runs, 1);
  cpu::set_compiled_pointwise_min_elements(-1);
  cpu::set_host_compile_mode(std::nullopt);
  EXPECT_EQ(got_tensor.shape(), (std::vector<int64_t>{n, 1}));
  EXPECT_EQ(got, evaluated);  // the same values, the same first largest
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) {
      // exp is increasing, so the largest product wins; products that round alike tie.
      if (a[i] * b[j] * 0.75f > a[i] * b[best] * 0.75f) best = j;
    }
    const float got_product = a[i] * b[got[i]] * 0.75f, want_product = a[i] * b[best] * 0.75f;
    ASSERT_NEAR(got_product, want_product, 1e-5f * std::fabs(want_product)) << "row " << i;
  }
}

// A matrix read along both dims, and a reduction along dim 0, are not this generator's: the
// evaluator runs them, with the right positions.
TEST(CompiledArgReduce, OtherFormsStayOnTheEvaluator) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  const int64_t rows = 300, cols = 40;
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(rows * cols), rng);
  const Tensor t = Tensor::from_vector(x, {rows, cols});
  cpu::set_compiled_pointwise_min_elements(0);
  cpu::set_host_compile_mode(cpu::HostCompileMode::kWait);  // the loop from its first launch
  const int64_t runs = cpu::compiled_pointwise_runs();
  const std::vector<int64_t> along_rows = argmin(t * 2.0, 1).to_vector<int64_t>();
  const std::vector<int64_t> along_columns = argmax(t, 0).to_vector<int64_t>();
  EXPECT_EQ(cpu::compiled_pointwise_runs(), runs);
  cpu::set_compiled_pointwise_min_elements(-1);
  cpu::set_host_compile_mode(std::nullopt);
  for (int64_t i = 0; i < rows; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < cols; ++j) {
      if (x[i * cols + j] < x[i * cols + best]) best = j;
    }
    ASSERT_EQ(along_rows[i], best) << "row " << i;
  }
  for (int64_t j = 0; j < cols; ++j) {
    int64_t best = 0;
    for (int64_t i = 1; i < rows; ++i) {
      if (x[i * cols + j] > x[best * cols + j]) best = i;
    }
    ASSERT_EQ(along_columns[j], best) << "column " << j;
  }
}

}  // namespace
}  // namespace kiln
