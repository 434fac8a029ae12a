// Exception safety: faults injected in the middle of a sync (memory running out, a user's
// function or kernel failing) leave the graph, the caches and every tensor valid, and the
// next sync computes the right values.
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "kiln/custom.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::random_floats;
using testing::test_seed;

// Turns the allocation hook off however a test ends.
struct AllocationFault {
  explicit AllocationFault(int64_t after) { base::set_fail_allocation_after(after); }
  ~AllocationFault() { base::set_fail_allocation_after(-1); }
};

void expect_equal(const Tensor& want, const Tensor& got) {
  const std::vector<double> w = testing::values(want), g = testing::values(got);
  ASSERT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(testing::close(w[i], g[i], 1e-5)) << i;
}

TEST(FaultInjection, OutOfMemoryAtEveryAllocationOfASyncLeavesEverythingValid) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  Tensor x = Tensor::from_vector(random_floats(64 * 32, rng), {64, 32});
  Tensor w = Tensor::from_vector(random_floats(32 * 16, rng), {32, 16});
  const std::vector<float> x_before = x.to_vector<float>();
  int failures = 0;
  for (int64_t after = 0;; ++after) {
    // Four kernels: the matmul with its epilogue, softmax, a reduction, a pointwise tail.
    Tensor h = relu(matmul(x, w) + 1.0);
    Tensor y = softmax(h) + sum(h, {1}, true) / 16.0;
    Tensor want = testing::reference_tensor(y);
    bool failed = false;
    {
      AllocationFault fault(after);
      try {
        y.eval();
      } catch (const Error& e) {
        failed = true;
        EXPECT_NE(std::string(e.what()).find("(injected)"), std::string::npos) << e.what();
      }
    }
    if (!failed) {
      expect_equal(want, y);
      break;
    }
    ++failures;
    EXPECT_FALSE(y.is_realized());
    EXPECT_FALSE(h.is_realized());
    const Stats before = stats();
    expect_equal(want, y);  // the same graph, computed again, now without the fault
    EXPECT_EQ(stats().plans_built, before.plans_built) << "the plan cache kept the plan";
    EXPECT_EQ(x.to_vector<float>(), x_before);
  }
  // The matmul result, the softmax result and the output at least (the plan reuses freed
  // intermediates, so there are fewer allocations than kernels).
  EXPECT_GE(failures, 3);
}

std::atomic<bool> fail_custom{false};

// The C++ definitions fail, so the test holds the tensors on the CPU, where they run.
TEST(FaultInjection, AFailingCustomFunctionOrKernelFailsTheSyncAndNothingElse) {
  testing::DefaultDevice cpu({DeviceType::CPU, 0});
  ElementwiseFunction f;
  f.name = "fault_fragile";
  f.cuda = "__device__ float fault_fragile(float x) { return x + 1.0f; }";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    if (fail_custom) throw std::runtime_error("the sensor is offline");
    for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] + 1;
  };
  CustomElementwise fragile = define_elementwise(f);
  KernelFunction k;
  k.name = "fault_fragile_kernel";
  k.cuda = R"(extern "C" __global__ void fault_fragile_kernel(KilnKernelArgs a) {})";
  k.infer = [](const std::vector<TensorType>& in) { return in[0]; };
  k.launch = [](const std::vector<TensorType>&, const TensorType&) { return LaunchDims{}; };
  k.cpu = [](const std::vector<const void*>& in, const std::vector<TensorType>& types, void* out,
             const TensorType&) {
    if (fail_custom) throw Error("bad kernel state");
    std::memcpy(out, in[0], testing::count(types[0].shape) * sizeof(float));
  };
  CustomKernel fragile_kernel = define_kernel(k);

  // Large enough that the worker threads run chunks too: their exceptions must come back.
  Tensor x = Tensor::arange(1 << 20).eval();
  Tensor a = fragile({x * 2.0});
  Tensor b = fragile_kernel({x}) - 1.0;
  Tensor fine = x * 3.0;
  fail_custom = true;
  testing::expect_error([&] { a.eval(); },
                        {"[custom fault_fragile]", "C++ definition failed", "sensor is offline"});
  testing::expect_error([&] { b.eval(); },
                        {"[custom_kernel fault_fragile_kernel]", "fallback failed", "bad kernel"});
  EXPECT_FALSE(a.is_realized());
  EXPECT_FALSE(b.is_realized());
  EXPECT_EQ(fine.to_vector<float>()[5], 15.0f);  // an unrelated sync still works
  fail_custom = false;
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  for (int64_t i = 0; i < (1 << 20); i += 4099) {
    EXPECT_EQ(av[i], 2.0f * i + 1) << i;
    EXPECT_EQ(bv[i], static_cast<float>(i) - 1) << i;
  }
}

TEST(FaultInjection, AFailedCompiledCallLeavesTheRecordingUsable) {
  Compiled fn = compile([](const std::vector<Tensor>& in) {
    return std::vector{softmax(in[0] * 2.0), sum(in[0], {0})};
  });
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  std::vector<Tensor> first = fn({x});  // records
  // On the CPU the first two allocations of a call fail it. On a GPU, an allocation that
  // fails while a CUDA graph is captured is survived (the call replays kernel by kernel),
  // so some of these calls succeed; the others must fail cleanly.
  std::vector<int64_t> failed;
  for (int64_t after = 0; after < 6; ++after) {
    AllocationFault fault(after);
    try {
      fn({x});
    } catch (const Error& e) {
      failed.push_back(after);
      EXPECT_NE(std::string(e.what()).find("(injected)"), std::string::npos) << e.what();
    }
  }
  if (default_device().type == DeviceType::CPU) {
    ASSERT_GE(failed.size(), 2u);
    EXPECT_EQ(failed[0], 0);
    EXPECT_EQ(failed[1], 1);
  } else {
    EXPECT_FALSE(failed.empty());
  }
  std::vector<Tensor> again = fn({x});  // replays
  expect_equal(first[0], again[0]);
  expect_equal(first[1], again[1]);
  EXPECT_EQ(fn.num_signatures(), 1u);
}

}  // namespace
}  // namespace kiln
