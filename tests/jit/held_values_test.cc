// Values a program still holds are computed once (jit/graph/held_values.h): a sync stores
// the pending values on its way that a Tensor or a later op still references, so loops that
// read a scalar every iteration, or trip the trace cap, never recompute their history.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/debug.h"
#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

std::vector<double> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

TEST(HeldValues, AValueReadByASecondSyncIsStoredThere) {
  std::mt19937 rng(std::random_device{}());
  const std::vector<double> xs = random_values(1000, rng);
  const Tensor x = Tensor::from_vector(xs, {1000});
  const Tensor r = x * 2.0;
  const double squares = sum(r * r).item();
  EXPECT_FALSE(r.is_realized()) << "the first sync fuses r, as it does its temporaries";
  const double total = sum(r).item();
  ASSERT_TRUE(r.is_realized()) << "the second sync that reads r stores it";
  double want_squares = 0, want_total = 0;
  for (double v : xs) {
    want_squares += 4 * v * v;
    want_total += 2 * v;
  }
  EXPECT_NEAR(squares, want_squares, 1e-9 * want_squares);
  EXPECT_NEAR(total, want_total, 1e-9 * std::max(1.0, std::fabs(want_squares)));
  const std::vector<double> stored = r.to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(stored[i], 2 * xs[i]) << "at " << i;
}

TEST(HeldValues, TemporariesAndGeneratorsAreNotStored) {
  const Tensor x = Tensor::from_vector(std::vector<float>(4096, 0.5f), {4096});
  const Tensor zeros = Tensor::zeros({4096});
  reset_stats();
  // exp(x * 2) + zeros is no one's: only the sum is stored (4 bytes), and zeros is a
  // generator, computed again wherever it is read.
  const double s = sum(exp(x * 2.0) + zeros).item();
  EXPECT_NEAR(s, 4096 * std::exp(1.0), 1e-2);
  EXPECT_EQ(stats().bytes_allocated, 4);
  EXPECT_FALSE(zeros.is_realized());
}

TEST(HeldValues, AHeldViewStoresTheValueItReads) {
  std::mt19937 rng(std::random_device{}());
  const std::vector<double> xs = random_values(64, rng);
  const Tensor x = Tensor::from_vector(xs, {8, 8});
  const Tensor rows = (x * 3.0).slice(0, 2, 5);  // a view of a value no handle holds
  const double first = sum(rows).item();
  EXPECT_NE(dump_trace({rows}, DumpFormat::Text).find("mul"), std::string::npos);
  EXPECT_NEAR(sum(rows * rows).item(), sum(square(rows)).item(), 1e-12);
  EXPECT_FALSE(rows.is_realized());  // still a view, now of a stored value
  const std::string pending = dump_trace({rows}, DumpFormat::Text);
  EXPECT_EQ(pending.find("mul"), std::string::npos) << "x * 3 was stored:\n" << pending;
  double want = 0;
  for (int i = 2 * 8; i < 5 * 8; ++i) want += 3 * xs[i];
  EXPECT_NEAR(first, want, 1e-12 * 64);
  const std::vector<double> got = rows.to_vector<double>();
  for (int i = 0; i < 24; ++i) ASSERT_EQ(got[i], 3 * xs[16 + i]) << "at " << i;
}

// Conjugate gradient as it is written naturally: scalars through item(), no eval. Every
// iteration runs the same kernels, however long the loop has run; the iterates are those
// of the same algorithm written with plain loops.
TEST(HeldValues, ConjugateGradientRunsTheSameKernelsEveryIteration) {
  constexpr int n = 48, iterations = 12;
  std::mt19937 rng(std::random_device{}());
  const std::vector<double> m = random_values(n * n, rng), b = random_values(n, rng);
  std::vector<double> a(n * n);  // mᵀm / n + I: symmetric positive definite
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double d = i == j ? 1.0 : 0.0;
      for (int k = 0; k < n; ++k) d += m[k * n + i] * m[k * n + j] / n;
      a[i * n + j] = d;
    }
  }
  const Tensor A = Tensor::from_vector(a, {n, n});
  Tensor x = Tensor::zeros({n}, DType::F64);
  Tensor r = Tensor::from_vector(b, {n}) - matmul(A, x);
  Tensor p = r;
  double rr = sum(r * r).item();
  std::vector<int64_t> kernels;
  for (int it = 0; it < iterations; ++it) {
    const int64_t before = stats().kernels_launched;
    const Tensor ap = matmul(A, p);
    const double alpha = rr / sum(p * ap).item();
    // A held matmul is stored by the first sync that computes it: the next one reads it.
    EXPECT_TRUE(ap.is_realized()) << "iteration " << it;
    x = x + p * alpha;
    r = r - ap * alpha;
    const double rr_next = sum(r * r).item();
    p = r + p * (rr_next / rr);
    rr = rr_next;
    kernels.push_back(stats().kernels_launched - before);
  }
  std::printf("conjugate gradient kernels per iteration: %lld\n",
              static_cast<long long>(kernels.back()));
  for (int it = 2; it < iterations; ++it) {
    EXPECT_EQ(kernels[it], kernels[1]) << "iteration " << it;
  }
  EXPECT_LE(kernels[1], 4);

  std::vector<double> want_x(n, 0.0), want_r = b, want_p = b, ap(n);
  double want_rr = 0;
  for (double v : want_r) want_rr += v * v;
  for (int it = 0; it < iterations; ++it) {
    double pap = 0;
    for (int i = 0; i < n; ++i) {
      ap[i] = 0;
      for (int k = 0; k < n; ++k) ap[i] += a[i * n + k] * want_p[k];
      pap += want_p[i] * ap[i];
    }
    const double alpha = want_rr / pap;
    double next = 0;
    for (int i = 0; i < n; ++i) {
      want_x[i] += alpha * want_p[i];
      want_r[i] -= alpha * ap[i];
      next += want_r[i] * want_r[i];
    }
    for (int i = 0; i < n; ++i) want_p[i] = want_r[i] + next / want_rr * want_p[i];
    want_rr = next;
  }
  const std::vector<double> got = x.to_vector<double>();
  for (int i = 0; i < n; ++i) ASSERT_NEAR(got[i], want_x[i], 1e-9) << "at " << i;
}

