// Every generated CUDA kernel of the corpus, run on the host through the CUDA execution model
// of tests/cuda_emulation: the same source NVRTC compiles (the PTX conversions aside), the
// same packed Params, the same grid and block sizes as the CUDA backend, with both the 32-
// and the 64-bit entry points. Each result is compared element by element with the CPU
// backend, into outputs poisoned beforehand. No GPU is needed; none is claimed.
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kernel_corpus.h"
#include "kiln/custom.h"
#include "kiln/nn.h"
#include "ops/element_access.h"
#include "random_program.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/launch_geometry.h"
#include "test_util.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"

namespace kiln {
namespace {

// Shapes large enough for several blocks per kernel, several iterations per grid-stride
// loop, rows longer than a block, and every warp of a block.
std::vector<Tensor> larger_corpus() {
  std::vector<Tensor> outs;
  for (DType dt : {DType::F32, DType::BF16}) {
    // Realized inputs, so kernels load them (lazy random inputs would fuse in as leaves).
    Tensor x = Tensor::randn({150, 300}, 11, dt).eval(), w = Tensor::rand({300}, 12, dt).eval();
    outs.push_back(relu(x * 1.5 + w) + exp(-abs(x)));
    // Vector loads through views: a bias row, a broadcast column, an offset slice.
    Tensor columns = x.slice(1, 4, 300);             // offset 4, rows 300 apart
    Tensor mean_column = mean(x, {1}, true).eval();  // [150, 1]: last stride 0
    Tensor bias_row = w.slice(0, 4, 300).eval();     // [296]: rows stride 0
    outs.push_back(columns * bias_row + mean_column);
    outs.push_back(sum(x, {1}));
    outs.push_back(sum(x * x, {0}));
    outs.push_back(max(x, {0, 1}));
    outs.push_back(argmax(x, 1));
    outs.push_back(argmin(x, 0));
    outs.push_back(mean(x, {1}, true) - x);
    outs.push_back(softmax(x));
    outs.push_back(log_softmax(x.transpose(0, 1), 1));
    outs.push_back(layer_norm(x, w, w));
    outs.push_back(rms_norm(x, w));
    outs.push_back(relu(matmul(x.slice(0, 0, 37), Tensor::randn({300, 45}, 13, dt).eval()) + 0.5));
  }
  outs.push_back(sum(Tensor::arange(5000, DType::I64).reshape({50, 100}), {0}));
  // Few outputs over long extents: split reductions, inner and outer.
  Tensor tall = Tensor::randn({6000, 3}, 15).eval();
  outs.push_back(sum(tall, {0}));
  outs.push_back(argmin(tall, 0));
  outs.push_back(max(tall, {0, 1}));
  outs.push_back(mean(tall.transpose(0, 1), {1}));
  outs.push_back(sum(Tensor::arange(9000, DType::I32).reshape({3, 3000}), {1}));
  // Tensor-core matmuls: tile edges in every dimension, broadcast batches, fused prologues.
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor a = Tensor::randn({2, 3, 70, 33}, 18, dt).eval(),
           b = Tensor::randn({3, 33, 65}, 19, dt).eval();
    outs.push_back(matmul(a, b));
    outs.push_back(gelu(matmul(relu(a) * 0.5, b.transpose(1, 2).transpose(1, 2)) - 1.0));
  }
  // A custom elementwise function (its CUDA source pasted into the kernels) fused into a
  // pointwise kernel, a reduction's prologue and a row norm's prologue.
  static const CustomElementwise softplus = define_elementwise(
      {"emulation_softplus", 1,
       "__device__ float emulation_softplus(float x) { return log1pf(expf(x)); }",
       [](int64_t n, const float* const* in, float* out) {
         for (int64_t i = 0; i < n; ++i) out[i] = std::log1p(std::exp(in[0][i]));
       }});
  Tensor z = Tensor::randn({40, 70}, 20).eval();
  outs.push_back(softplus({z}) * 2.0);
  outs.push_back(sum(softplus({z}), {1}));
  outs.push_back(softmax(softplus({z * 0.5})));
  // An outer reduction over a size-1 axis feeding a reduction of everything.
  Tensor cube = Tensor::randn({16, 1, 16}, 16).eval();
  outs.push_back(max(cube, {1}));
  outs.push_back(
      pow(abs(max(max(cube, {1}), {0, 1}) + 1.85) + 0.5, tanh(Tensor::randn({}, 17).eval())));
  // Contiguous pointwise kernels (the 16-byte path) whose sizes leave a tail.
  for (DType dt : {DType::F32, DType::BF16, DType::F64, DType::I32}) {
    Tensor y = Tensor::randn({37, 41}, 14, DType::F32).astype(dt).eval();
    outs.push_back(y * y - y + 1.0);
    outs.push_back(y.astype(DType::F16) + 0.25);
  }
  return outs;
}

struct Case {
  std::vector<Tensor> results;
  std::shared_ptr<const jit::LaunchPlan> plan;
  jit::PlanArguments args;
  std::vector<int> modules;  // per plan kernel, its module's index
  double tolerance = 0;      // that of the least precise floating value computed
  bool has_floats = false;   // whether any value was floating (integers may then round apart)
  std::string program;       // the trace dump, for failure messages
};

double tolerance(DType dt) {
  switch (dt) {
    case DType::F16:
      return 4e-3;
    case DType::BF16:
      return 2e-2;
    case DType::F32:
      return 2e-5;
    case DType::F64:
      return 1e-12;
    default:
      return 0;
  }
}

class CudaEmulationTest : public testing::ScratchDirTest {
 protected:
  // Plans `results` (still lazy) as a sync would and renders its kernels.
  void add_case(std::vector<Tensor> results) {
    Case c;
    std::vector<detail::Node*> nodes;
    nodes.reserve(results.size());
    for (const Tensor& t : results) nodes.push_back(detail::TensorAccess::node(t).get());
    jit::Trace trace = jit::build_trace(nodes);
    c.plan = jit::build_plan(trace);
    c.args = jit::arguments_of(trace);
    c.program = dump_trace(results, DumpFormat::Text);
    c.results = std::move(results);
    for (const jit::TraceNode& n : trace.nodes) {
      c.tolerance = std::max(c.tolerance, tolerance(n.type->dtype));
      c.has_floats = c.has_floats || is_floating(n.type->dtype);
    }
    for (const jit::PlannedKernel& k : c.plan->kernels) {
      const std::string source = runtime::cuda::render_cuda(*k.program);
      auto [it, added] = module_of_source_.emplace(source, static_cast<int>(modules_.size()));
      if (added) modules_.push_back({source, k.program->name});
      c.modules.push_back(it->second);
      families_.insert(k.program->anchor);
    }
    cases_.push_back(std::move(c));
  }

