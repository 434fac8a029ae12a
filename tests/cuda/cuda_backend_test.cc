// The CUDA backend itself (runtime/cuda/cuda_backend.cc, with the device, plan launcher and
// graph replay it runs on) on machines with no GPU, run against the host emulation of the
// driver (tests/cuda_emulation/emulated_driver.h). NVRTC compiles each kernel as on a GPU
// machine. No kernel runs, but the emulation checks every driver call as the driver would,
// so the tests cover what the backend asks of the driver: launch limits, current contexts,
// locking across GPUs, graph capture and update, and failed calls. A test that changes a GPU
// has it to itself, since a device the backend makes lasts for the process.
#include "runtime/cuda/cuda_backend.h"

#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/nn.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/cuda_emulation/emulated_driver.h"
#include "tests/quantized_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using base::Buffer;
using jit::Backend;
using runtime::cuda::make_cuda_backend;

// The emulated GPUs each test uses (EmulatedDriver::kGpus in all).
constexpr int kHopper = 0;          // row norms, graphs
constexpr int kAmpere = 1;          // row norms with less shared memory
constexpr int kFreeing = 2;         // buffers dropped on other threads
constexpr int kFirst = 3;           // two GPUs exchanging tensors,
constexpr int kSecond = 4;          // ... and the other one
constexpr int kBadAttribute = 5;    // never made: its attributes fail
constexpr int kEmulationCheck = 6;  // the emulation itself, without the backend
constexpr int kSyncing = 7;         // made with KILN_CUDA_SYNC=1; a kernel faults

// The plan a sync of `results` runs, with its arguments (realized inputs in host memory).
struct Planned {
  std::shared_ptr<const jit::LaunchPlan> plan;
  jit::PlanArguments args;
};

Planned plan_of(const std::vector<Tensor>& results) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : results) nodes.push_back(detail::TensorAccess::node(t).get());
  const jit::Trace trace = jit::build_trace(nodes);
  return {jit::build_plan(trace), jit::arguments_of(trace)};
}

class CudaBackendOnEmulatedDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    // Settled first, by the process's own driver: tensors made here stay on the CPU, and
    // nothing outside these tests ever sees an emulated GPU.
    if (default_device().type != DeviceType::CPU) {
      GTEST_SKIP() << "a real GPU runs the backend itself (scripts/gpu-check.sh)";
    }
    ASSERT_TRUE(runtime::cuda::nvrtc_available().ok())
        << runtime::cuda::nvrtc_available().message()
        << " (the backend compiles every kernel with NVRTC before the driver loads it)";
    driver_.reset();
    runtime::cuda::set_driver_api_for_testing(&driver_.api());
  }

  void TearDown() override {
    runtime::cuda::set_driver_api_for_testing(nullptr);
    driver_.reset();
  }

  // The dynamic shared memory of the launch of each row norm of `p` since launch `from`.
  std::vector<unsigned> row_norm_shared_bytes(const Planned& p, size_t from) const {
    const std::vector<testing::EmulatedLaunch> launches = driver_.launches();
    std::vector<unsigned> shared;
    for (const jit::PlannedKernel& k : p.plan->kernels) {
      if (k.program->anchor != jit::AnchorKind::kRowNorm) continue;
      const std::string entry = runtime::cuda::entry_name(*k.program, /*wide=*/false);
      for (size_t i = from; i < launches.size(); ++i) {
        if (launches[i].function == entry) shared.push_back(launches[i].shared_bytes);
      }
    }
    return shared;
  }

  void expect_no_failed_calls() const {
    const std::vector<std::string> failures = driver_.failures();
    EXPECT_TRUE(failures.empty()) << "failed driver calls: " << absl::StrJoin(failures, ", ");
  }

  testing::EmulatedDriver& driver_ = testing::EmulatedDriver::get();
};

