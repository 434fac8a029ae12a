// What compiling a plan's CUDA kernels costs, measured without a GPU (NVRTC needs none): the
// kernels of one transformer block (samples/transformer_block.h) compiled for sm_90 one after
// another, all at once through compile_in_parallel, through the disk cache cold, and loaded
// from a warm disk cache. Also the renderer's own time, Kiln's part of a cold compile, and
// how compile_in_parallel scales with threads: 20 distinct kernels on 1, 2, 4 ... threads up
// to the cores this process may use.
//
//   build-bench/bench/compile_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/kiln.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/parallel_compile.h"
#include "samples/transformer_block.h"

namespace {

using kiln::runtime::cuda::CubinCache;
using kiln::runtime::cuda::KernelSource;

// The distinct kernels of one transformer block of width `width` over 16 tokens.
std::vector<KernelSource> kernels_of_block(int64_t width) {
  const auto w = kiln::samples::random_block_weights(width, 4, 1);
  kiln::Tensor y = kiln::samples::transformer_block(kiln::Tensor::rand({1, 16, width}, 2), w);
  kiln::jit::Trace trace = kiln::jit::build_trace({kiln::detail::TensorAccess::node(y).get()});
  std::vector<KernelSource> out;
  const auto plan = kiln::jit::build_plan(trace);
  for (const auto& k : plan->kernels) {
    // As the backend compiles them: the 32-bit entry point only, at these sizes.
    out.push_back({k.program->name, kiln::runtime::cuda::render_cuda(
                                        *k.program, kiln::runtime::cuda::IndexWidths::k32)});
  }
  return out;
}

const std::vector<KernelSource>& block_kernels() {
  static const std::vector<KernelSource> kernels = kernels_of_block(64);
  return kernels;
}

// 20 distinct kernels: a row sum of b(a(x) + y) for each ordered pair of five unary ops
// (sizes and scalars are launch parameters, so only the ops make two sources differ).
const std::vector<KernelSource>& twenty_kernels() {
  static const std::vector<KernelSource> kernels = [] {
    using Unary = kiln::Tensor (*)(const kiln::Tensor&);
    const Unary ops[] = {kiln::exp, kiln::tanh, kiln::sigmoid, kiln::silu, kiln::square};
    const kiln::Tensor x = kiln::Tensor::rand({64, 256}, 3), y = kiln::Tensor::rand({64, 256}, 4);
    std::vector<KernelSource> out;
    for (Unary a : ops) {
      for (Unary b : ops) {
        if (a == b) continue;
        const kiln::Tensor r = kiln::sum(b(a(x) + y), {1});
        kiln::jit::Trace trace =
            kiln::jit::build_trace({kiln::detail::TensorAccess::node(r).get()});
        const auto plan = kiln::jit::build_plan(trace);
        for (const auto& k : plan->kernels) {
          out.push_back({k.program->name, kiln::runtime::cuda::render_cuda(
                                              *k.program, kiln::runtime::cuda::IndexWidths::k32)});
        }
      }
    }
    return out;
  }();
  return kernels;
}

void Render(benchmark::State& state) {
  auto y = kiln::samples::transformer_block(kiln::Tensor::rand({1, 16, 64}, 2),
                                            kiln::samples::random_block_weights(64, 4, 1));
  kiln::jit::Trace trace = kiln::jit::build_trace({kiln::detail::TensorAccess::node(y).get()});
  auto plan = kiln::jit::build_plan(trace);
  for (auto _ : state) {
    for (const auto& k : plan->kernels) {
      benchmark::DoNotOptimize(
          kiln::runtime::cuda::render_cuda(*k.program, kiln::runtime::cuda::IndexWidths::k32));
    }
  }
  state.counters["kernels"] = static_cast<double>(plan->kernels.size());
}

void NvrtcOneAfterAnother(benchmark::State& state) {
  for (auto _ : state) {
    for (const KernelSource& k : block_kernels()) {
      benchmark::DoNotOptimize(kiln::runtime::cuda::compile_to_cubin(k.source, k.name, 90));
    }
  }
  state.counters["kernels"] = static_cast<double>(block_kernels().size());
}

void NvrtcInParallel(benchmark::State& state) {
  for (auto _ : state) {
    CubinCache memory_only("", 0);
    benchmark::DoNotOptimize(
        kiln::runtime::cuda::compile_in_parallel(memory_only, block_kernels(), 90));
  }
}

// The 20 kernels through compile_in_parallel on state.range(0) threads (0: one after
// another, without compile_in_parallel).
void TwentyKernels(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int before = kiln::num_threads();
  if (threads > 0) kiln::set_num_threads(threads);
  for (auto _ : state) {
    if (threads == 0) {
      for (const KernelSource& k : twenty_kernels()) {
        benchmark::DoNotOptimize(kiln::runtime::cuda::compile_to_cubin(k.source, k.name, 90));
      }
    } else {
      CubinCache memory_only("", 0);
      benchmark::DoNotOptimize(
          kiln::runtime::cuda::compile_in_parallel(memory_only, twenty_kernels(), 90));
    }
  }
  kiln::set_num_threads(before);
  state.counters["kernels"] = static_cast<double>(twenty_kernels().size());
}

// 0 (one after another), then 1, 2, 4 ... threads up to the cores this process may use.
void ThreadCounts(benchmark::internal::Benchmark* b) {
  b->Arg(0);
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  for (int n = 1; n < 2 * cores; n *= 2) b->Arg(std::min(n, cores));
}

std::string scratch_dir() {
  return (std::filesystem::temp_directory_path() / "kiln_compile_bench").string();
}

void InParallelThroughColdDiskCache(benchmark::State& state) {
  for (auto _ : state) {
    std::filesystem::remove_all(scratch_dir());
    CubinCache cache(scratch_dir(), int64_t{1} << 30);
    benchmark::DoNotOptimize(kiln::runtime::cuda::compile_in_parallel(cache, block_kernels(), 90));
  }
}

// Per kernel: a new process's first use of a kernel compiled by an earlier one.
void WarmDiskCacheLoadPerKernel(benchmark::State& state) {
  std::filesystem::remove_all(scratch_dir());
  {
    CubinCache cache(scratch_dir(), int64_t{1} << 30);
    kiln::runtime::cuda::compile_in_parallel(cache, block_kernels(), 90);
  }
  for (auto _ : state) {
    CubinCache fresh(scratch_dir(), int64_t{1} << 30);
    for (const auto& r : kiln::runtime::cuda::compile_in_parallel(fresh, block_kernels(), 90)) {
      if (!r.ok() || r->source != CubinCache::Source::kDisk) state.SkipWithError("not on disk");
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(block_kernels().size()));
}

BENCHMARK(Render)->Unit(benchmark::kMicrosecond);
BENCHMARK(NvrtcOneAfterAnother)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();
BENCHMARK(NvrtcInParallel)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();
BENCHMARK(InParallelThroughColdDiskCache)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();
BENCHMARK(WarmDiskCacheLoadPerKernel)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(TwentyKernels)
    ->Apply(ThreadCounts)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
