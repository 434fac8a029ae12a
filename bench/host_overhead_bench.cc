// Host-side costs of the JIT: recording ops, a plan-cache hit, and planning large traces.
// Run: build/bench/host_overhead_bench (see bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/plan_cache.h"
#include "jit/fusion/trace.h"
#include "jit/graph/node.h"
#include "kiln/kiln.h"
#include "runtime/cuda/cubin_cache.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"

namespace {

using kiln::Tensor;

kiln::detail::Node* node_of(const Tensor& t) { return kiln::detail::TensorAccess::node(t).get(); }

// One tensor-tensor op per step: the cost of recording alone (nothing is evaluated).
void BM_RecordTensorOp(benchmark::State& state) {
  Tensor x = Tensor::ones({16}).eval();
  Tensor c = Tensor::full({16}, 0.5).eval();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = y * c;
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations() * 50);
  state.SetLabel("items = ops recorded");
}
BENCHMARK(BM_RecordTensorOp);

// A tensor-scalar op records a constant node and the op.
void BM_RecordScalarOp(benchmark::State& state) {
  Tensor x = Tensor::ones({16}).eval();
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = y * 0.5;
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations() * 50);
  state.SetLabel("items = ops recorded");
}
BENCHMARK(BM_RecordScalarOp);

Tensor fifty_op_program(const Tensor& x, const Tensor& c) {
  Tensor y = x;
  for (int i = 0; i < 25; ++i) y = kiln::tanh(y * c) + c;
  return y;
}

