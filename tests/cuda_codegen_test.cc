// The CUDA path without a GPU: every kernel family in every dtype is rendered to CUDA C++ and
// compiled by the real NVRTC to cubins for sm_80 and sm_90.
#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "jit/launch_plan.h"
#include "jit/trace.h"
#include "kiln/nn.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "test_util.h"

namespace kiln {
namespace {

// The programs of a corpus of traces covering every family and dtype.
std::vector<std::shared_ptr<const jit::KernelProgram>> corpus() {
  std::vector<Tensor> outs;
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Tensor x = Tensor::rand({4, 6}, 1, dt), w = Tensor::rand({6}, 2, dt);
    Tensor m = Tensor::rand({6, 3}, 3, dt), v = Tensor::rand({5, 4, 6}, 4, dt);
    outs.push_back(relu(x * 2.0 + w) - exp(x) / (abs(w) + 1.0));
    outs.push_back(sum(exp(x - 1.0) * 2.0, {1}));
    outs.push_back(mean(v, {0, 2}, true) + 1.0);
    outs.push_back(max(x, {0}));
    outs.push_back(softmax(x) * 3.0);
    outs.push_back(log_softmax(v, 1));
    outs.push_back(layer_norm(x, w, w * 0.5));
    outs.push_back(rms_norm(v, w));
    outs.push_back(relu(matmul(x, m) + 1.0).astype(DType::F32));
    outs.push_back(matmul(v, m));
    outs.push_back(matmul(w, m));
    outs.push_back(concat({x, x * 2.0}, 1));
    outs.push_back(argmax(x, 1));
    outs.push_back(where(x > 0.5, sigmoid(x), gelu(x)) + silu(w) + erf(w) + tanh(w));
    outs.push_back(pow(abs(x) + 0.5, 1.5) + sin(x) + cos(x) + log(x + 1.0) + sqrt(x) +
                   rsqrt(x + 1.0));
    outs.push_back(floor(x * 4.0) + ceil(x) + reciprocal(x + 1.0) + square(x) + neg(x));
    outs.push_back(x.transpose(0, 1).slice(0, 1, 6, 2).unsqueeze(0) *
                   Tensor::randn({3, 1, 4}, 5, dt));
  }
  for (DType dt : {DType::I32, DType::I64, DType::Bool}) {
    Tensor a = Tensor::arange(12, DType::I32).reshape({3, 4}).astype(dt);
    Tensor b = Tensor::ones({4}, dt);
    outs.push_back(sum(a, {1}));
    outs.push_back(logical_or(logical_and(a > 1.0, b < 2.0), logical_not(a == b)));
    outs.push_back(max(a, {1}, true));
    outs.push_back(argmin(a, 0));
    outs.push_back(concat({a, a}, 0));
    outs.push_back((a / (b + 1.0)).astype(dt));
    if (dt != DType::Bool) {
      outs.push_back(matmul(a, a.transpose(0, 1)));
      outs.push_back(pow(a, b) * a - neg(abs(a)) + square(a) + maximum(a, b) + minimum(a, b));
      outs.push_back(Tensor::full({2, 2}, 3, dt) + a.slice(0, 0, 2).slice(1, 0, 2));
    }
  }
  std::vector<std::shared_ptr<const jit::KernelProgram>> programs;
  std::set<std::string> seen;
  for (const Tensor& t : outs) {
    jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
    std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
    for (const jit::PlannedKernel& k : plan->kernels) {
      if (seen.insert(k.program->to_string()).second) programs.push_back(k.program);
    }
  }
  return programs;
}

TEST(CudaCodegen, EveryFamilyAndDtypeCompilesForSm80AndSm90) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok())
      << runtime::cuda::nvrtc_available().message()
      << " (the CUDA Toolkit's NVRTC must be installed: CI compiles every kernel with it)";
  std::vector<std::shared_ptr<const jit::KernelProgram>> programs = corpus();
  std::set<jit::AnchorKind> families;
  for (const auto& p : programs) families.insert(p->anchor);
  EXPECT_EQ(families.size(), 6u);  // pointwise, reduce, argreduce, rownorm, matmul, concat
  // Compile on every core, as a plan's kernels are compiled (NVRTC is thread-safe).
  std::atomic<int> compiled{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < programs.size(); i = next++) {
      const jit::KernelProgram& p = *programs[i];
      const std::string source = runtime::cuda::render_cuda(p);
      for (int arch : {80, 90}) {
        absl::StatusOr<std::string> cubin = runtime::cuda::compile_to_cubin(source, p.name, arch);
        if (!cubin.ok() || cubin->size() < 100 ||
            source.find("__launch_bounds__(256) " + p.name + "_i32") == std::string::npos) {
          const std::string path = "/tmp/kiln_cuda_failure_" + p.name + ".cu";
          std::ofstream(path) << source;
          std::lock_guard<std::mutex> lock(failures_mutex);
          failures.push_back(std::string(cubin.status().message()) + "\nsource: " + path);
          continue;
        }
        ++compiled;
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t)
    threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(compiled.load(), static_cast<int>(2 * programs.size()));
  std::printf("cuda codegen: %zu kernels, %d cubins compiled\n", programs.size(), compiled.load());
}

}  // namespace
}  // namespace kiln
