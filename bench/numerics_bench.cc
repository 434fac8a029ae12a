// The numerical samples (samples/numerics.h), as written there, against the same programs
// in Eigen (built with -march=native, OpenMP on the same cores): a 1024 x 1024 heat
// equation (50 steps a run; also in f64), conjugate gradient at n = 2048 in f64 (15 iterations),
// k-means of 200,000 2-D points with k = 16 (20 iterations). Run:
//   build/bench/numerics_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
// (bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdint>
#include <limits>

#include "kiln/kiln.h"
#include "samples/numerics.h"

namespace {

using kiln::DType;
using kiln::Tensor;

constexpr int64_t kGrid = 1024;
constexpr int kHeatSteps = 50;
constexpr int64_t kSystem = 2048;
constexpr int kCgIterations = 15;
constexpr int64_t kPoints = 200000, kCenters = 16;
constexpr int kKMeansIterations = 20;

// The heat equation in `dt` (f32 as in the sample, or f64).
void heat_kiln(benchmark::State& state, DType dt) {
  const Tensor u0 = Tensor::rand({kGrid, kGrid}, 1).astype(dt).eval();
  for (auto _ : state) samples::heat(u0, kHeatSteps, 0.2).eval();
}

template <class Scalar>
void heat_eigen(benchmark::State& state) {
  using Grid = Eigen::Array<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Grid u0 = Grid::Random(kGrid, kGrid).abs();
  Grid u(kGrid, kGrid), next(kGrid, kGrid);
  const int64_t n = kGrid - 2;
  const Scalar alpha = Scalar(0.2), four = Scalar(4);
  for (auto _ : state) {
    u = u0;
    next = u0;
    for (int s = 0; s < kHeatSteps; ++s) {
      next.block(1, 1, n, n) =
          u.block(1, 1, n, n) +
          alpha * (u.block(0, 1, n, n) + u.block(2, 1, n, n) + u.block(1, 0, n, n) +
                   u.block(1, 2, n, n) - four * u.block(1, 1, n, n));
      u.swap(next);
    }
    benchmark::DoNotOptimize(u.data());
  }
}

void BM_Heat_Kiln(benchmark::State& state) { heat_kiln(state, DType::F32); }
BENCHMARK(BM_Heat_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Heat_Eigen(benchmark::State& state) { heat_eigen<float>(state); }
BENCHMARK(BM_Heat_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HeatF64_Kiln(benchmark::State& state) { heat_kiln(state, DType::F64); }
BENCHMARK(BM_HeatF64_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HeatF64_Eigen(benchmark::State& state) { heat_eigen<double>(state); }
BENCHMARK(BM_HeatF64_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

// A = M Mᵀ / n + I, b uniform: the system of samples/conjugate_gradient.cc.
struct System {
  Eigen::MatrixXd a;
  Eigen::VectorXd b;
};
const System& system_fixture() {
  static const System s = [] {
    System r;
    const Eigen::MatrixXd m = Eigen::MatrixXd::Random(kSystem, kSystem);
    r.a = m * m.transpose() / static_cast<double>(kSystem) +
          Eigen::MatrixXd::Identity(kSystem, kSystem);
    r.b = Eigen::VectorXd::Random(kSystem);
    return r;
  }();
  return s;
}

void BM_ConjugateGradient_Kiln(benchmark::State& state) {
  const System& s = system_fixture();
  // Eigen is column-major: A is symmetric, so its buffer read row-major is A itself.
  std::vector<double> a(s.a.data(), s.a.data() + s.a.size());
  std::vector<double> b(s.b.data(), s.b.data() + s.b.size());
  const Tensor ta = Tensor::from_vector(a, {kSystem, kSystem}).eval();
  const Tensor tb = Tensor::from_vector(b, {kSystem}).eval();
  for (auto _ : state) samples::conjugate_gradient(ta, tb, kCgIterations).eval();
}
BENCHMARK(BM_ConjugateGradient_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ConjugateGradient_Eigen(benchmark::State& state) {
  const System& s = system_fixture();
  for (auto _ : state) {
    Eigen::VectorXd x = Eigen::VectorXd::Zero(kSystem), r = s.b, p = r, ap(kSystem);
    double rr = r.dot(r);
    for (int i = 0; i < kCgIterations; ++i) {
      ap.noalias() = s.a * p;
      const double step = rr / p.dot(ap);
      x += step * p;
      r -= step * ap;
      const double next = r.dot(r);
      p = r + (next / rr) * p;
      rr = next;
    }
    benchmark::DoNotOptimize(x.data());
  }
}
BENCHMARK(BM_ConjugateGradient_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_KMeans_Kiln(benchmark::State& state) {
  const Tensor points = (Tensor::rand({kPoints, 2}, 3) * 10.0).eval();
  const Tensor centers = points.index({kiln::Slice(0, kCenters)}).contiguous().eval();
  for (auto _ : state) {
    samples::KMeans r = samples::kmeans(points, centers, kKMeansIterations);
    kiln::eval({r.centers, r.labels});
  }
}
BENCHMARK(BM_KMeans_Kiln)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_KMeans_Eigen(benchmark::State& state) {
  using Points = Eigen::Array<float, Eigen::Dynamic, 2, Eigen::RowMajor>;
  const Points points = (Points::Random(kPoints, 2) + 1.0f) * 5.0f;
  Eigen::VectorXi labels(kPoints);
  for (auto _ : state) {
    Points centers = points.topRows(kCenters);
    for (int it = 0; it <= kKMeansIterations; ++it) {
      for (int64_t i = 0; i < kPoints; ++i) {
        const Eigen::Array<float, 1, 2> p = points.row(i);
        Eigen::Index best = 0;
        ((centers.rowwise() - p).square().rowwise().sum()).minCoeff(&best);
        labels[i] = static_cast<int>(best);
      }
      if (it == kKMeansIterations) break;
      Eigen::Array<double, Eigen::Dynamic, 2> sums =
          Eigen::Array<double, Eigen::Dynamic, 2>::Zero(kCenters, 2);
      Eigen::VectorXi counts = Eigen::VectorXi::Zero(kCenters);
      for (int64_t i = 0; i < kPoints; ++i) {
        sums.row(labels[i]) += points.row(i).cast<double>();
        ++counts[labels[i]];
      }
      for (int64_t c = 0; c < kCenters; ++c) {
        if (counts[c] > 0) centers.row(c) = (sums.row(c) / counts[c]).cast<float>();
      }
    }
    benchmark::DoNotOptimize(labels.data());
  }
}
BENCHMARK(BM_KMeans_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