// A row of 12,225 to 12,288 floats fits the 48 KiB that every launch may
// have, but not beside the kernel's static shared memory. The backend opts the kernel in
// to the device's maximum, and keeps the row on chip; before, the launch failed, and so
// did the graph that a compiled function falls back from.
TEST_F(CudaBackendOnEmulatedDriver, RowNormsOfTwelveThousandFloatsOptInAndKeepTheRowOnChip) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kHopper);
  for (int64_t extent : {int64_t{12225}, int64_t{12288}}) {
    const Tensor x = Tensor::randn({3, extent}, 1).eval(), w = Tensor::rand({extent}, 2).eval();
    for (const Tensor& y : {softmax(x), layer_norm(x, w, w), rms_norm(x, w)}) {
      const Planned p = plan_of({y});
      SCOPED_TRACE(p.plan->description);
      const size_t before = driver_.launches().size();
      EXPECT_NO_THROW(gpu->run(*p.plan, p.args));
      const std::vector<unsigned> shared = row_norm_shared_bytes(p, before);
      ASSERT_EQ(shared.size(), 1u);
      EXPECT_EQ(shared[0], static_cast<unsigned>(extent * 4)) << "the row is kept on chip";
    }
  }
  // Two row norms: a compiled function replays them as one captured graph (from its second
  // call: the first runs uncaptured).
  const Tensor x = Tensor::randn({3, 12288}, 3).eval(), w = Tensor::rand({12288}, 4).eval();
  const Planned p = plan_of({softmax(rms_norm(x, w))});
  ASSERT_GE(p.plan->kernels.size(), 2u) << p.plan->description;
  const int64_t graph_launches = driver_.calls("cuGraphLaunch");
  EXPECT_NO_THROW(gpu->replay(p.plan, p.args));
  EXPECT_NO_THROW(gpu->replay(p.plan, p.args));
  EXPECT_EQ(driver_.calls("cuGraphLaunch"), graph_launches + 1) << "replayed as a graph";
  expect_no_failed_calls();
}

// A block-quantized weight's kernels (a matmul reading it, an embedding gathering from it)
// launch with 32-bit indices: the backend counts the weight's elements from its blocks
// (Q8_0: 32 values in 34 bytes), where an element size of 0 once divided by zero.
TEST_F(CudaBackendOnEmulatedDriver, BlockQuantizedWeightsLaunchWithNarrowIndices) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kHopper);
  std::mt19937_64 rng(testing::test_seed());
  const Tensor w = testing::random_block_tensor(DType::Q8_0, {64, 256}, rng);
  const Tensor x = Tensor::randn({8, 256}, 5).eval();
  const Tensor ids = Tensor::from_vector(std::vector<int32_t>{3, 63, 0}, {3});
  for (const Tensor& y : {matmul(x, w.transpose(0, 1)), embedding(w, ids) * 2.0}) {
    const Planned p = plan_of({y});
    SCOPED_TRACE(p.plan->description);
    const size_t before = driver_.launches().size();
    EXPECT_NO_THROW(gpu->run(*p.plan, p.args));
    const std::vector<testing::EmulatedLaunch> launches = driver_.launches();
    ASSERT_EQ(launches.size(), before + p.plan->kernels.size());
    for (size_t k = 0; k < p.plan->kernels.size(); ++k) {
      EXPECT_EQ(launches[before + k].function,
                runtime::cuda::entry_name(*p.plan->kernels[k].program, /*wide=*/false));
    }
  }
  expect_no_failed_calls();
}

// The cache takes what the device allows: 200,000 bytes of row fit beside the static
// arrays on Hopper (227 KiB), not on an A100 (163 KiB), which reads the row once a pass.
TEST_F(CudaBackendOnEmulatedDriver, ARowCachedOnlyWhereTheDeviceHasTheSharedMemory) {
  testing::EmulatedGpu& a100 = driver_.gpu(kAmpere);
  a100.name = "Kiln emulated A100";
  a100.compute_major = 8;
  a100.sm_count = 108;
  a100.max_shared_per_block_optin = 163 * 1024;
  const Tensor x = Tensor::randn({2, 50000}, 5).eval();
  const Planned p = plan_of({softmax(x)});
  for (const auto& [index, want] : {std::pair{kHopper, 200000u}, std::pair{kAmpere, 0u}}) {
    SCOPED_TRACE(index);
    std::unique_ptr<Backend> gpu = make_cuda_backend(index);
    const size_t before = driver_.launches().size();
    EXPECT_NO_THROW(gpu->run(*p.plan, p.args));
    const std::vector<unsigned> shared = row_norm_shared_bytes(p, before);
    ASSERT_EQ(shared.size(), 1u);
    EXPECT_EQ(shared[0], want);
  }
  expect_no_failed_calls();
}