  // Compiles every module, runs every case with each entry point and compares every element
  // of every output with the CPU backend's.
  void run_and_compare() {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<testing::EmulatedKernels> kernels =
        testing::EmulatedKernels::build(modules_, dir_.string());
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    const auto built = std::chrono::steady_clock::now();
    int64_t checked = 0;
    for (const Case& c : cases_) {
      for (const Variant& v : testing::emulation_variants()) {
        const std::vector<std::shared_ptr<runtime::Buffer>> got =
            testing::run_emulated_plan(*kernels, *c.plan, c.args, c.modules, v);
        for (size_t o = 0; o < c.results.size(); ++o) checked += compare(c, o, *got[o], v);
      }
      if (HasFailure()) break;
    }
    const auto seconds = [](auto a, auto b) {
      return std::chrono::duration<double>(b - a).count();
    };
    std::printf(
        "cuda emulation: %zu modules (host compile %.1f s), %zu plans run 3 ways (%.1f s), "
        "%lld elements checked\n",
        modules_.size(), seconds(start, built), cases_.size(),
        seconds(built, std::chrono::steady_clock::now()), static_cast<long long>(checked));
  }

  std::set<jit::AnchorKind> families_;

 private:
  using Variant = testing::EmulationVariant;

  // Output `o` of `c` against the CPU backend; the elements compared.
  static int64_t compare(const Case& c, size_t o, const runtime::Buffer& got, const Variant& v) {
    const Tensor& t = c.results[o];
    const std::vector<double> want = testing::values(t);  // computed by the CPU backend
    const DType dt = t.dtype();
    EXPECT_EQ(got.nbytes(), static_cast<int64_t>(want.size() * dtype_size(dt)));
    if (got.nbytes() != static_cast<int64_t>(want.size() * dtype_size(dt))) return 0;
    // Sums may cancel: an error small against the output's largest value also passes.
    double magnitude = 0;
    for (double w : want)
      magnitude = std::isfinite(w) ? std::max(magnitude, std::fabs(w)) : magnitude;
    // The two devices' float math may differ in the last bit (SIMD against libm), so an
    // integer computed from floats may land one step apart; a few such elements may differ.
    const bool exact = !is_floating(dt);
    int64_t allowed = exact && c.has_floats ? 1 + static_cast<int64_t>(want.size()) / 100 : 0;
    int failures = 0;
    for (size_t i = 0; i < want.size() && failures < 3; ++i) {
      const double g = ops::load_double(got, dt, static_cast<int64_t>(i));
      const double tol = exact ? 0.0 : c.tolerance;
      ::testing::AssertionResult ok = testing::close(want[i], g, tol, /*nan_ok=*/true);
      if (!ok && std::isfinite(want[i]) && std::fabs(want[i] - g) <= tol * magnitude) {
        ok = ::testing::AssertionSuccess();
      }
      if (!ok && allowed > 0) {
        --allowed;
        continue;
      }
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "output " << o << " element " << i << " (" << dtype_name(dt) << ", "
                      << v.name() << "): " << ok.message() << "\n"
                      << c.program << c.plan->description;
      }
    }
    return static_cast<int64_t>(want.size());
  }

  std::vector<Case> cases_;
  std::vector<testing::EmulatedModule> modules_;
  std::map<std::string, int> module_of_source_;
};

TEST_F(CudaEmulationTest, EveryCorpusKernelComputesWhatTheCpuComputes) {
  for (const Tensor& t : kernel_corpus()) add_case({t});
  for (const Tensor& t : larger_corpus()) add_case({t});
  EXPECT_EQ(families_.size(), 8u);  // every anchor kind but the custom kernel
  run_and_compare();
}

// Random programs (tests/random_program.h): broadcasts, strided views, every dtype, several
// outputs per plan.
TEST_F(CudaEmulationTest, RandomProgramsComputeWhatTheCpuComputes) {
  const uint64_t base_seed = testing::test_seed();
  SCOPED_TRACE("KILN_TEST_SEED=" + std::to_string(base_seed));
  // The differential test already gives CI's NVRTC stage a sample of random kernels.
  jit::set_cuda_recording_paused(true);
  for (int p = 0; p < 200; ++p) {
    testing::ProgramGenerator generator(base_seed * 7919 + p);
    std::vector<Tensor> outputs = generator.generate(4 + p % 16);
    if (!outputs.empty()) add_case(outputs);
  }
  jit::set_cuda_recording_paused(false);
  run_and_compare();
}

}  // namespace
}  // namespace kiln
