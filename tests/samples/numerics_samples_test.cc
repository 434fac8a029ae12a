// The numerical samples (samples/numerics.h) against plain loops written independently,
// on fresh random inputs, every element; and each sample program run as a user runs it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "samples/numerics.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(NumericsSamples, HeatMatchesALoop) {
  std::mt19937_64 rng(testing::test_seed() + 61);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 17, m = 23;
  const int steps = 12;
  const float alpha = 0.2f;
  std::vector<float> u = testing::random_floats(n * m, rng, 0, 1);
  const Tensor got = samples::heat(Tensor::from_vector(u, {n, m}), steps, alpha);
  for (int s = 0; s < steps; ++s) {
    std::vector<float> next = u;
    for (int64_t i = 1; i < n - 1; ++i) {
      for (int64_t j = 1; j < m - 1; ++j) {
        const float c = u[i * m + j];
        const float lap = u[(i - 1) * m + j] + u[(i + 1) * m + j] + u[i * m + j - 1] +
                          u[i * m + j + 1] - 4.0f * c;
        next[i * m + j] = c + alpha * lap;
      }
    }
    u = next;
  }
  const std::vector<float> g = got.to_vector<float>();
  ASSERT_EQ(g.size(), u.size());
  for (size_t e = 0; e < u.size(); ++e) EXPECT_NEAR(g[e], u[e], 1e-5f) << "element " << e;
}

TEST(NumericsSamples, ConjugateGradientMatchesALoopAndSolves) {
  std::mt19937_64 rng(testing::test_seed() + 62);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 40;
  const int iterations = 25;
  // A = M Mᵀ / n + I.
  const std::vector<double> m = testing::random_doubles(n * n, rng);
  std::vector<double> a(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += m[i * n + k] * m[j * n + k];
      a[i * n + j] = s / n + (i == j ? 1.0 : 0.0);
    }
  }
  const std::vector<double> b = testing::random_doubles(n, rng);
  const Tensor got = samples::conjugate_gradient(Tensor::from_vector(a, {n, n}),
                                                 Tensor::from_vector(b, {n}), iterations);
  // The same iteration in plain loops.
  std::vector<double> x(n, 0.0), r = b, p = b, ap(n);
  auto dot = [&](const std::vector<double>& u, const std::vector<double>& v) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += u[i] * v[i];
    return s;
  };
  double rr = dot(r, r);
  for (int it = 0; it < iterations; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      ap[i] = 0;
      for (int64_t j = 0; j < n; ++j) ap[i] += a[i * n + j] * p[j];
    }
    const double step = rr / dot(p, ap);
    for (int64_t i = 0; i < n; ++i) {
      x[i] += step * p[i];
      r[i] -= step * ap[i];
    }
    const double next = dot(r, r);
    for (int64_t i = 0; i < n; ++i) p[i] = r[i] + next / rr * p[i];
    rr = next;
  }
  const std::vector<double> g = got.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(g[i], x[i], 1e-9 * (1 + std::abs(x[i]))) << i;
  // And it solves the system.
  for (int64_t i = 0; i < n; ++i) {
    double ax = 0;
    for (int64_t j = 0; j < n; ++j) ax += a[i * n + j] * g[j];
    EXPECT_NEAR(ax, b[i], 1e-8) << "row " << i;
  }
}

TEST(NumericsSamples, KMeansMatchesALoop) {
  std::mt19937_64 rng(testing::test_seed() + 63);
  SCOPED_TRACE(testing::test_seed());
  const int64_t k = 5, per = 60, n = k * per;
  const int iterations = 6;
  // Clusters around well-separated centers, so no point sits near a tie.
  std::vector<float> points(n * 2);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < per; ++i) {
      points[(c * per + i) * 2] = 10.0f * static_cast<float>(c) + noise(rng);
      points[(c * per + i) * 2 + 1] = 5.0f * static_cast<float>(c % 2) + noise(rng);
    }
  }
  // Start from points of the first two clusters only, so centers must travel.
  std::vector<float> centers(k * 2);
  for (int64_t c = 0; c < k; ++c) {
    const int64_t from = (c % 2) * per + c;
    centers[c * 2] = points[from * 2];
    centers[c * 2 + 1] = points[from * 2 + 1];
  }
  const samples::KMeans got = samples::kmeans(Tensor::from_vector(points, {n, 2}),
                                              Tensor::from_vector(centers, {k, 2}), iterations);
  std::vector<int64_t> labels(n);
  for (int it = 0; it <= iterations; ++it) {
    for (int64_t i = 0; i < n; ++i) {
      float best = INFINITY;
      for (int64_t c = 0; c < k; ++c) {
        const float dx = points[i * 2] - centers[c * 2],
                    dy = points[i * 2 + 1] - centers[c * 2 + 1];
        const float d = dx * dx + dy * dy;
        if (d < best) {
          best = d;
          labels[i] = c;
        }
      }
    }
    if (it == iterations) break;
    std::vector<double> sums(k * 2, 0.0);
    std::vector<int64_t> counts(k, 0);
    for (int64_t i = 0; i < n; ++i) {
      sums[labels[i] * 2] += points[i * 2];
      sums[labels[i] * 2 + 1] += points[i * 2 + 1];
      ++counts[labels[i]];
    }
    for (int64_t c = 0; c < k; ++c) {
      if (counts[c] == 0) continue;
      centers[c * 2] = static_cast<float>(sums[c * 2] / counts[c]);
      centers[c * 2 + 1] = static_cast<float>(sums[c * 2 + 1] / counts[c]);
    }
  }
  EXPECT_EQ(got.labels.to_vector<int64_t>(), labels);
  const std::vector<float> c = got.centers.to_vector<float>();
  for (int64_t e = 0; e < k * 2; ++e) EXPECT_NEAR(c[e], centers[e], 1e-4f) << "center value " << e;
}

TEST(NumericsSamples, ProgramsRunAsAUserRunsThem) {
  const std::string dir = KILN_SAMPLES_DIR;
  const testing::Result heat = testing::run(dir + "/heat 32 10");
  EXPECT_EQ(heat.exit_code, 0) << heat.output;
  EXPECT_NE(heat.output.find("heat: 32 x 32 plate, 10 steps: total heat"), std::string::npos)
      << heat.output;
  const testing::Result cg = testing::run(dir + "/conjugate_gradient 64 30");
  EXPECT_EQ(cg.exit_code, 0) << cg.output;
  EXPECT_NE(cg.output.find("|b - A x| / |b| = "), std::string::npos) << cg.output;
  // 30 iterations on a well-conditioned system of 64 reach a small residual.
  const size_t at = cg.output.rfind("= ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stod(cg.output.substr(at + 2)), 1e-8) << cg.output;
  const testing::Result km = testing::run(dir + "/kmeans 2000 4 5");
  EXPECT_EQ(km.exit_code, 0) << km.output;
  EXPECT_NE(km.output.find("kmeans: 2000 points, k = 4, 5 iterations"), std::string::npos)
      << km.output;
  const testing::Result bad = testing::run(dir + "/heat 2");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("usage: heat"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace kiln