// A buffer is freed by whichever thread drops it last, which may have no
// current context. A block larger than the allocator's 4 GiB cache is freed at once (the
// emulation reserves its memory without touching it).
TEST_F(CudaBackendOnEmulatedDriver, ABufferDroppedOnAThreadWithNoContextIsFreed) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kFreeing);
  const int64_t n = ((int64_t{4} << 30) + (int64_t{4} << 20)) / 4;
  const Planned p = plan_of({Tensor::arange(n, DType::I32) * 2.0});
  std::vector<std::shared_ptr<Buffer>> out = gpu->run(*p.plan, p.args);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_GT(out[0]->nbytes(), int64_t{4} << 30);
  const int64_t live = driver_.live_allocations();
  std::thread([&out] { out.clear(); }).join();
  EXPECT_EQ(driver_.live_allocations(), live - 1) << "the block was freed";
  expect_no_failed_calls();
}

// A buffer dropped on another thread while a graph is being captured is
// not freed until the capture ends. cuMemFree synchronizes the device, which invalidates a
// capture under way on it (the emulation fails cuStreamEndCapture then, as the driver does).
TEST_F(CudaBackendOnEmulatedDriver, ABufferDroppedDuringAnotherThreadsCaptureIsFreedAfterIt) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kFreeing);
  // A block over the allocator's 4 GiB cache bound: dropping it frees it.
  const int64_t n = ((int64_t{4} << 30) + (int64_t{4} << 20)) / 4;
  const Planned big = plan_of({Tensor::arange(n, DType::I32) * 3.0});
  auto out = std::make_shared<std::vector<std::shared_ptr<Buffer>>>(gpu->run(*big.plan, big.args));
  ASSERT_EQ(out->size(), 1u);
  const Tensor x = Tensor::randn({8, 300}, 13).eval(), w = Tensor::rand({300}, 14).eval();
  const Planned p = plan_of({softmax(rms_norm(x, w))});
  ASSERT_NO_THROW(gpu->replay(p.plan, p.args));  // the first call is never captured
  const int64_t frees = driver_.calls("cuMemFree_v2");
  const int64_t captures = driver_.calls("cuStreamBeginCapture_v2");
  const int64_t graph_launches = driver_.calls("cuGraphLaunch");

  // At the capture's first launch, another thread drops the big buffer (and waits for it).
  auto capturing = std::make_shared<bool>(false);
  auto frees_during_capture = std::make_shared<int64_t>(-1);
  driver_.set_before_call([this, out, capturing, frees_during_capture](std::string_view call) {
    if (call == "cuStreamBeginCapture_v2") *capturing = true;
    if (call != "cuLaunchKernel" || !*capturing || out->empty()) return;
    std::thread([out] { out->clear(); }).join();
    *frees_during_capture = driver_.calls("cuMemFree_v2");
  });
  ASSERT_NO_THROW(gpu->replay(p.plan, p.args));
  driver_.set_before_call(nullptr);
  EXPECT_TRUE(out->empty()) << "the capture launched nothing";
  EXPECT_EQ(*frees_during_capture, frees) << "the block was freed during the capture";
  EXPECT_EQ(driver_.calls("cuMemFree_v2"), frees + 1) << "the block was not freed after it";
  EXPECT_EQ(driver_.calls("cuStreamBeginCapture_v2"), captures + 1);
  EXPECT_EQ(driver_.calls("cuGraphLaunch"), graph_launches + 1) << "the graph was not launched";
  expect_no_failed_calls();
}

// Each worker thread stops at its first cuCtxSetCurrent until the other arrives there too.
thread_local bool meets_at_first_context = false;

// What the two threads of the next test share; it outlives the test if they never return.
struct Exchange {
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  int finished = 0;
  std::vector<std::string> errors;
  std::unique_ptr<Backend> first, second;
  Planned planned;
};

