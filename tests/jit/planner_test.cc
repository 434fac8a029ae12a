// Kernel counts, the plan cache and scalar parameters, checked through kiln::stats() with no
// device needed (as tinygrad's test/null does). Values are checked against the reference.
#include "jit/fusion/planner.h"

#include <cmath>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/plan_cache.h"
#include "jit/fusion/trace.h"
#include "kiln/nn.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

std::vector<double> reference(const Tensor& t) {
  return testing::values(testing::reference_tensor(t));
}

// Counts the kernels one sync of `outputs` launches, and checks each output against the
// reference evaluator.
int64_t kernels_for(const std::vector<Tensor>& outputs) {
  std::vector<std::vector<double>> want;
  for (const Tensor& t : outputs) want.push_back(reference(t));
  reset_stats();
  eval(outputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<double> got = testing::values(outputs[i]);
    EXPECT_EQ(got.size(), want[i].size());
    for (size_t k = 0; k < got.size() && k < want[i].size(); ++k) {
      EXPECT_TRUE(testing::close(want[i][k], got[k], 1e-5, true)) << "output " << i << " at " << k;
    }
  }
  return stats().kernels_launched;
}

Tensor input(std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return Tensor::from_vector(testing::random_floats(testing::count(shape), rng), shape);
}

TEST(KernelCount, ElementwiseChainWithBroadcastsIsOneKernel) {
  Tensor x = input({4, 5}, 1), b = input({5}, 2), c = input({4, 1}, 3);
  EXPECT_EQ(kernels_for({relu((x + b) * 2.0 - exp(x) / (abs(c) + 1.0)) + sigmoid(b)}), 1);
}

TEST(KernelCount, ViewsAreIndexMathNotCopies) {
  Tensor x = input({6, 8}, 4);
  Tensor v = x.transpose(0, 1).slice(0, 1, 8, 2).unsqueeze(0).broadcast_to({3, 4, 6});
  EXPECT_EQ(kernels_for({exp(v) + x.slice(0, 0, 6).reshape({4, 12}).slice(1, 0, 6)}), 1);
  EXPECT_EQ(kernels_for({Tensor::arange(24).reshape({2, 3, 4}).permute({2, 0, 1}) * 2.0}), 1);
}

TEST(KernelCount, ReductionWithFusedProducerIsOneKernel) {
  Tensor x = input({8, 16}, 5);
  EXPECT_EQ(kernels_for({sum(exp(x - 1.0) * 2.0, {1})}), 1);
  EXPECT_EQ(kernels_for({sum(exp(x - 1.0) * 2.0, {0})}), 1);       // outer axis
  EXPECT_EQ(kernels_for({mean(square(x))}), 1);                    // full reduction
  EXPECT_EQ(kernels_for({sqrt(sum(x * x, {1}, true)) + 1.0}), 1);  // fused epilogue
  EXPECT_EQ(kernels_for({argmax(x * -1.0, 1)}), 1);
}

TEST(KernelCount, RowNormsAreOneKernelEach) {
  Tensor x = input({8, 32}, 6), w = input({32}, 7), b = input({32}, 8);
  EXPECT_EQ(kernels_for({softmax(x)}), 1);
  EXPECT_EQ(kernels_for({log_softmax(x)}), 1);
  EXPECT_EQ(kernels_for({layer_norm(x, w, b)}), 1);
  EXPECT_EQ(kernels_for({rms_norm(x, w)}), 1);
  EXPECT_EQ(kernels_for({softmax(x * 0.125 + 1.0) * 3.0}), 1);  // prologue and epilogue fused
}

// The row ops share an op class, but each device runs the norms, the scan and the selection
// as different kernels, so each has an anchor kind (and a name in dumps) of its own.
TEST(AnchorKinds, RowNormsScansAndTopkAreKindsOfTheirOwn) {
  for (ops::OpKind op : {ops::OpKind::Softmax, ops::OpKind::LogSoftmax, ops::OpKind::LayerNorm,
                         ops::OpKind::RmsNorm}) {
    EXPECT_EQ(jit::anchor_kind(op), jit::AnchorKind::kRowNorm) << ops::op_name(op);
  }
  EXPECT_EQ(jit::anchor_kind(ops::OpKind::Cumsum), jit::AnchorKind::kScan);
  EXPECT_EQ(jit::anchor_kind(ops::OpKind::TopkIndices), jit::AnchorKind::kTopk);
  EXPECT_STREQ(jit::anchor_name(jit::AnchorKind::kRowNorm), "rownorm");
  EXPECT_STREQ(jit::anchor_name(jit::AnchorKind::kScan), "scan");
  EXPECT_STREQ(jit::anchor_name(jit::AnchorKind::kTopk), "topk");
}

