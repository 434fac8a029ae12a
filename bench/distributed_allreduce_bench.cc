// all_reduce through Kiln, timed exactly as bench/mpi_allreduce_plain.c times plain
// MPI_Allreduce, so the two print comparable lines (bench/RESULTS.md). Each call is a whole
// sync: recording, the plan (cached after the first call), the ranks' signature check (one
// small all_gather) and the MPI_Iallreduce itself, polled to completion.
//
//   mpirun -np 2 build/bench/distributed_allreduce_bench [max_bytes] [iters_scale] [min_bytes]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kiln/distributed.h"
#include "kiln/kiln.h"

namespace {

namespace dist = kiln::distributed;
using kiln::Tensor;

// Fewer calls for bigger messages, as in mpi_allreduce_plain.c.
int iterations_for(size_t bytes, double scale) {
  int iters = bytes <= (64u << 10)   ? 200
              : bytes <= (1u << 20)  ? 100
              : bytes <= (16u << 20) ? 30
                                     : 10;
  iters = static_cast<int>(iters * scale);
  return std::clamp(iters, 5, 2000);
}

// The slowest rank's value (timed with Kiln's own all_reduce, outside the timed call).
double slowest(double local) {
  return dist::all_reduce(Tensor::full({1}, local, kiln::DType::F64), dist::Reduction::kMax).item();
}

}  // namespace

int main(int argc, char** argv) {
  const dist::Group world = dist::init();
  const size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : size_t{64} << 20;
  const double scale = argc > 2 ? std::atof(argv[2]) : 1.0;
  const size_t min_bytes =
      std::max<size_t>(4, argc > 3 ? std::strtoull(argv[3], nullptr, 0) : size_t{4} << 10);
  if (world.rank() == 0) {
    std::printf(
        "# kiln::distributed::all_reduce(sum, f32), %d ranks; time = slowest rank's, "
        "median of iters\n",
        world.size());
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const auto count = static_cast<int64_t>(bytes / sizeof(float));
    // Rank r holds (i % 7) + r: small integers, so the sum is exact.
    const Tensor x = ((Tensor::arange(count) - kiln::floor(Tensor::arange(count) / 7.0) * 7.0) +
                      static_cast<double>(world.rank()))
                         .eval();
    const int iters = iterations_for(bytes, scale);
    for (int i = 0; i < std::max(3, iters / 10); ++i) dist::all_reduce(x).eval();
    std::vector<double> times;
    Tensor y;
    for (int i = 0; i < iters; ++i) {
      world.barrier();
      const auto start = std::chrono::steady_clock::now();
      y = dist::all_reduce(x).eval();
      times.push_back(
          slowest(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    }
    const std::vector<float> got = y.to_vector<float>();
    const float rank_sum = static_cast<float>(world.size() * (world.size() - 1)) / 2.0f;
    int ok = 1;
    for (int64_t i = 0; i < count; i += 1 + count / 4096) {
      ok &= got[i] == static_cast<float>(world.size() * (i % 7)) + rank_sum;
    }
    const int all_ok = static_cast<int>(
        dist::all_reduce(Tensor::full({1}, ok, kiln::DType::I32), dist::Reduction::kMin).item());
    std::sort(times.begin(), times.end());
    const double median =
        iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    const double algbw = static_cast<double>(bytes) / median / 1e9;
    const double busbw = algbw * 2.0 * (world.size() - 1) / world.size();
    if (world.rank() == 0) {
      std::printf(
          "size_bytes=%zu count=%lld ranks=%d iters=%d median_us=%.2f min_us=%.2f "
          "algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n",
          bytes, static_cast<long long>(count), world.size(), iters, median * 1e6, times[0] * 1e6,
          algbw, busbw, all_ok);
      std::fflush(stdout);
    }
  }
  return 0;
}
