// Custom whole kernels: computed by their CPU fallback with dense inputs (checked against
// independently computed values), planned as their own kernel, shown in dumps, compiled for
// the GPU by NVRTC, and rejected with clear errors when the definition or a call is bad.
#include <random>

#include "jit/eval/sync_dump.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/record.h"
#include "kiln/custom.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::random_floats;
using testing::test_seed;

// An inclusive prefix sum along the last axis: a scan, which fusion cannot express.
KernelFunction cumsum_definition() {
  KernelFunction k;
  k.name = "test_cumsum_rows";
  k.arity = 1;
  k.cuda = R"(
extern "C" __global__ void test_cumsum_rows(KilnKernelArgs a) {
  const long long cols = a.out_shape[a.out_rank - 1];
  const long long rows = cols == 0 ? 0 : a.out_numel / cols;
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* x = (const float*)a.in[0] + row * cols;
  float* y = (float*)a.out + row * cols;
  float total = 0.0f;
  for (long long c = 0; c < cols; ++c) { total += x[c]; y[c] = total; }
})";
  k.infer = [](const std::vector<TensorType>& in) {
    if (in[0].dtype != DType::F32) throw Error("expects an f32 input");
    if (in[0].shape.empty()) throw Error("expects at least one dimension");
    return in[0];
  };
  k.launch = [](const std::vector<TensorType>&, const TensorType& out) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < out.shape.size(); ++d) rows *= out.shape[d];
    LaunchDims dims;
    dims.grid[0] = (rows + 255) / 256;
    return dims;
  };
  k.cpu = [](const std::vector<const void*>& in, const std::vector<TensorType>&, void* out,
             const TensorType& type) {
    const int64_t cols = type.shape.back();
    const int64_t rows = cols == 0 ? 0 : testing::count(type.shape) / cols;
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out);
    for (int64_t r = 0; r < rows; ++r) {
      float total = 0;
      for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = total += x[r * cols + c];
    }
  };
  return k;
}

CustomKernel cumsum() { return define_kernel(cumsum_definition()); }

int64_t kernels_for(const Tensor& t) {
  const int64_t before = stats().kernels_launched;
  t.eval();
  return stats().kernels_launched - before;
}

TEST(CustomKernel, ComputesOverDenseInputsAndFeedsFusedConsumers) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  CustomKernel scan = cumsum();
  const int64_t rows = 37, cols = 53;
  const std::vector<float> xs = random_floats(rows * cols, rng);
  Tensor x = Tensor::from_vector(xs, {cols, rows});
  // A transposed, scaled view: the kernel must see it as a dense [rows, cols] buffer.
  Tensor y = scan({x.transpose(0, 1) * 2.0}) + 1.0;
  EXPECT_EQ(kernels_for(y), 3);  // the input, the custom kernel, the consumer
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float total = 0;
    for (int64_t c = 0; c < cols; ++c) {
      total += xs[c * rows + r] * 2.0f;
      ASSERT_EQ(got[r * cols + c], total + 1.0f) << r << "," << c;
    }
  }
  Tensor want = testing::reference_tensor(scan({x}));
  EXPECT_EQ(want.to_vector<float>(), scan({x}).to_vector<float>());
}

TEST(CustomKernel, ShowsInPlansAndTracesUnderItsName) {
  CustomKernel scan = cumsum();
  Tensor x = Tensor::rand({4, 8}, 3);
  Tensor y = scan({exp(x)}) * 2.0;
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  EXPECT_NE(plan->description.find("test_cumsum_rows"), std::string::npos) << plan->description;
  EXPECT_NE(plan->description.find("a custom kernel reads it as a dense buffer"), std::string::npos)
      << plan->description;
  const std::string json = dump_trace({y}, DumpFormat::Json);
  EXPECT_NE(json.find("\"kernel\":\"test_cumsum_rows\""), std::string::npos) << json;
  LoadedTrace loaded = load_trace(json);
  Tensor again = loaded.run({})[0];
  EXPECT_EQ(again.to_vector<float>(), y.to_vector<float>());
}

TEST(CustomKernel, CompilesForSm80AndSm90) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok()) << runtime::cuda::nvrtc_available().message();
  CustomKernel scan = cumsum();
  Tensor y = scan({Tensor::rand({4, 8}, 3)});
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  ASSERT_EQ(plan->kernels.size(), 2u);  // rand, then the scan
  const jit::KernelProgram& program = *plan->kernels[1].program;
  EXPECT_EQ(program.anchor, jit::AnchorKind::kCustomKernel);
  const std::string source = runtime::cuda::render_cuda(program);
  EXPECT_NE(source.find("struct KilnKernelArgs"), std::string::npos);
  for (int arch : {80, 90}) {
    absl::StatusOr<std::string> cubin = runtime::cuda::compile_to_cubin(source, program.name, arch);
    EXPECT_TRUE(cubin.ok()) << cubin.status().message();
  }
}

