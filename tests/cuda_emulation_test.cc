// Every generated CUDA kernel of the corpus, run on the host through the CUDA execution model
// of tests/cuda_emulation: the same source NVRTC compiles (the PTX conversions aside), the
// same packed Params, the same grid and block sizes as the CUDA backend, with both the 32-
// and the 64-bit entry points. Each result is compared element by element with the CPU
// backend, into outputs poisoned beforehand. No GPU is needed; none is claimed.
#include <chrono>
#include <cstring>
#include <set>

#include "jit/launch_plan.h"
#include "jit/trace.h"
#include "kernel_corpus.h"
#include "kiln/nn.h"
#include "ops/element_access.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/launch_geometry.h"
#include "test_util.h"
#include "tests/cuda_emulation/emulated_kernels.h"

namespace kiln {
namespace {

// The emulated GPU's SM count: small, so grid-stride loops and the block cap are exercised.
constexpr int kEmulatedSms = 2;

// Shapes large enough for several blocks per kernel, several iterations per grid-stride
// loop, rows longer than a block, and every warp of a block.
std::vector<Tensor> larger_corpus() {
  std::vector<Tensor> outs;
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor x = Tensor::randn({150, 300}, 11, dt), w = Tensor::rand({300}, 12, dt);
    outs.push_back(relu(x * 1.5 + w) + exp(-abs(x)));
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
    outs.push_back(relu(matmul(x.slice(0, 0, 37), Tensor::randn({300, 45}, 13, dt)) + 0.5));
  }
  outs.push_back(sum(Tensor::arange(5000, DType::I64).reshape({50, 100}), {0}));
  return outs;
}

struct Case {
  Tensor result;
  std::shared_ptr<const jit::LaunchPlan> plan;
  jit::PlanArguments args;
  std::vector<int> modules;  // per plan kernel, its module's index
};

class CudaEmulationTest : public testing::ScratchDirTest {
 protected:
  // Runs `c`'s plan through the emulated kernels; returns the output's buffer.
  std::shared_ptr<runtime::Buffer> run_plan(const testing::EmulatedKernels& kernels, const Case& c,
                                            bool wide) const {
    std::map<int, std::shared_ptr<runtime::Buffer>> buffers;
    for (size_t slot = 0; slot < c.plan->input_nodes.size(); ++slot) {
      buffers[c.plan->input_nodes[slot]] = c.args.inputs[slot];
    }
    for (size_t k = 0; k < c.plan->kernels.size(); ++k) {
      const jit::PlannedKernel& pk = c.plan->kernels[k];
      std::vector<uint64_t> ins, outs;
      for (int n : pk.launch.inputs)
        ins.push_back(reinterpret_cast<uint64_t>(buffers.at(n)->data()));
      for (int n : pk.launch.outputs) {
        auto b = std::make_shared<runtime::Buffer>(c.plan->node_bytes[n]);
        std::memset(b->data(), 0xff, static_cast<size_t>(b->nbytes()));  // poison
        outs.push_back(reinterpret_cast<uint64_t>(b->data()));
        buffers[n] = b;
      }
      std::vector<double> params;
      for (int p : pk.launch.params) params.push_back(c.args.params[p]);
      std::vector<std::byte> block =
          runtime::cuda::pack_params(*pk.program, pk.launch, ins, outs, params);
      kernels.launch(c.modules[k], wide, block.data(),
                     runtime::cuda::grid_size(*pk.program, pk.launch, kEmulatedSms),
                     runtime::cuda::block_size(*pk.program));
    }
    return buffers.at(c.plan->outputs[0]);
  }
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

TEST_F(CudaEmulationTest, EveryCorpusKernelComputesWhatTheCpuComputes) {
  std::vector<Tensor> results = kernel_corpus();
  for (Tensor& t : larger_corpus()) results.push_back(t);
  std::vector<Case> cases;
  std::vector<testing::EmulatedModule> modules;
  std::map<std::string, int> module_of_source;
  std::set<jit::AnchorKind> families;
  for (const Tensor& t : results) {
    Case c;
    c.result = t;
    jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
    c.plan = jit::build_plan(trace);
    c.args = jit::arguments_of(trace);
    for (const jit::PlannedKernel& k : c.plan->kernels) {
      const std::string source = runtime::cuda::render_cuda(*k.program);
      auto [it, added] = module_of_source.emplace(source, static_cast<int>(modules.size()));
      if (added) modules.push_back({source, k.program->name});
      c.modules.push_back(it->second);
      families.insert(k.program->anchor);
    }
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(families.size(), 6u);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  const auto built = std::chrono::steady_clock::now();

  int checked = 0;
  for (const Case& c : cases) {
    const std::vector<double> want = testing::values(c.result);  // the CPU backend
    const DType dt = c.result.dtype();
    for (bool wide : {false, true}) {
      std::shared_ptr<runtime::Buffer> got = run_plan(*kernels, c, wide);
      ASSERT_EQ(got->nbytes(), static_cast<int64_t>(want.size() * dtype_size(dt)));
      int failures = 0;
      for (size_t i = 0; i < want.size() && failures < 5; ++i) {
        const double g = ops::load_double(*got, dt, static_cast<int64_t>(i));
        ::testing::AssertionResult ok = testing::close(want[i], g, tolerance(dt), /*nan_ok=*/true);
        if (!ok) {
          ++failures;
          ADD_FAILURE() << "element " << i << " of " << dtype_name(dt) << " result ("
                        << (wide ? "i64" : "i32") << " entry): " << ok.message() << "\n"
                        << c.plan->description;
        }
        ++checked;
      }
    }
  }
  const auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf(
      "cuda emulation: %zu modules (host compile %.1f s), %zu plans run twice (%.1f s), "
      "%d elements checked\n",
      modules.size(), seconds(start, built), cases.size(),
      seconds(built, std::chrono::steady_clock::now()), checked);
}

}  // namespace
}  // namespace kiln