// A 5-point stencil built from slices and concat, with no eval in the loop. Under a small
// KILN_MAX_TRACE the trace cap syncs in the middle of a step; the grid the program holds is
// stored then, so the cap never recomputes earlier steps. On its own (the default cap) the
// loop is one sync. Either way the kernels stay within three per step and every value is the
// plain loop's.
TEST(HeldValuesChild, AStencilUnderTheTraceCapNeverRecomputesHistory) {
  constexpr int n = 16, steps = 20;
  std::vector<float> grid(n * n);
  for (int i = 0; i < n * n; ++i) grid[i] = static_cast<float>((i * 37) % 17) / 17.0f;
  reset_stats();
  Tensor u = Tensor::from_vector(grid, {n, n});
  for (int s = 0; s < steps; ++s) {
    const Tensor c = u.slice(0, 1, n - 1).slice(1, 1, n - 1);
    const Tensor up = u.slice(0, 0, n - 2).slice(1, 1, n - 1);
    const Tensor down = u.slice(0, 2, n).slice(1, 1, n - 1);
    const Tensor left = u.slice(0, 1, n - 1).slice(1, 0, n - 2);
    const Tensor right = u.slice(0, 1, n - 1).slice(1, 2, n);
    const Tensor inner = c + (up + down + left + right - c * 4.0) * 0.125;
    const Tensor middle = concat(
        {u.slice(0, 1, n - 1).slice(1, 0, 1), inner, u.slice(0, 1, n - 1).slice(1, n - 1, n)}, 1);
    u = concat({u.slice(0, 0, 1), middle, u.slice(0, n - 1, n)}, 0);
  }
  const std::vector<float> got = u.to_vector<float>();
  std::printf("stencil kernels: %lld\n", static_cast<long long>(stats().kernels_launched));
  // Two concat kernels a step (40 in one sync); under KILN_MAX_TRACE=100 each cap sync also
  // copies out the slice it stopped at and ends a fused chain: 51 in all. Recomputing
  // history, as the cap once did, the same loop ran 299.
  EXPECT_LE(stats().kernels_launched, 3 * steps);
  for (int s = 0; s < steps; ++s) {
    std::vector<float> next = grid;
    for (int i = 1; i < n - 1; ++i) {
      for (int j = 1; j < n - 1; ++j) {
        const float c = grid[i * n + j];
        next[i * n + j] = c + (grid[(i - 1) * n + j] + grid[(i + 1) * n + j] + grid[i * n + j - 1] +
                               grid[i * n + j + 1] - c * 4.0f) *
                                  0.125f;
      }
    }
    grid = next;
  }
  for (int i = 0; i < n * n; ++i) ASSERT_NEAR(got[i], grid[i], 1e-5f) << "at " << i;
}

TEST(HeldValues, TheTraceCapNeverRecomputesHistory) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const testing::Result child = testing::run(absl::StrCat(
      "KILN_MAX_TRACE=100 KILN_DEVICE=cpu '", self.string(),
      "' --gtest_filter=HeldValuesChild.AStencilUnderTheTraceCapNeverRecomputesHistory"));
  EXPECT_EQ(child.exit_code, 0) << child.output;
  EXPECT_NE(child.output.find("stencil kernels: "), std::string::npos) << child.output;
}

}  // namespace
}  // namespace kiln