TEST(KernelCount, ScansAndTopkIndicesAreOneKernelEach) {
  Tensor x = input({8, 32}, 6);
  EXPECT_EQ(kernels_for({cumsum(exp(x) * 2.0, 1) - 1.0}), 1);  // prologue and epilogue fused
  EXPECT_EQ(kernels_for({cumsum(x, 0, /*exclusive=*/true, /*reverse=*/true)}), 1);
  EXPECT_EQ(kernels_for({topk(x * 2.0, 3, 1).indices}), 1);
}

TEST(KernelCount, MatmulEpilogueIsOneKernel) {
  Tensor x = input({16, 32}, 9), w = input({32, 8}, 10), b = input({8}, 11);
  EXPECT_EQ(kernels_for({relu(matmul(x, w) + b)}), 1);
  Tensor r = input({16, 8}, 12);
  EXPECT_EQ(kernels_for({(gelu(matmul(x, w) + b) + r).astype(DType::BF16)}), 1);
  EXPECT_EQ(kernels_for({linear(x, w.transpose(0, 1), b)}), 1);
}

TEST(KernelCount, SeveralOutputsOverOneSpaceShareAKernel) {
  Tensor x = input({4, 4}, 13);
  EXPECT_EQ(kernels_for({exp(x), x * 2.0, tanh(x) + 1.0}), 1);
}

TEST(KernelCount, BroadcastOfAReductionNeedsASecondKernel) {
  Tensor x = input({4, 6}, 14);
  Tensor centered = x - mean(x, {1}, true);
  Tensor again = x - mean(x, {1}, true);
  // The plan dump says which node was stored and why.
  std::string plan =
      jit::build_plan(jit::build_trace({detail::TensorAccess::node(again).get()}))->description;
  EXPECT_NE(plan.find("(mean): it is broadcast to a larger iteration space"), std::string::npos)
      << plan;
  EXPECT_NE(plan.find("kernel 1: pointwise_sub"), std::string::npos) << plan;
  EXPECT_EQ(kernels_for({centered}), 2);
}

TEST(PlanCache, SecondSyncBuildsNoPlanAndCompilesNothing) {
  auto program = [](const Tensor& x) { return sum(softmax(x * 3.0) + 1.0, {1}); };
  program(input({4, 8}, 15)).eval();
  reset_stats();
  Tensor y = program(input({4, 8}, 16));
  y.eval();
  EXPECT_EQ(stats().plans_built, 0);
  EXPECT_EQ(stats().plan_cache_hits, 1);
  EXPECT_EQ(stats().kernels_compiled, 0);
  EXPECT_EQ(stats().kernel_cache_hits, 0);  // a plan hit skips lowering entirely
}

TEST(PlanCache, NewBatchSizeBuildsAPlanButCompilesNoKernel) {
  auto program = [](const Tensor& x, const Tensor& w) { return relu(matmul(x, w) + 1.0); };
  Tensor w = input({8, 4}, 17);
  program(input({2, 8}, 18), w).eval();
  reset_stats();
  Tensor y = program(input({7, 8}, 19), w);
  std::vector<double> want = reference(y);
  y.eval();
  EXPECT_EQ(stats().plans_built, 1);
  EXPECT_EQ(stats().kernels_compiled, 0);
  EXPECT_EQ(stats().kernel_cache_hits, 1);
  std::vector<double> got = testing::values(y);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(testing::close(want[i], got[i], 1e-5));
}