// The CUDA module Kiln builds for a call of `k` on a CPU tensor (no GPU is needed to render it).
// KILN_RECORD_CUDA_DIR does not record it: CI compiles every recorded module and expects
// each to compile, and these tests render broken ones on purpose.
std::string module_of(const CustomKernel& k) {
  Tensor y = k({Tensor::rand({4, 8}, 3)});
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  jit::set_cuda_recording_paused(true);
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  jit::set_cuda_recording_paused(false);
  return runtime::cuda::render_cuda(*plan->kernels.back().program);
}

// NVRTC's verdict on that module for sm_80: the message, or "" when it compiles.
std::string compile_error_of(const CustomKernel& k) {
  absl::StatusOr<std::string> cubin = runtime::cuda::compile_to_cubin(module_of(k), k.name(), 80);
  return cubin.ok() ? "" : std::string(cubin.status().message());
}

TEST(CustomKernel, BadDefinitionsAndCallsAreRejectedWithTheReason) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  // A bad CUDA source is accepted at definition (NVRTC runs only when a GPU runs the kernel)
  // and fails the module's compile with the reason.
  KernelFunction k = cumsum_definition();
  k.name = "test_bad_kernel";
  k.cuda = R"(extern "C" __global__ void test_bad_kernel(KilnKernelArgs a) { oops; })";
  EXPECT_NE(compile_error_of(define_kernel(k)).find("oops"), std::string::npos);
  k.name = "test_bad_signature";
  k.cuda = R"(extern "C" __global__ void test_bad_signature(float* x) {})";
  EXPECT_NE(compile_error_of(define_kernel(k)).find("test_bad_signature must be declared extern"),
            std::string::npos);
  EXPECT_EQ(compile_error_of(cumsum()), "");  // the check passes a right signature
  k.name = "test_no_launch";
  k.cuda = R"(extern "C" __global__ void test_no_launch(KilnKernelArgs a) {})";
  k.launch = nullptr;
  testing::expect_error([&] { define_kernel(k); }, {"test_no_launch", "launch rule is empty"});
  k = cumsum_definition();
  k.arity = 9;
  testing::expect_error([&] { define_kernel(k); }, {"arity 9", "1 to 8"});

  CustomKernel scan = cumsum();
  Tensor d = Tensor::zeros({2, 3}, DType::F64);
  const int64_t live = detail::Node::live_nodes().load();
  testing::expect_error([&] { scan({d}); },
                        {"[custom_kernel test_cumsum_rows]", "expects an f32 input", "f64[2, 3]"});
  testing::expect_error([&] { scan({d, d}); }, {"takes 1 inputs, got 2"});
  EXPECT_EQ(detail::Node::live_nodes().load(), live);  // a failed call records nothing
}

// A CPU-only kernel: no CUDA source and no launch rule. It runs on the CPU, renders as a
// comment, and cannot be recorded on a CUDA device.
TEST(CustomKernel, CpuOnlyKernelsNeedNoCudaSource) {
  testing::DefaultDevice cpu({DeviceType::CPU, 0});  // where such a kernel runs
  KernelFunction def = cumsum_definition();
  def.name = "test_cpu_only_cumsum";
  def.cuda.clear();
  def.launch = nullptr;
  CustomKernel scan = define_kernel(def);
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  std::vector<float> x = random_floats(6 * 5, rng);
  Tensor y = scan({Tensor::from_vector(x, {6, 5})});
  std::vector<float> got = y.to_vector<float>();
  for (int r = 0; r < 6; ++r) {
    float total = 0;
    for (int c = 0; c < 5; ++c) EXPECT_EQ(got[r * 5 + c], total += x[r * 5 + c]);
  }
  EXPECT_NE(module_of(scan).find("has no CUDA source: it runs only on the CPU"), std::string::npos);
  const std::optional<int> cpu_only = ops::custom_kernel_id(scan.name());
  ASSERT_TRUE(cpu_only.has_value());
  ops::Attrs attrs;
  attrs.function = *cpu_only;
  testing::expect_error(
      [&] {
        jit::check_runs_on(ops::OpKind::CustomKernel, attrs, {DeviceType::CUDA, 1});
      },
      {"[custom_kernel test_cpu_only_cumsum]", "no CUDA source", "not on cuda:1"});
  jit::check_runs_on(ops::OpKind::CustomKernel, attrs, {DeviceType::CPU, 0});  // no throw
  const std::optional<int> with_source = ops::custom_kernel_id(cumsum().name());
  ASSERT_TRUE(with_source.has_value());
  attrs.function = *with_source;
  jit::check_runs_on(ops::OpKind::CustomKernel, attrs, {DeviceType::CUDA, 1});  // has a source
}

TEST(CustomKernel, WorksInsideACompiledFunction) {
  CustomKernel scan = cumsum();
  Compiled fn = compile([&](const std::vector<Tensor>& in) { return std::vector{scan({in[0]})}; });
  for (float v : {1.0f, 2.0f, -1.0f}) {
    EXPECT_EQ(fn({Tensor::full({2, 3}, v)})[0].to_vector<float>(),
              (std::vector<float>{v, 2 * v, 3 * v, v, 2 * v, 3 * v}));
  }
  EXPECT_EQ(stats().compiled_replays > 0, true);
}

}  // namespace
}  // namespace kiln
