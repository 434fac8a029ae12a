// kiln::explain_plan shows the plan a sync will use, computes nothing, and the sync that
// follows reuses it.
#include "kiln/kiln.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

TEST(ExplainPlan, ShowsKernelsAndReasonsWithoutComputingAndTheSyncReusesThePlan) {
  Tensor x = Tensor::rand({8, 16}, 1), w = Tensor::rand({16, 4}, 2), b = Tensor::rand({4}, 3);
  Tensor h = relu(matmul(x, w) + b);
  Tensor y = softmax(h) + sum(h, {1}, true);  // h has two consumers of different families
  const Stats before = stats();
  const std::string plan = explain_plan({y}, ExplainDetail::kPlan);
  EXPECT_FALSE(y.is_realized());
  EXPECT_EQ(stats().kernels_launched, before.kernels_launched);
  EXPECT_EQ(stats().plans_built - before.plans_built, 1);
  EXPECT_NE(plan.find("matmul"), std::string::npos) << plan;
  EXPECT_NE(plan.find("stored intermediates, and why"), std::string::npos) << plan;
  const std::string kernels = explain_plan({y}, ExplainDetail::kKernels);
  EXPECT_NE(kernels.find("(Kernel IR)"), std::string::npos);
  EXPECT_EQ(kernels.find("__global__"), std::string::npos);
  const std::string cuda = explain_plan({y}, ExplainDetail::kCuda);
  EXPECT_NE(cuda.find("extern \"C\" __global__"), std::string::npos);
  y.eval();
  EXPECT_EQ(stats().plans_built - before.plans_built, 1);  // the sync found the plan
  EXPECT_EQ(explain_plan({y}), "nothing to compute: every output is already computed\n");
  testing::expect_error([] { explain_plan({Tensor()}); }, {"[explain_plan]", "empty"});
}

}  // namespace
}  // namespace kiln
