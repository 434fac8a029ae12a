// Collectives on CUDA tensors, on several processes (mpirun -np 2 and 3), against the host
// emulation of the driver (tests/cuda_emulation/emulated_driver.h). There is no GPU here, so
// NCCL cannot start (ncclCommInitRank fails): these tests cover the CUDA backend's
// collective path as it runs without NCCL, staged through host memory, and that NCCL's
// failure is decided alike on every rank and said in the plan dump. The emulation copies
// bytes but runs no kernels, so each plan is a collective over an uploaded input alone.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/node.h"
#include "kiln/distributed.h"
#include "kiln/kiln.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/driver.h"
#include "tests/cuda_emulation/emulated_driver.h"

namespace kiln {
namespace {

namespace dist = kiln::distributed;

// Rank r's n floats, drawn from (seed, r): every rank can compute every rank's.
std::vector<float> operand(int r, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 100 + static_cast<uint64_t>(r));
  std::uniform_int_distribution<int> u(-50, 50);  // small integers: sums are exact
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

// Runs the plan of `result` (a collective over a computed input) on emulated GPU 0 and
// returns its bytes as floats, with the backend's description of the plan.
std::vector<float> run_on_emulated_gpu(const Tensor& result, std::string* description = nullptr) {
  detail::Node* node = detail::TensorAccess::node(result).get();
  const jit::Trace trace = jit::build_trace({node});
  const std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  const jit::PlanArguments args = jit::arguments_of(trace);
  std::unique_ptr<jit::Backend> backend = runtime::cuda::make_cuda_backend(0);
  const std::vector<std::shared_ptr<base::Buffer>> out = backend->run(*plan, args);
  backend->synchronize();
  if (description != nullptr) *description = backend->describe_plan(*plan);
  // Emulated device memory is host memory at the same address.
  std::vector<float> values(static_cast<size_t>(out[0]->nbytes() / sizeof(float)));
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an emulated device address is a host one
  const auto* device = reinterpret_cast<const void*>(out[0]->device_pointer());
  std::memcpy(values.data(), device, static_cast<size_t>(out[0]->nbytes()));
  return values;
}

class CudaCollectives : public ::testing::Test {
 protected:
  dist::Group world = dist::init();
  int rank = world.rank();
  int size = world.size();
};

TEST_F(CudaCollectives, AllReduceIsStagedThroughHostMemoryWhenNcclCannotStart) {
  const int64_t n = 1000;
  std::vector<float> want(n, 0.0f);
  for (int q = 0; q < size; ++q) {
    const std::vector<float> v = operand(q, n, 1);
    for (int64_t i = 0; i < n; ++i) want[i] += v[i];
  }
  const Tensor x = Tensor::from_vector(operand(rank, n, 1), {10, 100});
  std::string description;
  EXPECT_EQ(run_on_emulated_gpu(dist::all_reduce(x), &description), want);
  EXPECT_NE(description.find("all_reduce_sum_f32): staged through host memory ("),
            std::string::npos)
      << description;
}

TEST_F(CudaCollectives, AllGatherAlongAnInnerAxisInterleavesTheRanks) {
  std::vector<float> want;
  for (int64_t row = 0; row < 3; ++row) {
    for (int q = 0; q < size; ++q) {
      const std::vector<float> v = operand(q, 12, 2);
      want.insert(want.end(), v.begin() + row * 4, v.begin() + (row + 1) * 4);
    }
  }
  const Tensor x = Tensor::from_vector(operand(rank, 12, 2), {3, 4});
  std::string description;
  EXPECT_EQ(run_on_emulated_gpu(dist::all_gather(x, 1), &description), want);
  EXPECT_NE(description.find("NCCL stacks blocks along the first axis only, not axis 1"),
            std::string::npos)
      << description;
}

TEST_F(CudaCollectives, ReduceScatterAndBroadcastGiveEachRankItsPart) {
  const int64_t block = 6;
  std::vector<float> sum(static_cast<size_t>(block * size), 0.0f);
  for (int q = 0; q < size; ++q) {
    const std::vector<float> v = operand(q, block * size, 3);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  const Tensor x = Tensor::from_vector(operand(rank, block * size, 3), {block * size});
  EXPECT_EQ(run_on_emulated_gpu(dist::reduce_scatter(x)),
            std::vector<float>(sum.begin() + rank * block, sum.begin() + (rank + 1) * block));
  const Tensor mine = Tensor::from_vector(operand(rank, 8, 4), {8});
  EXPECT_EQ(run_on_emulated_gpu(dist::broadcast(mine, size - 1)), operand(size - 1, 8, 4));
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::distributed::init();
  // Every CUDA device of this process is an emulated one; nothing else runs here.
  kiln::runtime::cuda::set_driver_api_for_testing(&kiln::testing::EmulatedDriver::get().api());
  return RUN_ALL_TESTS();
}