TEST(PlanCache, ChangingScalarsNeverRecompiles) {
  Tensor x = input({16}, 20);
  std::vector<float> base = x.to_vector<float>();
  x.eval();
  reset_stats();
  for (int step = 0; step < 20; ++step) {
    Tensor y = x * static_cast<double>(step) + 0.5 * step;
    std::vector<float> got = y.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_FLOAT_EQ(got[i], base[i] * static_cast<float>(step) + 0.5f * static_cast<float>(step));
    }
  }
  EXPECT_EQ(stats().plans_built, 1);
  EXPECT_EQ(stats().plan_cache_hits, 19);
  EXPECT_LE(stats().kernels_compiled, 1);
  // Seeds and epsilons are parameters too.
  reset_stats();
  for (uint64_t seed = 0; seed < 5; ++seed) {
    Tensor r = Tensor::rand({8}, seed);
    std::vector<double> want = reference(r);
    EXPECT_EQ(testing::values(r), want);
    layer_norm(input({2, 4}, seed), Tensor::ones({4}), Tensor::zeros({4}), 1e-5 * (seed + 1))
        .eval();
  }
  EXPECT_EQ(stats().plans_built, 2);
}

TEST(PlanCache, IsBoundedAndEvictsLeastRecentlyUsed) {
  for (int64_t n = 1; n <= static_cast<int64_t>(jit::plan_cache_capacity()) + 20; ++n) {
    (Tensor::ones({n}) + 1.0).eval();
  }
  EXPECT_LE(jit::plan_cache_size(), jit::plan_cache_capacity());
}

TEST(Planner, CommonSubexpressionsAreComputedOnce) {
  Tensor x = input({4, 4}, 21);
  Tensor a = exp(x) * 2.0;
  Tensor b = exp(x) * 2.0;  // recorded twice, merged by the trace
  reset_stats();
  eval({a + b});
  EXPECT_EQ(stats().kernels_launched, 1);
  std::vector<float> got = (a + b).to_vector<float>();
  std::vector<float> xv = x.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], 4.0f * std::exp(xv[i]));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Every kernel of the plan behind `t` within the bounds, and how many kernels there are.
size_t expect_bounded_kernels(const Tensor& t) {
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  for (const jit::PlannedKernel& k : plan->kernels) {
    EXPECT_LE(k.launch.inputs.size() + k.launch.params.size(),
              static_cast<size_t>(jit::kMaxKernelSources))
        << k.program->name;
    EXPECT_LE(k.program->instrs.size(), static_cast<size_t>(4 * jit::kMaxFusedOps))
        << k.program->name;
  }
  return plan->kernels.size();
}

TEST(KernelBounds, ManyInputsSplitIntoBoundedKernelsAndStayRight) {
  std::vector<Tensor> parts;
  Tensor total = Tensor::full({3}, 0, DType::I64);
  int64_t want = 0;
  for (int64_t i = 0; i < 300; ++i) {
    parts.push_back(Tensor::full({3}, static_cast<double>(i), DType::I64).eval());
    total = total + parts.back();
    want += i;
  }
  EXPECT_GE(expect_bounded_kernels(total), 300u / jit::kMaxKernelSources);
  EXPECT_EQ(total.to_vector<int64_t>(), (std::vector<int64_t>{want, want, want}));

  Tensor joined = concat(parts, 0);
  expect_bounded_kernels(joined);
  const std::vector<int64_t> j = joined.to_vector<int64_t>();
  ASSERT_EQ(j.size(), 900u);
  for (int64_t i = 0; i < 900; ++i) EXPECT_EQ(j[i], i / 3) << i;
  parts[157] = Tensor::zeros({3, 1}, DType::I64);
  testing::expect_error([&] { concat(parts, 0); }, {"[concat]", "tensors[157]"});
}

TEST(KernelBounds, LongChainsSplitIntoBoundedKernelsAndMatchTheReference) {
  Tensor x = Tensor::rand({4, 5}, 9).eval();
  Tensor y = x;
  // About 3,000 nodes: under KILN_MAX_TRACE, so the whole chain is one trace.
  for (int i = 0; i < 1000; ++i) y = (i % 2 == 0) ? y * 0.999 + 0.001 : tanh(y) + x;
  EXPECT_FALSE(y.is_realized());
  EXPECT_GE(expect_bounded_kernels(y), 1000u * 2 / jit::kMaxFusedOps);
  Tensor want = testing::reference_tensor(y);
  const std::vector<double> w = testing::values(want), g = testing::values(y);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(testing::close(w[i], g[i], 1e-4)) << i;
}