// A run on one GPU with an input on another copies the input over. Two
// threads doing that in opposite directions deadlocked when each held its GPU's stream
// mutex while waiting for the other's. The emulation makes both threads meet with their
// first context made current (which, in the old order, was with their own GPU's mutex
// held), so the old order deadlocks every time.
TEST_F(CudaBackendOnEmulatedDriver, TwoThreadsExchangingTensorsBetweenTwoGpusDoNotDeadlock) {
  auto ex = std::make_shared<Exchange>();
  ex->first = make_cuda_backend(kFirst);
  ex->second = make_cuda_backend(kSecond);
  const Tensor x = Tensor::randn({256}, 6).eval();
  ex->planned = plan_of({x * 2.0});
  ASSERT_EQ(ex->planned.args.inputs.size(), 1u);
  const Buffer& host = *ex->planned.args.inputs[0];
  std::shared_ptr<Buffer> on_first = runtime::cuda::upload(host, Device{DeviceType::CUDA, kFirst});
  std::shared_ptr<Buffer> on_second =
      runtime::cuda::upload(host, Device{DeviceType::CUDA, kSecond});
  // Compiled and loaded on both GPUs first: the threads then only copy and launch.
  ex->first->run(*ex->planned.plan, ex->planned.args);
  ex->second->run(*ex->planned.plan, ex->planned.args);

  driver_.set_before_call([ex](std::string_view call) {
    if (call != "cuCtxSetCurrent" || !meets_at_first_context) return;
    meets_at_first_context = false;
    std::unique_lock<std::mutex> lock(ex->mutex);
    ++ex->arrived;
    ex->changed.notify_all();
    // A thread alone goes on after a while (it only slows the test down).
    ex->changed.wait_for(lock, std::chrono::seconds(2), [&] { return ex->arrived >= 2; });
  });
  auto work = [ex](Backend* backend, std::shared_ptr<Buffer> input) {
    meets_at_first_context = true;
    jit::PlanArguments args = ex->planned.args;
    args.inputs = {std::move(input)};
    try {
      backend->run(*ex->planned.plan, args);
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(ex->mutex);
      ex->errors.push_back(e.what());
    }
    std::lock_guard<std::mutex> lock(ex->mutex);
    ++ex->finished;
    ex->changed.notify_all();
  };
  std::thread to_second(work, ex->second.get(), on_first);
  std::thread to_first(work, ex->first.get(), on_second);
  bool finished = false;
  {
    std::unique_lock<std::mutex> lock(ex->mutex);
    finished =
        ex->changed.wait_for(lock, std::chrono::seconds(60), [&] { return ex->finished == 2; });
  }
  if (!finished) {
    // They never return; the process ends with them blocked (the Exchange stays alive).
    to_second.detach();
    to_first.detach();
    FAIL() << "two runs exchanging tensors between two GPUs deadlocked";
  }
  to_second.join();
  to_first.join();
  EXPECT_TRUE(ex->errors.empty()) << absl::StrJoin(ex->errors, "\n");
  expect_no_failed_calls();
}

// The scalars each launch of a kernel of `p` reads, since launch `from`, by the bytes the
// emulation recorded: per launch of a kernel with scalars, its Params' p[] as 64-bit words.
std::vector<std::vector<uint64_t>> launched_scalars(const std::vector<testing::EmulatedLaunch>& all,
                                                    const Planned& p, size_t from) {
  std::vector<std::vector<uint64_t>> scalars;
  for (const jit::PlannedKernel& k : p.plan->kernels) {
    if (k.launch.params.empty()) continue;
    const runtime::cuda::ParamsLayout layout = runtime::cuda::params_layout(*k.program);
    const std::string entry = runtime::cuda::entry_name(*k.program, /*wide=*/false);
    for (size_t i = from; i < all.size(); ++i) {
      if (all[i].function != entry) continue;
      EXPECT_EQ(all[i].arguments.size(), 2u) << entry << ": (Params, Split), read from the cubin";
      if (all[i].arguments.size() != 2 || all[i].arguments[0].size() != layout.size) {
        ADD_FAILURE() << entry << ": Params of " << all[i].arguments[0].size() << " bytes, not "
                      << layout.size;
        continue;
      }
      std::vector<uint64_t>& words = scalars.emplace_back(k.launch.params.size());
      std::memcpy(words.data(), all[i].arguments[0].data() + layout.p, 8 * words.size());
    }
  }
  return scalars;
}

