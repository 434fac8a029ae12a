// k-means in eager style (samples/numerics.cc): points drawn around k centers, Lloyd's
// iterations from k of the points. Prints the centers found and the mean squared distance
// of the points to their centers.
//   kmeans [POINTS] [K] [ITERATIONS]      (default 200000 2-D points, k = 16, 20 iterations)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kiln/kiln.h"
#include "samples/numerics.h"

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 200000;
  const int64_t k = argc > 2 ? std::atoll(argv[2]) : 16;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 20;
  if (k < 1 || n < k || iterations < 0) {
    std::fprintf(stderr, "usage: kmeans [POINTS >= K] [K >= 1] [ITERATIONS >= 0]\n");
    return 2;
  }
  using kiln::Slice;
  using kiln::Tensor;
  kiln::Generator gen(7);
  // Each point is one of k true centers (on a 10 x 10 square) plus unit noise.
  const Tensor truth = gen.rand({k, 2}) * 10.0;
  const Tensor which = kiln::clamp(kiln::floor(gen.rand({n}) * static_cast<double>(k)), 0.0,
                                   static_cast<double>(k - 1))
                           .astype(kiln::DType::I64);
  const Tensor points = (kiln::take(truth, which, 0) + gen.randn({n, 2}) * 0.5).eval();
  const samples::KMeans result = samples::kmeans(points, points.index({Slice(0, k)}), iterations);
  const Tensor nearest = kiln::take(result.centers, result.labels, 0);
  const double mse = kiln::sum(kiln::square(points - nearest), 1).mean().item();
  std::printf("kmeans: %lld points, k = %lld, %d iterations: mean squared distance %.4f\n",
              static_cast<long long>(n), static_cast<long long>(k), iterations, mse);
  const std::vector<float> c = result.centers.to_vector<float>();
  for (int64_t i = 0; i < k && i < 4; ++i) {
    std::printf("  center %lld: (%.3f, %.3f)\n", static_cast<long long>(i), c[2 * i], c[2 * i + 1]);
  }
  return 0;
}