TEST(KernelBounds, ManyOutputsOfOneShapeSpreadOverBoundedKernels) {
  std::vector<Tensor> outs;
  for (int i = 0; i < 200; ++i) outs.push_back(Tensor::full({8}, i).eval() * 2.0);
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : outs) nodes.push_back(detail::TensorAccess::node(t).get());
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(jit::build_trace(nodes));
  EXPECT_GE(plan->kernels.size(), 200u / jit::kMaxKernelSources);
  for (const jit::PlannedKernel& k : plan->kernels) {
    EXPECT_LE(k.launch.inputs.size() + k.launch.params.size(),
              static_cast<size_t>(jit::kMaxKernelSources));
  }
  eval(outs);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(outs[i].to_vector<float>()[7], 2.0f * i);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// One encoder layer as sentence-transformers' MiniLM has it: attention, then a GELU MLP,
// each with a residual add and a layer norm. x is [batch, seq, hidden].
Tensor encoder_layer(const Tensor& x, int64_t heads, uint64_t seed) {
  const int64_t batch = x.shape()[0], seq = x.shape()[1], hidden = x.shape()[2];
  auto weight = [&](std::vector<int64_t> shape) { return input(std::move(shape), seed++) * 0.1; };
  auto split_heads = [&](const Tensor& t) {
    return t.reshape({batch, seq, heads, hidden / heads}).permute({0, 2, 1, 3});
  };
  Tensor q = split_heads(linear(x, weight({hidden, hidden}), weight({hidden})));
  Tensor k = split_heads(linear(x, weight({hidden, hidden}), weight({hidden})));
  Tensor v = split_heads(linear(x, weight({hidden, hidden}), weight({hidden})));
  Tensor mask = input({batch, 1, 1, seq}, seed++);
  Tensor context = scaled_dot_product_attention(q, k, v, mask)
                       .permute({0, 2, 1, 3})
                       .reshape({batch, seq, hidden});
  Tensor h = layer_norm(x + linear(context, weight({hidden, hidden}), weight({hidden})),
                        weight({hidden}), weight({hidden}));
  Tensor up = gelu(linear(h, weight({4 * hidden, hidden}), weight({4 * hidden})));
  return layer_norm(h + linear(up, weight({hidden, 4 * hidden}), weight({hidden})),
                    weight({hidden}), weight({hidden}));
}

// Identical layers get identical kernels: the planner's kernel-size bounds count what one
// kernel really reads, not everything upstream of it, so no layer stores a value another
// layer fuses. Every residual add fuses into the matmul before it or the norm after it
// (no kernel of its own).
TEST(Planner, IdenticalLayersGetIdenticalPlans) {
  constexpr int kLayers = 6;
  Tensor x = input({2, 8, 32}, 100);
  for (int layer = 0; layer < kLayers; ++layer) x = encoder_layer(x, 4, 1000 * (layer + 1));
  std::shared_ptr<const jit::LaunchPlan> plan =
      jit::build_plan(jit::build_trace({detail::TensorAccess::node(x).get()}));
  ASSERT_EQ(plan->kernels.size() % kLayers, 0u) << plan->description;
  const size_t per_layer = plan->kernels.size() / kLayers;
  int copies = 0;
  for (size_t i = 0; i < plan->kernels.size(); ++i) {
    const std::string& name = plan->kernels[i].program->name;
    EXPECT_EQ(name, plan->kernels[i % per_layer].program->name)
        << "kernel " << i % per_layer << " of layer " << i / per_layer;
    copies += name == "pointwise_copy";
  }
  // Per layer: q, k and v, attention, the copy that merges its heads (a permute then a
  // reshape no strides express), the output projection with its residual add, its norm,
  // the MLP's two matmuls (the second with its residual add), and the second norm.
  EXPECT_EQ(per_layer, 10u) << plan->description;
  EXPECT_EQ(copies, kLayers) << plan->description;
  EXPECT_EQ(kernels_for({x}), static_cast<int64_t>(plan->kernels.size()));
}

}  // namespace
}  // namespace kiln