// A compiled function whose scalars change every call (a step counter, a
// temperature) is captured once; each call's scalars are written into the graph's launches
// in place. Scalars are compared bit for bit: a NaN is the same NaN (it used to re-capture
// every call), and -0 is not 0 (it used to replay the graph of 0).
TEST_F(CudaBackendOnEmulatedDriver, ChangedScalarsUpdateTheGraphInPlaceWithoutRecapturing) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kHopper);
  const Tensor x = Tensor::randn({4, 512}, 7).eval(), w = Tensor::rand({512}, 8).eval();
  const Planned p = plan_of({softmax(rms_norm(x, w, 1e-5) * 0.5)});
  ASSERT_GE(p.plan->kernels.size(), 2u) << p.plan->description;
  ASSERT_FALSE(p.args.params.empty());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // The first call runs uncaptured, the second captures; the scalars change on every call
  // but the NaN's second.
  const std::vector<double> values = {1.0, 0.5, 0.25, 3.0,  0.0,   -0.0,
                                      7.0, nan, nan,  -1.0, 1e300, 42.0};
  const int64_t captures = driver_.calls("cuStreamBeginCapture_v2");
  const int64_t instantiations = driver_.calls("cuGraphInstantiateWithFlags");
  const int64_t graph_launches = driver_.calls("cuGraphLaunch");
  for (size_t call = 0; call < values.size(); ++call) {
    SCOPED_TRACE(::testing::Message() << "call " << call << ", scalars " << values[call]);
    jit::PlanArguments args = p.args;
    args.params.assign(args.params.size(), values[call]);
    const size_t before = driver_.launches().size();
    const int64_t updates = driver_.calls("cuGraphExecKernelNodeSetParams_v2");
    ASSERT_NO_THROW(gpu->replay(p.plan, args));
    const std::vector<std::vector<uint64_t>> scalars =
        launched_scalars(driver_.launches(), p, before);
    ASSERT_FALSE(scalars.empty()) << "no launch of a kernel with scalars";
    for (const std::vector<uint64_t>& launch : scalars) {
      for (uint64_t bits : launch) {
        EXPECT_EQ(bits, std::bit_cast<uint64_t>(values[call])) << "a launch with stale scalars";
      }
    }
    if (call == 8) {
      EXPECT_EQ(driver_.calls("cuGraphExecKernelNodeSetParams_v2"), updates)
          << "the same NaN again changes nothing";
    }
  }
  EXPECT_EQ(driver_.calls("cuStreamBeginCapture_v2"), captures + 1) << "captured once";
  EXPECT_EQ(driver_.calls("cuGraphInstantiateWithFlags"), instantiations + 1);
  EXPECT_EQ(driver_.calls("cuGraphLaunch"), graph_launches + int64_t(values.size()) - 1);
  expect_no_failed_calls();
}

// A compiled plan's first call runs kernel by kernel, uncaptured (where a
// failing kernel is named, and its modules are loaded before any capture); its second call
// captures the graph, and later calls launch it.
TEST_F(CudaBackendOnEmulatedDriver, ACompiledPlanRunsOnceUncapturedBeforeItIsCaptured) {
  std::unique_ptr<Backend> gpu = make_cuda_backend(kHopper);
  const Tensor x = Tensor::randn({8, 300}, 9).eval(), w = Tensor::rand({300}, 10).eval();
  const Planned p = plan_of({softmax(rms_norm(x, w))});
  ASSERT_GE(p.plan->kernels.size(), 2u) << p.plan->description;
  const int64_t captures = driver_.calls("cuStreamBeginCapture_v2");
  const int64_t graph_launches = driver_.calls("cuGraphLaunch");
  const int64_t launches = driver_.calls("cuLaunchKernel");
  ASSERT_NO_THROW(gpu->replay(p.plan, p.args));
  EXPECT_EQ(driver_.calls("cuStreamBeginCapture_v2"), captures) << "the first call is captured";
  EXPECT_EQ(driver_.calls("cuGraphLaunch"), graph_launches);
  EXPECT_GE(driver_.calls("cuLaunchKernel") - launches, int64_t(p.plan->kernels.size()))
      << "the first call launches its kernels one by one";
  ASSERT_NO_THROW(gpu->replay(p.plan, p.args));
  ASSERT_NO_THROW(gpu->replay(p.plan, p.args));
  EXPECT_EQ(driver_.calls("cuStreamBeginCapture_v2"), captures + 1);
  EXPECT_EQ(driver_.calls("cuGraphLaunch"), graph_launches + 2);
  expect_no_failed_calls();
}

