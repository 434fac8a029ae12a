// The CUDA path without a GPU: every kernel family in every dtype is rendered to CUDA C++ and
// compiled by the real NVRTC to cubins for sm_80 and sm_90.
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/nn.h"
#include "ops/custom_functions.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/parallel_compile.h"
#include "tests/cuda/kernel_corpus.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// The distinct programs of the kernel corpus (every family and dtype).
std::vector<std::shared_ptr<const jit::KernelProgram>> corpus() {
  std::vector<Tensor> outs = kernel_corpus();
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
  // pointwise, reduce, argreduce, rownorm, scan, topk, matmul, concat, update_slice,
  // index_add, attention
  EXPECT_EQ(families.size(), 11u);
  // Compiled as a plan's kernels are: all at once on every core.
  std::vector<runtime::cuda::KernelSource> sources;
  for (const auto& p : programs) {
    sources.push_back({p->name, runtime::cuda::render_cuda(*p)});
    EXPECT_NE(sources.back().source.find("__launch_bounds__(256) " + p->name + "_i32"),
              std::string::npos)
        << sources.back().source;
  }
  int compiled = 0;
  for (int arch : {80, 90}) {
    runtime::cuda::CubinCache memory_only("", 0);
    auto cubins = runtime::cuda::compile_in_parallel(memory_only, sources, arch);
    for (size_t i = 0; i < cubins.size(); ++i) {
      if (cubins[i].ok() && cubins[i]->cubin.size() >= 100) {
        ++compiled;
        continue;
      }
      const std::string path = "/tmp/kiln_cuda_failure_" + sources[i].name + ".cu";
      std::ofstream(path) << sources[i].source;
      ADD_FAILURE() << "sm_" << arch << ": " << cubins[i].status() << "\nsource: " << path;
    }
  }
  EXPECT_EQ(compiled, static_cast<int>(2 * programs.size()));
  std::printf("cuda codegen: %zu kernels, %d cubins compiled\n", programs.size(), compiled);
}

// The launcher packs Params with kernel_args; NVRTC checks that the struct the kernel sees
// has exactly that layout, for every kernel of the corpus (and the custom kernel struct).
// static_assert is the front end's work, so NVRTC stops there (check_device_syntax): the
// cubins are EveryFamilyAndDtypeCompilesForSm80AndSm90's.
TEST(CudaCodegen, PackedParametersMatchTheStructEveryKernelDeclares) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  std::vector<std::shared_ptr<const jit::KernelProgram>> programs = corpus();
  std::vector<runtime::cuda::KernelSource> sources;
  for (const auto& program : programs) {
    const jit::KernelProgram& p = *program;
    const runtime::cuda::ParamsLayout l = runtime::cuda::params_layout(p);
    std::string source = runtime::cuda::render_cuda(p);
    absl::StrAppend(&source, "static_assert(sizeof(Params) == ", l.size, ", \"size\");\n");
    // NVRTC has no offsetof; the members' sizes in order, adding up to sizeof(Params) (so
    // there is no padding), fix every offset.
    // A kernel with gathers has two more members (kernel_args.h).
    const size_t offset_end = l.offset + 8 * static_cast<size_t>(l.views);
    const size_t ends[] = {l.out,    l.p,        l.shape,       l.stride,
                           l.offset, offset_end, l.index_error, l.size};
    const char* members[] = {"in",     "out",    "p",      "shape",
                             "stride", "offset", "gather", "index_error"};
    size_t start = 0;
    for (int m = 0; m < (l.gathers ? 8 : 6); ++m) {
      absl::StrAppend(&source, "static_assert(sizeof(((Params*)0)->", members[m],
                      ") == ", ends[m] - start, ", \"", members[m], "\");\n");
      start = ends[m];
    }
    sources.push_back({p.name, source});
  }
  for (const runtime::cuda::KernelSource& k : sources) {
    absl::Status checked = runtime::cuda::check_device_syntax(k.source, k.name, 80);
    EXPECT_TRUE(checked.ok()) << checked;
  }
  // The check fails where a size is wrong, and says which assertion.
  absl::Status wrong = runtime::cuda::check_device_syntax(
      sources.front().source + "static_assert(sizeof(Params) == 3, \"three bytes\");\n",
      sources.front().name, 80);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("three bytes"), std::string::npos) << wrong;

  // The custom kernel struct: the host packs it through a mirror struct whose offsets the
  // host compiler checks (kernel_args.cc); NVRTC checks the device sees the same sizes.
  std::string custom = ops::kCustomKernelArgsSource;
  absl::StrAppend(
      &custom, "static_assert(sizeof(KilnKernelArgs) == ", runtime::cuda::kCustomKernelArgsSize,
      ", \"size\");\n", "static_assert(sizeof(((KilnKernelArgs*)0)->in) == 64, \"in\");\n",
      "static_assert(sizeof(((KilnKernelArgs*)0)->in_shape) == 512, \"s\");\n",
      "static_assert(sizeof(((KilnKernelArgs*)0)->in_rank) == 32, \"r\");\n",
      "static_assert(sizeof(((KilnKernelArgs*)0)->out_shape) == 64, \"o\");\n");
  absl::Status custom_checked = runtime::cuda::check_device_syntax(custom, "args", 80);
  EXPECT_TRUE(custom_checked.ok()) << custom_checked.message();
}

