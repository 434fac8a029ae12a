// Soak: a transformer block (samples/transformer_block.h) run many times, eagerly and
// through kiln::compile, sampling resident memory, live graph nodes and cache sizes every
// 10,000 steps. Every sampled column must stay flat: nothing may grow with the step count.
//   build-bench/bench/soak_bench [STEPS]     (default 100000 per mode)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "jit/fusion/plan_cache.h"
#include "jit/graph/node.h"
#include "samples/transformer_block.h"

namespace {

using kiln::Tensor;

int64_t resident_kib() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

template <class Step>
void soak(const char* mode, int64_t steps, Step&& step) {
  std::printf("%-8s %9s %12s %11s %11s %10s %12s\n", mode, "step", "RSS (KiB)", "live nodes",
              "plan cache", "syncs", "us/step");
  auto last = std::chrono::steady_clock::now();
  const kiln::Stats start = kiln::stats();
  for (int64_t i = 1; i <= steps; ++i) {
    step(i);
    if (i % 10000 == 0 || i == steps) {
      const auto now = std::chrono::steady_clock::now();
      const double us = std::chrono::duration<double, std::micro>(now - last).count() /
                        (i % 10000 == 0 ? 10000 : i % 10000);
      last = now;
      std::printf("%-8s %9lld %12lld %11lld %11zu %10lld %12.1f\n", mode, static_cast<long long>(i),
                  static_cast<long long>(resident_kib()),
                  static_cast<long long>(kiln::detail::Node::live_nodes().load()),
                  kiln::jit::plan_cache_size(),
                  static_cast<long long>(kiln::stats().syncs - start.syncs), us);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 100000;
  const kiln::samples::BlockWeights w = kiln::samples::random_block_weights(64, 4, 1);
  Tensor x = Tensor::randn({2, 16, 64}, 100).eval();
  // Each step feeds a block its own previous output, scaled back, so the data changes.
  soak("eager", steps, [&](int64_t) { x = (kiln::samples::transformer_block(x, w) * 0.5).eval(); });
  kiln::Compiled block = kiln::compile([&](const std::vector<Tensor>& in) {
    return std::vector{kiln::samples::transformer_block(in[0], w) * 0.5};
  });
  soak("compiled", steps, [&](int64_t) { x = block({x})[0]; });
  const float first = x.to_vector<float>()[0];
  std::printf("final x[0] = %.6f (finite: %s)\n", first, first == first ? "yes" : "NO");
  return first == first ? 0 : 1;
}