// A plan-cache hit for a 50-op trace: canonical trace, key and lookup (host time only).
void BM_PlanCacheHit50Ops(benchmark::State& state) {
  Tensor x = Tensor::ones({16}).eval();
  Tensor c = Tensor::full({16}, 0.5).eval();
  fifty_op_program(x, c).eval();  // warm the cache
  for (auto _ : state) {
    Tensor y = fifty_op_program(x, c);
    const auto start = std::chrono::steady_clock::now();
    kiln::jit::Trace trace = kiln::jit::build_trace({node_of(y)});
    auto plan = kiln::jit::find_plan(trace, kiln::default_device());
    const auto end = std::chrono::steady_clock::now();
    if (plan == nullptr) state.SkipWithError("expected a plan-cache hit");
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
}
BENCHMARK(BM_PlanCacheHit50Ops)->UseManualTime();

// Record, sync (plan hit) and run a 50-op program on 16 floats: the end-to-end host cost.
void BM_SyncSmall50OpsEndToEnd(benchmark::State& state) {
  Tensor x = Tensor::ones({16}).eval();
  Tensor c = Tensor::full({16}, 0.5).eval();
  for (auto _ : state) {
    Tensor y = fifty_op_program(x, c);
    y.eval();
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_SyncSmall50OpsEndToEnd);

// A 2-layer MLP on a small batch (4x16 -> 32 -> 4), where host time dominates: called
// eagerly (record, trace, plan-cache hit, run) and through kiln::compile (bind and run).
struct SmallMlp {
  Tensor w1 = Tensor::randn({16, 32}, 1).eval();
  Tensor b1 = Tensor::randn({32}, 2).eval();
  Tensor w2 = Tensor::randn({32, 4}, 3).eval();
  Tensor b2 = Tensor::randn({4}, 4).eval();
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    Tensor h = kiln::relu(kiln::matmul(in[0], w1) + b1);
    return {kiln::softmax(kiln::matmul(h, w2) + b2)};
  }
};

void BM_MlpCallEager(benchmark::State& state) {
  SmallMlp mlp;
  Tensor x = Tensor::randn({4, 16}, 5).eval();
  for (auto _ : state) {
    std::vector<Tensor> out = mlp({x});
    out[0].eval();
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_MlpCallEager)->Unit(benchmark::kMicrosecond);

void BM_MlpCallCompiled(benchmark::State& state) {
  SmallMlp mlp;
  kiln::Compiled forward = kiln::compile(mlp);
  Tensor x = Tensor::randn({4, 16}, 5).eval();
  forward({x});  // records once
  for (auto _ : state) {
    std::vector<Tensor> out = forward({x});
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_MlpCallCompiled)->Unit(benchmark::kMicrosecond);

// Planning time (trace canonicalization, fusion, lowering) for traces of N nodes mixing
// elementwise chains, broadcasts, reductions and views.
Tensor big_program(int64_t nodes) {
  Tensor x = Tensor::rand({8, 16}, 1).eval();
  Tensor b = Tensor::rand({16}, 2).eval();
  Tensor y = x;
  int64_t count = 0;
  while (count < nodes) {
    y = kiln::exp(y * b) - y;                                 // 3 nodes + 0 constants
    y = y / (kiln::sum(y, {1}, true) + b);                    // 4 nodes
    y = kiln::relu(y.transpose(0, 1).transpose(0, 1)) + 1.0;  // 5 nodes
    count += 12;
  }
  return y;
}

void BM_PlanTrace(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  Tensor y = big_program(nodes);
  kiln::jit::Trace trace = kiln::jit::build_trace({node_of(y)});
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    kiln::jit::Trace t = kiln::jit::build_trace({node_of(y)});
    auto plan = kiln::jit::build_plan(t);
    const auto end = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(plan);
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
  state.counters["trace_nodes"] = static_cast<double>(trace.nodes.size());
}
BENCHMARK(BM_PlanTrace)->Arg(1000)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);

// A warm disk cache: loading one compiled kernel (a real NVRTC cubin) from its file, with
// header, key and checksum verified. The bar is 1 ms.
void BM_DiskCacheWarmLoad(benchmark::State& state) {
  const std::string dir = "/tmp/kiln_bench_cubin_cache";
  const std::string source =
      "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  auto version = kiln::runtime::cuda::nvrtc_version();
  if (!version.ok()) {
    state.SkipWithError("NVRTC not available");
    return;
  }
  const std::string key = kiln::runtime::cuda::cubin_key(source, 90, *version, "--std=c++17");
  kiln::runtime::cuda::CubinCache writer(dir, int64_t{1} << 30);
  auto compiled =
      writer.get(key, [&] { return kiln::runtime::cuda::compile_to_cubin(source, "twice", 90); });
  if (!compiled.ok()) {
    state.SkipWithError("compile failed");
    return;
  }
  for (auto _ : state) {
    kiln::runtime::cuda::CubinCache fresh(dir, int64_t{1} << 30);  // nothing in memory
    auto cubin = fresh.read_file(key);
    if (!cubin) state.SkipWithError("expected a disk hit");
    benchmark::DoNotOptimize(cubin);
  }
  state.counters["cubin_bytes"] = static_cast<double>(compiled->cubin.size());
}
BENCHMARK(BM_DiskCacheWarmLoad)->Unit(benchmark::kMicrosecond);

// Cold NVRTC compile of one small generated kernel (a fused pointwise chain) for sm_90, and
// Kiln's own share: planning and rendering it.
void BM_ColdNvrtcCompile(benchmark::State& state) {
  Tensor x = Tensor::rand({1024}, 1).eval();
  Tensor y = kiln::tanh(kiln::exp(x * 0.5 + 1.0) * x - x * x) + 0.25;
  kiln::jit::Trace trace = kiln::jit::build_trace({node_of(y)});
  auto plan = kiln::jit::build_plan(trace);
  const std::string source = kiln::runtime::cuda::render_cuda(*plan->kernels[0].program);
  for (auto _ : state) {
    auto cubin = kiln::runtime::cuda::compile_to_cubin(source, plan->kernels[0].program->name, 90);
    if (!cubin.ok()) state.SkipWithError("compile failed");
    benchmark::DoNotOptimize(cubin);
  }
}
BENCHMARK(BM_ColdNvrtcCompile)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_PlanAndRenderSmallKernel(benchmark::State& state) {
  Tensor x = Tensor::rand({1024}, 1).eval();
  Tensor y = kiln::tanh(kiln::exp(x * 0.5 + 1.0) * x - x * x) + 0.25;
  for (auto _ : state) {
    kiln::jit::Trace trace = kiln::jit::build_trace({node_of(y)});
    auto plan = kiln::jit::build_plan(trace);
    benchmark::DoNotOptimize(kiln::runtime::cuda::render_cuda(*plan->kernels[0].program));
  }
}
BENCHMARK(BM_PlanAndRenderSmallKernel)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  setenv("KILN_MAX_TRACE", "1000000", 1);  // let the 10k-node trace stay pending
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