// The packed bytes hold each value where the layout says.
TEST(CudaCodegen, PackingPutsEveryValueAtItsOffset) {
  Tensor x = Tensor::rand({3, 5}, 1), w = Tensor::rand({5}, 2);
  Tensor y = sum(exp(x * 2.0 + w).transpose(0, 1), {1});
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  for (const jit::PlannedKernel& k : plan->kernels) {
    const runtime::cuda::ParamsLayout l = runtime::cuda::params_layout(*k.program);
    std::vector<uint64_t> ins, outs;
    for (size_t i = 0; i < k.launch.inputs.size(); ++i) ins.push_back(0x1000 + i);
    for (size_t i = 0; i < k.launch.outputs.size(); ++i) outs.push_back(0x2000 + i);
    std::vector<double> params;
    for (size_t i = 0; i < k.launch.params.size(); ++i) params.push_back(0.5 + i);
    std::vector<std::byte> block =
        runtime::cuda::pack_params(*k.program, k.launch, ins, outs, params);
    ASSERT_EQ(block.size(), l.size);
    auto at = [&](size_t offset) {
      int64_t v;
      std::memcpy(&v, block.data() + offset, 8);
      return v;
    };
    for (size_t i = 0; i < ins.size(); ++i)
      EXPECT_EQ(at(l.in + 8 * i), 0x1000 + static_cast<int64_t>(i));
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(at(l.out + 8 * i), 0x2000 + static_cast<int64_t>(i));
    for (size_t i = 0; i < params.size(); ++i) {
      double d;
      std::memcpy(&d, block.data() + l.p + 8 * i, 8);
      EXPECT_EQ(d, 0.5 + i);
    }
    for (size_t s = 0; s < k.launch.spaces.size(); ++s) {
      for (size_t d = 0; d < k.launch.spaces[s].size(); ++d) {
        EXPECT_EQ(at(l.shape + 8 * (s * l.rank + d)), k.launch.spaces[s][d]);
      }
    }
    for (size_t v = 0; v < k.launch.views.size(); ++v) {
      for (size_t d = 0; d < k.launch.views[v].strides.size(); ++d) {
        EXPECT_EQ(at(l.stride + 8 * (v * l.rank + d)), k.launch.views[v].strides[d]);
      }
      EXPECT_EQ(at(l.offset + 8 * v), k.launch.views[v].offset);
    }
    EXPECT_TRUE(runtime::cuda::fits_32bit_index(k.launch, {15, 5, 5}));
    EXPECT_FALSE(runtime::cuda::fits_32bit_index(k.launch, {int64_t{1} << 31}));
    // Just under 2^31 is still refused: a grid-stride counter stepping past the end must
    // not wrap a 32-bit index.
    EXPECT_FALSE(runtime::cuda::fits_32bit_index(k.launch, {(int64_t{1} << 31) - 1000}));
    EXPECT_TRUE(runtime::cuda::fits_32bit_index(k.launch, {int64_t{1} << 30}));
  }
}

// The PTX of the one kernel `t`'s plan runs.
std::string kernel_ptx(const Tensor& t) {
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(t).get()});
  std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  EXPECT_EQ(plan->kernels.size(), 1u);
  const jit::KernelProgram& p = *plan->kernels[0].program;
  absl::StatusOr<std::string> ptx =
      runtime::cuda::compile_to_ptx(runtime::cuda::render_cuda(p), p.name, 90);
  EXPECT_TRUE(ptx.ok()) << ptx.status();
  return ptx.value_or("");
}

