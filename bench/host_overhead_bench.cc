// Host-side costs of the JIT: recording ops, a plan-cache hit, and planning large traces.
// Run: build/bench/host_overhead_bench (see bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include "jit/launch_plan.h"
#include "jit/node.h"
#include "jit/plan_cache.h"
#include "jit/trace.h"
#include "kiln/kiln.h"

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

}  // namespace

int main(int argc, char** argv) {
  setenv("KILN_MAX_TRACE", "1000000", 1);  // let the 10k-node trace stay pending
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