// With KILN_CUDA_SYNC=1 every launch is followed by a synchronize, so a
// kernel that faults (which the driver reports only at a later call) is named in the error.
TEST_F(CudaBackendOnEmulatedDriver, WithKilnCudaSyncAFaultingKernelIsNamed) {
  // The device reads KILN_CUDA_SYNC when it is made, and this test's GPU is made here.
  ::setenv("KILN_CUDA_SYNC", "1", 1);
  std::unique_ptr<Backend> gpu;
  try {
    gpu = make_cuda_backend(kSyncing);
  } catch (...) {
    ::unsetenv("KILN_CUDA_SYNC");
    throw;
  }
  ::unsetenv("KILN_CUDA_SYNC");
  const Tensor x = Tensor::randn({8, 300}, 11).eval(), w = Tensor::rand({300}, 12).eval();
  const Planned p = plan_of({softmax(rms_norm(x, w))});
  ASSERT_GE(p.plan->kernels.size(), 2u) << p.plan->description;

  // Every launch is followed at once by a synchronize on the launching thread.
  auto calls = std::make_shared<std::vector<std::string>>();
  auto calls_mutex = std::make_shared<std::mutex>();
  driver_.set_before_call([calls, calls_mutex](std::string_view call) {
    std::lock_guard<std::mutex> lock(*calls_mutex);
    calls->emplace_back(call);
  });
  ASSERT_NO_THROW(gpu->run(*p.plan, p.args));
  driver_.set_before_call(nullptr);
  int launched = 0;
  for (size_t i = 0; i < calls->size(); ++i) {
    if ((*calls)[i] != "cuLaunchKernel") continue;
    ++launched;
    ASSERT_LT(i + 1, calls->size());
    EXPECT_EQ((*calls)[i + 1], "cuStreamSynchronize") << "after launch " << launched;
  }
  EXPECT_GE(launched, 2);
  expect_no_failed_calls();

  // The first kernel faults: the run fails there, naming it.
  const jit::KernelProgram& first = *p.plan->kernels[0].program;
  driver_.gpu(kSyncing).faulting_kernel = runtime::cuda::entry_name(first, /*wide=*/false);
  testing::expect_error([&] { gpu->run(*p.plan, p.args); },
                        {"cuda:7 kernel " + first.name, "KILN_CUDA_SYNC=1",
                         "cuStreamSynchronize failed", "an illegal memory access"});
}