// What the compiled code does, not just that it compiles: a pointwise kernel moves 16 bytes
// per load and store (f32 and bf16 alike, a broadcast bias row too); one with an index leaf
// (rand) cannot.
TEST(CudaCodegen, PointwiseKernelsMoveSixteenBytesPerAccess) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor x = Tensor::randn({64, 64}, 1, dt).eval(), w = Tensor::randn({64}, 2, dt).eval();
    for (const Tensor& t : {relu(x * 2.0 + 1.0), x + w}) {
      const std::string ptx = kernel_ptx(t);
      EXPECT_NE(ptx.find("ld.global.v4"), std::string::npos) << dtype_name(dt) << "\n" << ptx;
      EXPECT_NE(ptx.find("st.global.v4"), std::string::npos) << dtype_name(dt);
    }
  }
  EXPECT_EQ(kernel_ptx(Tensor::rand({64, 64}, 3) * 2.0).find("st.global.v4"), std::string::npos);
}

// The backend compiles only the entry point a launch needs; each alone is a whole module.
TEST(CudaCodegen, EachIndexWidthCompilesAlone) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  Tensor x = Tensor::randn({8, 8}, 1).eval();
  const Tensor y = softmax(x) * 2.0;  // the trace points into its nodes: keep them alive
  jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  const std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
  const jit::KernelProgram& p = *plan->kernels[0].program;
  for (bool wide : {false, true}) {
    const std::string source = runtime::cuda::render_cuda(
        p, wide ? runtime::cuda::IndexWidths::k64 : runtime::cuda::IndexWidths::k32);
    EXPECT_NE(source.find(runtime::cuda::entry_name(p, wide) + "("), std::string::npos);
    EXPECT_EQ(source.find(runtime::cuda::entry_name(p, !wide) + "("), std::string::npos);
    absl::StatusOr<std::string> cubin =
        runtime::cuda::compile_to_cubin(source, runtime::cuda::entry_name(p, wide), 90);
    EXPECT_TRUE(cubin.ok()) << cubin.status();
  }
}

// f16 and bf16 matmuls (with their fused epilogue) run on tensor cores; f32 does not (the
// choice docs/cuda.md records: no silent TF32).
TEST(CudaCodegen, SixteenBitMatmulsUseTensorCores) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor a = Tensor::randn({96, 40}, 1, dt).eval(), b = Tensor::randn({40, 72}, 2, dt).eval();
    const std::string ptx = kernel_ptx(relu(matmul(a, b) + 1.0));
    EXPECT_NE(ptx.find(absl::StrCat("mma.sync.aligned.m16n8k16.row.col.f32.", dtype_name(dt), ".",
                                    dtype_name(dt), ".f32")),
              std::string::npos)
        << dtype_name(dt);
  }
  Tensor a = Tensor::randn({96, 40}, 1).eval(), b = Tensor::randn({40, 72}, 2).eval();
  EXPECT_EQ(kernel_ptx(matmul(a, b)).find("mma.sync"), std::string::npos);
}

// Attention in f16 and bf16 multiplies Q Kᵀ and P V on tensor cores, written or matched, and
// keeps everything in registers and shared memory (no local memory: no spilled fragments).
TEST(CudaCodegen, SixteenBitAttentionUsesTensorCoresWithoutLocalMemory) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor q = Tensor::randn({1, 4, 96, 64}, 1, dt).eval();
    Tensor k = Tensor::randn({1, 2, 80, 64}, 2, dt).eval();
    Tensor v = Tensor::randn({1, 2, 80, 64}, 3, dt).eval();
    Tensor h = Tensor::randn({4, 80, 64}, 4, dt).eval();
    const Tensor written = matmul(softmax(matmul(h, h.transpose(-2, -1)) * 0.125, -1), h);
    for (const Tensor& t : {scaled_dot_product_attention(q, k, v, Tensor(), true), written}) {
      const std::string ptx = kernel_ptx(t);
      EXPECT_NE(ptx.find(absl::StrCat("mma.sync.aligned.m16n8k16.row.col.f32.", dtype_name(dt), ".",
                                      dtype_name(dt), ".f32")),
                std::string::npos)
          << dtype_name(dt);
      EXPECT_EQ(ptx.find("ld.local"), std::string::npos) << dtype_name(dt);
      EXPECT_EQ(ptx.find("st.local"), std::string::npos) << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace kiln