// A GPU whose attributes cannot be read is an error naming the attribute,
// never a device with guessed ones (an SM count of 1 capped every grid).
TEST_F(CudaBackendOnEmulatedDriver, AnAttributeThatCannotBeReadIsAnErrorNamingIt) {
  const std::pair<int, const char*> attributes[] = {
      {runtime::cuda::kAttributeComputeMajor, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"},
      {runtime::cuda::kAttributeMultiprocessorCount, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"},
      {runtime::cuda::kAttributeMaxSharedPerBlockOptin,
       "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
  };
  for (const auto& [attribute, name] : attributes) {
    driver_.gpu(kBadAttribute).failing_attribute = attribute;
    testing::expect_error([] { make_cuda_backend(kBadAttribute); },
                          {"cuda:5", name, "cuDeviceGetAttribute failed", "invalid argument"});
  }
  driver_.gpu(kBadAttribute).failing_attribute = runtime::cuda::kAttributeComputeMinor;
  const absl::StatusOr<std::vector<runtime::cuda::DeviceInfo>> devices =
      runtime::cuda::query_devices();
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.status().message().find("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
            std::string::npos)
      << devices.status();
}

// The driver's text for a code it does not know is null: the error still says what failed.
TEST_F(CudaBackendOnEmulatedDriver, AFailureWithAnUnknownCodeIsStillNamed) {
  const absl::Status s = runtime::cuda::check_cuda(12345, "cuSomething");
  EXPECT_NE(s.message().find("cuSomething failed: unknown error (CUresult 12345)"),
            std::string::npos)
      << s;
}

// The emulation refuses what the driver refuses: static and dynamic shared memory beyond
// 48 KiB without opting in, an opt-in beyond the device's maximum, and memory calls with
// no current context. The static size is read from a real cubin (sm_80: exactly the
// kernel's arrays).
TEST_F(CudaBackendOnEmulatedDriver, TheEmulationRefusesWhatTheDriverRefuses) {
  using runtime::cuda::kDefaultSharedPerBlock;
  using runtime::cuda::kFunctionAttributeMaxDynamicSharedSizeBytes;
  const absl::StatusOr<std::string> cubin = runtime::cuda::compile_to_cubin(
      "extern \"C\" __global__ void emulation_check(float* x) {\n"
      "  __shared__ double staged[32];\n"
      "  staged[threadIdx.x % 32] = x[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  x[threadIdx.x] = (float)staged[(threadIdx.x + 1) % 32];\n"
      "}\n",
      "emulation_check", 80);
  ASSERT_TRUE(cubin.ok()) << cubin.status();
  const runtime::cuda::DriverApi& d = driver_.api();
  const int most = driver_.gpu(kEmulationCheck).max_shared_per_block_optin;
  ASSERT_EQ(d.init(0), 0);
  runtime::cuda::CUcontext context = nullptr;
  ASSERT_EQ(d.primary_ctx_retain(&context, kEmulationCheck), 0);
  ASSERT_EQ(d.ctx_push_current(context), 0);
  runtime::cuda::CUmodule module = nullptr;
  ASSERT_EQ(d.module_load_data(&module, cubin->data()), 0);
  runtime::cuda::CUfunction f = nullptr;
  ASSERT_EQ(d.module_get_function(&f, module, "emulation_check"), 0);
  int static_bytes = 0;
  ASSERT_EQ(
      d.function_attribute(&static_bytes, runtime::cuda::kFunctionAttributeSharedSizeBytes, f), 0);
  EXPECT_EQ(static_bytes, 256);
  runtime::cuda::CUstream stream = nullptr;
  ASSERT_EQ(d.stream_create(&stream, runtime::cuda::kStreamNonBlocking), 0);
  runtime::cuda::CUdeviceptr x = 0;
  ASSERT_EQ(d.mem_alloc(&x, 1024), 0);
  void* args[] = {&x};
  auto launch = [&](int shared) {
    return d.launch_kernel(f, 1, 1, 1, 256, 1, 1, static_cast<unsigned>(shared), stream, args,
                           nullptr);
  };
  EXPECT_EQ(launch(kDefaultSharedPerBlock - 256), 0);
  EXPECT_NE(launch(kDefaultSharedPerBlock - 255), 0);
  EXPECT_NE(d.function_set_attribute(f, kFunctionAttributeMaxDynamicSharedSizeBytes, most - 255),
            0);
  EXPECT_EQ(d.function_set_attribute(f, kFunctionAttributeMaxDynamicSharedSizeBytes, most - 256),
            0);
  EXPECT_EQ(launch(most - 256), 0);
  EXPECT_NE(launch(most - 255), 0);
  std::thread([&] {
    runtime::cuda::CUdeviceptr p = 0;
    EXPECT_NE(d.mem_alloc(&p, 1024), 0) << "no current context";
    EXPECT_NE(d.mem_free(x), 0) << "no current context";
  }).join();
  EXPECT_EQ(d.mem_free(x), 0);
  runtime::cuda::CUcontext popped = nullptr;
  EXPECT_EQ(d.ctx_pop_current(&popped), 0);
  EXPECT_EQ(popped, context);
}

}  // namespace
}  // namespace kiln
