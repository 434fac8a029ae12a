// cuBLASLt for matmuls (runtime/cuda/cublaslt*.h), on machines without a GPU:
//  - the library: found and every entry point resolved where the toolkit is installed, a
//    missing one named, and Kiln's declarations pinned to the real cublasLt.h;
//  - which matmul kernels it takes: real plans, asked through cublaslt_gemm;
//  - the choice on a device, run by the backend against the emulated driver: a missing
//    library, a cublasLtCreate that fails (the real library without a GPU), KILN_CUBLASLT=0,
//    and a stand-in cuBLASLt that computes on the emulated device memory by cuBLASLt's
//    documented column-major rules, so the call Kiln makes is checked element by element;
//  - the plan dump's words.
#include "runtime/cuda/cublaslt.h"

#include <dlfcn.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/debug.h"
#include "kiln/nn.h"
#include "ops/element_access.h"
#include "runtime/cuda/cublaslt_gemm.h"
#include "runtime/cuda/cublaslt_matmul.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/cuda_emulation/emulated_driver.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/test_util.h"

#ifdef KILN_CUBLASLT_HEADER
#include KILN_CUBLASLT_HEADER
#endif

namespace kiln {
namespace {

using runtime::cuda::CublasLtApi;
using runtime::cuda::CublasLtGemm;

using kiln::testing::ScopedEnv;

// ---------------------------------------------------------------------------------------
// The library.

TEST(CublasLtLibrary, IsFoundAndEveryEntryPointResolves) {
  std::optional<ScopedEnv> no_override;
  if (std::getenv("KILN_CUBLASLT_LIBRARY") != nullptr)
    no_override.emplace("KILN_CUBLASLT_LIBRARY", "");
  const CublasLtApi api =
      runtime::cuda::load_cublaslt_api(runtime::cuda::cublaslt_library_candidates());
  if (!api.status.ok() && api.status.message().find(" lacks ") == std::string::npos) {
    GTEST_SKIP() << "libcublasLt is not installed here, so nothing was loaded: "
                 << api.status.message();
  }
  ASSERT_TRUE(api.status.ok()) << api.status.message();
  EXPECT_NE(api.matmul, nullptr);
  EXPECT_NE(api.algo_get_heuristic, nullptr);
  EXPECT_GE(api.get_version(), size_t{110000}) << "cuBLASLt 11 or later";
  std::printf("[ loaded   ] %s, cuBLASLt version %zu\n", api.library.c_str(), api.get_version());
}

TEST(CublasLtLibrary, AMissingLibraryIsNamedAndLoadsNothing) {
  const CublasLtApi api = runtime::cuda::load_cublaslt_api({"/nonexistent/libcublasLt.so.13"});
  EXPECT_FALSE(api.status.ok());
  EXPECT_NE(api.status.message().find("/nonexistent/libcublasLt.so.13"), std::string::npos)
      << api.status.message();
  EXPECT_EQ(api.create, nullptr);
}

// A file that loads but is not cuBLASLt (here libbz2) is closed, and the next one tried.
TEST(CublasLtLibrary, AFileLackingAnEntryPointIsClosedAndTheNextOneTried) {
  constexpr const char* kNotCublasLt = "libbz2.so.1";
  void* probe = dlopen(kNotCublasLt, RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) GTEST_SKIP() << kNotCublasLt << " is not installed here";
  dlclose(probe);
  const bool loaded_elsewhere = dlopen(kNotCublasLt, RTLD_NOW | RTLD_NOLOAD) != nullptr;
  const CublasLtApi alone = runtime::cuda::load_cublaslt_api({kNotCublasLt});
  EXPECT_FALSE(alone.status.ok());
  EXPECT_NE(alone.status.message().find("libbz2.so.1 lacks cublasLtGetVersion"), std::string::npos)
      << alone.status.message();
  EXPECT_EQ(alone.create, nullptr);
  if (!loaded_elsewhere) {
    EXPECT_EQ(dlopen(kNotCublasLt, RTLD_NOW | RTLD_NOLOAD), nullptr) << "its handle was kept";
  }
  std::optional<ScopedEnv> no_override;
  if (std::getenv("KILN_CUBLASLT_LIBRARY") != nullptr)
    no_override.emplace("KILN_CUBLASLT_LIBRARY", "");
  std::vector<std::string> candidates = runtime::cuda::cublaslt_library_candidates();
  if (runtime::cuda::load_cublaslt_api(candidates).status.ok()) {
    candidates.insert(candidates.begin(), kNotCublasLt);
    const CublasLtApi api = runtime::cuda::load_cublaslt_api(candidates);
    EXPECT_TRUE(api.status.ok()) << api.status.message();
    EXPECT_NE(api.library, kNotCublasLt);
    EXPECT_NE(api.matmul, nullptr);
  }
}

TEST(CublasLtLibrary, KilnCublasltLibraryIsTheOnlyFileTried) {
  ScopedEnv env("KILN_CUBLASLT_LIBRARY", "/nonexistent");
  EXPECT_EQ(runtime::cuda::cublaslt_library_candidates(), std::vector<std::string>{"/nonexistent"});
}

TEST(CublasLtLibrary, KilnCublasltZeroDisablesIt) {
  {
    ScopedEnv env("KILN_CUBLASLT", "0");
    EXPECT_TRUE(runtime::cuda::cublaslt_disabled_by_environment());
  }
  ScopedEnv env("KILN_CUBLASLT", "1");
  EXPECT_FALSE(runtime::cuda::cublaslt_disabled_by_environment());
}

#ifdef KILN_CUBLASLT_HEADER
namespace rc = runtime::cuda;
// Every value and layout Kiln declares, against the toolkit's own header.
static_assert(rc::kCublasStatusSuccess == CUBLAS_STATUS_SUCCESS);
static_assert(rc::kCublasStatusNotInitialized == CUBLAS_STATUS_NOT_INITIALIZED);
static_assert(rc::kCublasStatusNotSupported == CUBLAS_STATUS_NOT_SUPPORTED);
static_assert(rc::kCublasStatusInvalidValue == CUBLAS_STATUS_INVALID_VALUE);
static_assert(rc::kPreferenceReductionSchemeMask == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK);
static_assert(rc::kReductionSchemeComputeType == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
static_assert(sizeof(rc::CublasStatus) == sizeof(cublasStatus_t));
static_assert(rc::kCublasCompute32F == CUBLAS_COMPUTE_32F);
static_assert(rc::kCudaR32F == CUDA_R_32F && rc::kCudaR16F == CUDA_R_16F &&
              rc::kCudaR16BF == CUDA_R_16BF);
static_assert(rc::kCublasOpN == CUBLAS_OP_N && rc::kCublasOpT == CUBLAS_OP_T);
static_assert(rc::kMatmulDescTransA == CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(rc::kMatmulDescTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(rc::kMatmulDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE);
static_assert(rc::kMatmulDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(rc::kEpilogueDefault == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(rc::kEpilogueRelu == CUBLASLT_EPILOGUE_RELU);
static_assert(rc::kEpilogueBias == CUBLASLT_EPILOGUE_BIAS);
static_assert(rc::kEpilogueReluBias == CUBLASLT_EPILOGUE_RELU_BIAS);
static_assert(rc::kEpilogueGelu == CUBLASLT_EPILOGUE_GELU);
static_assert(rc::kEpilogueGeluBias == CUBLASLT_EPILOGUE_GELU_BIAS);
static_assert(rc::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
static_assert(rc::kLayoutStridedBatchOffset == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(rc::kPreferenceMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(rc::kPreferenceMinAlignmentABytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
static_assert(rc::kPreferenceMinAlignmentBBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(rc::kPreferenceMinAlignmentCBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
static_assert(rc::kPreferenceMinAlignmentDBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sizeof(rc::CublasLtMatrixLayoutOpaque) == sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(rc::CublasLtMatmulDescOpaque) == sizeof(cublasLtMatmulDescOpaque_t));
static_assert(sizeof(rc::CublasLtMatmulPreferenceOpaque) ==
              sizeof(cublasLtMatmulPreferenceOpaque_t));
static_assert(sizeof(rc::CublasLtMatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(rc::CublasLtHeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(rc::CublasLtHeuristicResult, workspace_size) ==
              offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
static_assert(offsetof(rc::CublasLtHeuristicResult, state) ==
              offsetof(cublasLtMatmulHeuristicResult_t, state));
static_assert(offsetof(rc::CublasLtHeuristicResult, waves_count) ==
              offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));
// The entry points' parameter and result types, one by one (Kiln's opaque pointers stand for
// cuBLASLt's, so those compare by size).
template <class R1, class R2, class... A1, class... A2>
constexpr bool same_abi(R1 (*)(A1...), R2 (*)(A2...)) {
  return sizeof(R1) == sizeof(R2) && sizeof...(A1) == sizeof...(A2) &&
         ((sizeof(A1) == sizeof(A2) && std::is_pointer_v<A1> == std::is_pointer_v<A2>)&&...);
}
static_assert(same_abi(decltype(rc::CublasLtApi::matmul){}, &cublasLtMatmul));
static_assert(same_abi(decltype(rc::CublasLtApi::algo_get_heuristic){},
                       &cublasLtMatmulAlgoGetHeuristic));
static_assert(same_abi(decltype(rc::CublasLtApi::matrix_layout_create){},
                       &cublasLtMatrixLayoutCreate));
static_assert(same_abi(decltype(rc::CublasLtApi::matmul_desc_create){}, &cublasLtMatmulDescCreate));
static_assert(same_abi(decltype(rc::CublasLtApi::matmul_desc_set_attribute){},
                       &cublasLtMatmulDescSetAttribute));
static_assert(same_abi(decltype(rc::CublasLtApi::matrix_layout_set_attribute){},
                       &cublasLtMatrixLayoutSetAttribute));
static_assert(same_abi(decltype(rc::CublasLtApi::preference_set_attribute){},
                       &cublasLtMatmulPreferenceSetAttribute));
static_assert(same_abi(decltype(rc::CublasLtApi::create){}, &cublasLtCreate));
static_assert(same_abi(decltype(rc::CublasLtApi::destroy){}, &cublasLtDestroy));
static_assert(same_abi(decltype(rc::CublasLtApi::get_version){}, &cublasLtGetVersion));
static_assert(same_abi(decltype(rc::CublasLtApi::matmul_desc_destroy){},
                       &cublasLtMatmulDescDestroy));
static_assert(same_abi(decltype(rc::CublasLtApi::matrix_layout_destroy){},
                       &cublasLtMatrixLayoutDestroy));
static_assert(same_abi(decltype(rc::CublasLtApi::preference_create){},
                       &cublasLtMatmulPreferenceCreate));
static_assert(same_abi(decltype(rc::CublasLtApi::preference_destroy){},
                       &cublasLtMatmulPreferenceDestroy));
static_assert(same_abi(decltype(rc::CublasLtApi::status_name){}, &cublasLtGetStatusName));
#endif

TEST(CublasLtDeclarations, ArePinnedToTheToolkitsHeader) {
#ifdef KILN_CUBLASLT_HEADER
  std::printf("[ pinned   ] against %s\n", KILN_CUBLASLT_HEADER);
#else
  GTEST_SKIP() << "CMake found no cublasLt.h: Kiln's declarations were not checked";
#endif
}

// ---------------------------------------------------------------------------------------
// Which matmul kernels cuBLASLt takes.

// The plan a sync of `y` would run, with its arguments.
struct Planned {
  std::shared_ptr<const jit::LaunchPlan> plan;
  jit::PlanArguments args;
  const jit::PlannedKernel* matmul = nullptr;  // its matmul kernel
};

Planned plan_of(const Tensor& y) {
  const jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
  Planned p{jit::build_plan(trace), jit::arguments_of(trace)};
  for (const jit::PlannedKernel& k : p.plan->kernels) {
    if (k.program->anchor == jit::AnchorKind::kMatmul) p.matmul = &k;
  }
  return p;
}

absl::StatusOr<CublasLtGemm> gemm_of(const Planned& p) {
  if (p.matmul == nullptr) return absl::NotFoundError("no matmul kernel");
  return runtime::cuda::cublaslt_gemm(*p.matmul->program, p.matmul->launch);
}

// Asks cublaslt_gemm about `y`'s matmul kernel, which must not be taken, for `why`.
void expect_not_taken(const Tensor& y, const std::string& why) {
  const Planned p = plan_of(y);
  ASSERT_NE(p.matmul, nullptr) << p.plan->description;
  const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
  ASSERT_FALSE(g.ok()) << g->summary() << "\n" << p.matmul->program->to_string();
  EXPECT_NE(g.status().message().find(why), std::string::npos) << g.status().message() << "\n"
                                                               << p.matmul->program->to_string();
}

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dt = DType::F32) {
  return Tensor::randn(std::move(shape), seed, dt).eval();
}

// A vector operand drops its dimension from the product (numpy's rule), batched or not: the
// generated kernel computes these (asking once read past the product's batch dimensions).
TEST(CublasLtEligibility, AVectorOperandIsLeftToTheGeneratedKernel) {
  expect_not_taken(matmul(randn({3, 4}, 40), randn({4}, 41)), "operand b is a vector");
  expect_not_taken(matmul(randn({4}, 42), randn({4, 5}, 43)), "operand a is a vector");
  expect_not_taken(matmul(randn({2, 3, 4}, 44), randn({4}, 45)), "operand b is a vector");
  expect_not_taken(matmul(randn({4}, 46), randn({2, 4, 5}, 47)), "operand a is a vector");
}

TEST(CublasLtEligibility, ReluOfMatmulPlusBiasIsOneCallWithTheReluBiasEpilogue) {
  const Tensor x = randn({5, 16}, 1), w = randn({16, 8}, 2), b = randn({8}, 3);
  const Planned p = plan_of(relu(matmul(x, w) + b));
  ASSERT_EQ(p.plan->kernels.size(), 1u) << p.plan->description;
  const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << p.matmul->program->to_string();
  EXPECT_EQ(g->epilogue, runtime::cuda::kEpilogueReluBias);
  // Dᵀ = wᵀ xᵀ: cuBLASLt's A is w (8 x 16 column-major, no op), its B is x (16 x 5).
  EXPECT_EQ(g->m, 8u);
  EXPECT_EQ(g->n, 5u);
  EXPECT_EQ(g->k, 16u);
  EXPECT_EQ(g->batches, 1);
  EXPECT_FALSE(g->a.transposed);
  EXPECT_EQ(g->a.rows, 8u);
  EXPECT_EQ(g->a.cols, 16u);
  EXPECT_EQ(g->a.ld, 8);
  EXPECT_FALSE(g->b.transposed);
  EXPECT_EQ(g->b.rows, 16u);
  EXPECT_EQ(g->b.ld, 16);
  EXPECT_GE(g->bias_input, 0);
  EXPECT_EQ(g->output_dtype, DType::F32);
  EXPECT_EQ(g->summary(), "RELU_BIAS, f32 -> f32, M 5 N 8 K 16, 1 batch");
}

TEST(CublasLtEligibility, LinearOverABatchFoldsTheBatchIntoOneGemmWithATransposedWeight) {
  const Tensor x = randn({2, 3, 16}, 4, DType::F16), w = randn({8, 16}, 5, DType::F16),
               b = randn({8}, 6, DType::F16);
  const Planned p = plan_of(linear(x, w, b));
  const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << p.matmul->program->to_string();
  EXPECT_EQ(g->epilogue, runtime::cuda::kEpilogueBias);
  EXPECT_TRUE(g->a.transposed) << "w is [N, K]: wᵀ is read transposed";
  EXPECT_EQ(g->a.ld, 16);
  EXPECT_EQ(g->n, 6u) << "the 2 x 3 rows of x are one matrix";
  EXPECT_EQ(g->batches, 1);
  EXPECT_EQ(g->output_dtype, DType::F16);
}

TEST(CublasLtEligibility, BatchedOperandsKeepTheirBatchStrides) {
  const Tensor a = randn({3, 4, 16}, 7, DType::BF16), b = randn({3, 16, 8}, 8, DType::BF16);
  const Planned p = plan_of(matmul(a, b).astype(DType::F32));
  const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << p.matmul->program->to_string();
  EXPECT_EQ(g->epilogue, runtime::cuda::kEpilogueDefault);
  EXPECT_EQ(g->batches, 3);
  EXPECT_EQ(g->a.batch_stride, 16 * 8);
  EXPECT_EQ(g->b.batch_stride, 4 * 16);
  EXPECT_EQ(g->output_dtype, DType::F32) << "a cast of a bf16 product to f32 is cuBLASLt's D";
}

TEST(CublasLtEligibility, APrologueIsNotTaken) {
  const Tensor x = randn({5, 16}, 9), w = randn({16, 8}, 10);
  expect_not_taken(matmul(exp(x), w), "operand a has a prologue");
}

TEST(CublasLtEligibility, AnUnsupportedEpilogueIsNotTakenAndNamed) {
  const Tensor x = randn({5, 16}, 11), w = randn({16, 8}, 12);
  expect_not_taken(sin(matmul(x, w)), "epilogue not supported: sin");
}

TEST(CublasLtEligibility, ExactGeluIsNotTheTanhFormCublasLtHas) {
  const Tensor x = randn({5, 16}, 13), w = randn({16, 8}, 14), b = randn({8}, 15);
  expect_not_taken(gelu(matmul(x, w) + b), "gelu");
}

TEST(CublasLtEligibility, ABiasAlongTheRowsIsNotTaken) {
  const Tensor x = randn({5, 16}, 16), w = randn({16, 8}, 17), c = randn({5, 1}, 18);
  expect_not_taken(matmul(x, w) + c, "the bias is not a vector along the last dim");
}

TEST(CublasLtEligibility, OtherShapesDtypesAndOrdersAreNotTaken) {
  const Tensor x = randn({5, 16}, 19), w = randn({16, 8}, 20), b = randn({8}, 21);
  expect_not_taken(relu(matmul(x, w)) + b, "a bias added after the relu");
  expect_not_taken(matmul(x, w) * 2.0, "scalar parameter");
  expect_not_taken(matmul(x.astype(DType::F64), w), "operand a has a prologue");  // the cast
  expect_not_taken(matmul(randn({5, 16}, 24, DType::F64), randn({16, 8}, 25, DType::F64)),
                   "operand a is f64");
  expect_not_taken(matmul(randn({3, 4, 16}, 22), randn({2, 1, 16, 8}, 23)), "evenly spaced");
  // One product (the two are one node) read twice: not a chain of single readers.
  expect_not_taken(matmul(x, w) + matmul(x, w), "a value is used more than once");
}

// cuBLASLt keeps f32 through the epilogue and rounds once, into D: a cast that rounds before
// that would be lost, so only widening casts, and a narrowing one last, are taken.
TEST(CublasLtEligibility, ANarrowingCastIsTakenOnlyAsTheLastStepIntoTheOutput) {
  const Tensor x = randn({5, 16}, 60), w = randn({16, 8}, 61), b = randn({8}, 62);
  const Tensor x16 = randn({5, 16}, 63, DType::F16), w16 = randn({16, 8}, 64, DType::F16),
               b16 = randn({8}, 65, DType::F16);
  // Refused: a rounding to f16 (or bf16) that cuBLASLt would skip.
  expect_not_taken(matmul(x, w).astype(DType::F16).astype(DType::F32),
                   "a narrowing cast from f32 to f16 before the end");
  expect_not_taken(matmul(x16, w16).astype(DType::BF16).astype(DType::F32),
                   "a narrowing cast from f16 to bf16 before the end");
  expect_not_taken(matmul(x, w) + b.astype(DType::F16).astype(DType::F32),
                   "the bias is cast from f32 to f16 before the add");
  // Taken: widening anywhere, and the last cast from f32 into the output's dtype.
  for (const Tensor& y :
       {matmul(x16, w16).astype(DType::F32).astype(DType::F16),
        relu(matmul(x16, w16).astype(DType::F32) + b16.astype(DType::F32)).astype(DType::F16),
        matmul(x16, w16).astype(DType::F32)}) {
    const Planned p = plan_of(y);
    const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << p.matmul->program->to_string();
    EXPECT_EQ(g->output_dtype, y.dtype());
  }
  const absl::StatusOr<CublasLtGemm> g = gemm_of(plan_of(
      relu(matmul(x16, w16).astype(DType::F32) + b16.astype(DType::F32)).astype(DType::F16)));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->epilogue, runtime::cuda::kEpilogueReluBias) << "an f16 bias, widened: f16 in D";
}

// ---------------------------------------------------------------------------------------
// The choice on a device, against the emulated driver.

constexpr int kGpu = 0;  // shared with cuda_backend_test: nothing here changes the GPU

// Every element of `got` (a result of `p`'s plan) against `want`, computed by the CPU.
void expect_matches_cpu(const Tensor& want, const base::Buffer& got, double tol) {
  const std::vector<double> values = testing::values(want);
  ASSERT_EQ(got.nbytes(), static_cast<int64_t>(values.size() * dtype_size(want.dtype())));
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_TRUE(testing::close(values[i],
                               ops::load_double(got, want.dtype(), static_cast<int64_t>(i)), tol))
        << "element " << i;
  }
}

class CublasLtOnEmulatedDriver : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    testing::ScratchDirTest::SetUp();
    if (default_device().type != DeviceType::CPU) {
      GTEST_SKIP() << "a real GPU runs the backend itself (scripts/gpu-check.sh)";
    }
    if (runtime::cuda::cublaslt_disabled_by_environment()) {
      GTEST_SKIP() << "KILN_CUBLASLT=0 is set for this run: every GPU chooses the generated "
                      "kernel, so the choice is not tested";
    }
    ASSERT_TRUE(runtime::cuda::nvrtc_available().ok()) << runtime::cuda::nvrtc_available();
    runtime::cuda::set_driver_api_for_testing(&driver_.api());
    gpu_ = runtime::cuda::make_cuda_backend(kGpu);
  }
  void TearDown() override {
    gpu_.reset();
    runtime::cuda::set_cublaslt_api_for_testing(nullptr);
    runtime::cuda::set_driver_api_for_testing(nullptr);
    testing::ScratchDirTest::TearDown();
  }

  // The emulated driver runs no kernel: the generated kernel of `p` (a plan of that one
  // kernel) runs in the kernel emulation, with the backend's packed arguments and launch
  // schedule, and every element of its result must match `want`, computed by the CPU.
  void expect_generated_kernel_matches_cpu(const Planned& p, const Tensor& want) {
    absl::StatusOr<testing::EmulatedKernels> kernels = testing::EmulatedKernels::build(
        {testing::emulated_module(*p.matmul->program)}, dir_.string());
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    ASSERT_EQ(p.plan->kernels.size(), 1u);
    const std::vector<std::shared_ptr<base::Buffer>> out = testing::run_emulated_plan(
        *kernels, *p.plan, p.args, {0}, testing::emulation_variants()[0]);
    expect_matches_cpu(want, *out[0], 2e-5);
  }

  // Whether the generated kernel of `p`'s matmul was launched since launch `from`.
  bool generated_kernel_launched(const Planned& p, size_t from) const {
    const std::string entry = runtime::cuda::entry_name(*p.matmul->program, /*wide=*/false);
    const std::vector<testing::EmulatedLaunch> launches = driver_.launches();
    for (size_t i = from; i < launches.size(); ++i) {
      if (launches[i].function == entry) return true;
    }
    return false;
  }

  testing::EmulatedDriver& driver_ = testing::EmulatedDriver::get();
  std::unique_ptr<jit::Backend> gpu_;
};

TEST_F(CublasLtOnEmulatedDriver, AMissingLibraryFallsBackToTheGeneratedKernelWhichMatchesTheCpu) {
  std::optional<CublasLtApi> missing;
  {
    ScopedEnv env("KILN_CUBLASLT_LIBRARY", "/nonexistent");
    missing = runtime::cuda::load_cublaslt_api(runtime::cuda::cublaslt_library_candidates());
  }
  runtime::cuda::set_cublaslt_api_for_testing(&*missing);
  const Tensor x = randn({37, 70}, 30), w = randn({70, 45}, 31), b = randn({45}, 32);
  const Tensor y = relu(matmul(x, w) + b);
  const Planned p = plan_of(y);
  ASSERT_TRUE(gemm_of(p).ok()) << "a matmul cuBLASLt would take, were it there";
  EXPECT_NE(gpu_->describe_plan(*p.plan).find(
                "generated kernel (cuBLASLt library missing: cuBLASLt not found (tried "
                "/nonexistent: cannot open shared object file"),
            std::string::npos)
      << gpu_->describe_plan(*p.plan);
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_TRUE(generated_kernel_launched(p, before));
  expect_generated_kernel_matches_cpu(p, y);
}

TEST_F(CublasLtOnEmulatedDriver, WithoutAGpuCublasLtCreateFailsAndTheReasonIsKept) {
  const CublasLtApi& real = runtime::cuda::cublaslt_api();
  if (!real.status.ok() && real.library.empty()) {
    GTEST_SKIP() << "libcublasLt is not installed here, so cublasLtCreate was not tried: "
                 << real.status.message();
  }
  ASSERT_TRUE(real.status.ok()) << real.status.message();
  const Tensor x = randn({5, 16}, 33), w = randn({16, 8}, 34), b = randn({8}, 35);
  const Planned p = plan_of(relu(matmul(x, w) + b));
  const std::string dump = gpu_->describe_plan(*p.plan);
  std::printf("[ dump     ] %s", dump.c_str());
  EXPECT_NE(dump.find("generated kernel (cuBLASLt unusable on cuda:0: cublasLtCreate failed: "),
            std::string::npos)
      << dump;
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_TRUE(generated_kernel_launched(p, before));
}

TEST_F(CublasLtOnEmulatedDriver, ThePlanDumpNamesAnUnsupportedEpilogueAndOnlyMatmuls) {
  const Tensor x = randn({5, 16}, 36), w = randn({16, 8}, 37);
  const Planned p = plan_of(sin(matmul(x, w)));
  EXPECT_EQ(gpu_->describe_plan(*p.plan),
            absl::StrCat("cuda:0 matmuls:\n  kernel 0 (", p.matmul->program->name,
                         "): generated kernel (epilogue not supported: sin)\n"));
  EXPECT_EQ(gpu_->describe_plan(*plan_of(exp(x)).plan), "") << "no matmul, nothing to say";
}

// The planner's hook (explain_plan and KILN_DUMP=plan append it to the plan): a device with
// nothing to choose, or none usable here, adds nothing; a GPU names its choice.
TEST(CublasLtPlanDump, DevicesWithNoChoiceOrNotUsableAddNothing) {
  const Planned p = plan_of(matmul(randn({5, 16}, 54), randn({16, 8}, 55)));
  EXPECT_EQ(jit::describe_plan_on(Device{DeviceType::CPU, 0}, *p.plan), "");
  if (!jit::device_usable(Device{DeviceType::CUDA, 0}).ok()) {
    EXPECT_EQ(jit::describe_plan_on(Device{DeviceType::CUDA, 0}, *p.plan), "");
  }
  const std::string dump =
      explain_plan({matmul(randn({5, 16}, 56), randn({16, 8}, 57))}, ExplainDetail::kPlan);
  if (default_device().type == DeviceType::CPU) {
    EXPECT_EQ(dump.find("matmuls:"), std::string::npos) << dump;
  } else {  // on a GPU (scripts/gpu-check.sh), the planner's hook reached the device
    std::printf("[ dump     ] %s", dump.c_str());
    EXPECT_NE(dump.find("matmuls:\n  kernel 0 (matmul): "), std::string::npos) << dump;
  }
}

TEST(CublasLtChoice, KilnCublasltZeroChoosesTheGeneratedKernelWithoutLoadingAnything) {
  ScopedEnv env("KILN_CUBLASLT", "0");
  runtime::cuda::CublasLtMatmuls lt("cuda:0", [](int64_t) -> std::shared_ptr<base::Buffer> {
    ADD_FAILURE() << "no workspace is needed";
    return nullptr;
  });
  const Tensor x = randn({5, 16}, 38), w = randn({16, 8}, 39);
  const Planned p = plan_of(matmul(x, w));
  const runtime::cuda::MatmulChoice c = lt.choose(*p.matmul->program, p.matmul->launch);
  EXPECT_FALSE(c.cublaslt());
  EXPECT_EQ(c.describe(), "generated kernel (cuBLASLt disabled by KILN_CUBLASLT=0)");
}

// ---------------------------------------------------------------------------------------
// A stand-in cuBLASLt: descriptors hold what they are told (of the size the library takes),
// the heuristic finds an algorithm unless a test says otherwise and records the preferences
// it was given, and cublasLtMatmul checks the shapes as the library does and computes
// D = epilogue(op(A) op(B) [+ bias]) by its documented column-major rules, on the emulated
// device memory (host memory at the device addresses). So the call Kiln makes is checked
// element by element against the CPU. A call on a capturing stream is captured: it computes
// at each launch of the graph (capturing_driver), after the graph's own nodes.

namespace fake {

using rc_status = runtime::cuda::CublasStatus;
constexpr rc_status kInvalidValue = runtime::cuda::kCublasStatusInvalidValue;
int matmuls = 0;                // calls of cublasLtMatmul
int computed = 0;               // products computed (a captured call: at each graph launch)
rc_status matmul_result = 0;    // what cublasLtMatmul returns
int heuristic_returned = 1;     // how many algorithms the heuristic finds
rc_status heuristic_state = 0;  // the state of the algorithm it finds
uint32_t min_a_alignment = 0;   // the heuristic finds none for A less aligned than this
int failing_preference = -1;    // cublasLtMatmulPreferenceSetAttribute fails for this one
int heuristic_calls = 0;
std::map<int, uint64_t> preferences;  // the last preference's attributes, as set
// Per graph being captured or captured, the calls captured into it; per executable graph,
// the graph it was made from.
std::map<runtime::cuda::CUgraph, std::vector<std::function<void()>>> captured;
std::map<runtime::cuda::CUgraphExec, runtime::cuda::CUgraph> instantiated;

void reset() {
  matmuls = computed = heuristic_calls = 0;
  matmul_result = heuristic_state = 0;
  heuristic_returned = 1;
  min_a_alignment = 0;
  failing_preference = -1;
  preferences.clear();
}

struct Layout {
  int type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batches = 1;
  int64_t batch_stride = 0;
};
struct Desc {
  int32_t trans_a = 0, trans_b = 0;
  uint32_t epilogue = 1;
  const void* bias = nullptr;
};

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}

rc_status create(runtime::cuda::CublasLtHandle* h) {
  *h = reinterpret_cast<runtime::cuda::CublasLtHandle>(uintptr_t{0x1000});
  return 0;
}
rc_status destroy(runtime::cuda::CublasLtHandle) { return 0; }
size_t version() { return 130100; }
rc_status desc_create(runtime::cuda::CublasLtMatmulDesc* d, int, int) {
  *d = reinterpret_cast<runtime::cuda::CublasLtMatmulDesc>(new Desc);
  return 0;
}
rc_status desc_set(runtime::cuda::CublasLtMatmulDesc d, int attribute, const void* buf, size_t n) {
  Desc& desc = *reinterpret_cast<Desc*>(d);
  const size_t size = attribute == runtime::cuda::kMatmulDescBiasPointer ? sizeof(void*) : 4;
  if (n != size) return kInvalidValue;  // as the library: the attribute's own size
  switch (attribute) {
    case runtime::cuda::kMatmulDescTransA:
      std::memcpy(&desc.trans_a, buf, n);
      break;
    case runtime::cuda::kMatmulDescTransB:
      std::memcpy(&desc.trans_b, buf, n);
      break;
    case runtime::cuda::kMatmulDescEpilogue:
      std::memcpy(&desc.epilogue, buf, n);
      break;
    case runtime::cuda::kMatmulDescBiasPointer:
      std::memcpy(&desc.bias, buf, n);
      break;
    default:
      return 7;  // CUBLAS_STATUS_INVALID_VALUE
  }
  return 0;
}
rc_status desc_destroy(runtime::cuda::CublasLtMatmulDesc d) {
  delete reinterpret_cast<Desc*>(d);
  return 0;
}
rc_status layout_create(runtime::cuda::CublasLtMatrixLayout* l, int type, uint64_t rows,
                        uint64_t cols, int64_t ld) {
  if (ld < static_cast<int64_t>(std::max<uint64_t>(rows, 1))) return 7;  // as the library
  *l = reinterpret_cast<runtime::cuda::CublasLtMatrixLayout>(new Layout{type, rows, cols, ld});
  return 0;
}
rc_status layout_set(runtime::cuda::CublasLtMatrixLayout l, int attribute, const void* buf,
                     size_t n) {
  Layout& layout = *reinterpret_cast<Layout*>(l);
  if (n != (attribute == runtime::cuda::kLayoutBatchCount ? sizeof(int32_t) : sizeof(int64_t))) {
    return kInvalidValue;
  }
  if (attribute == runtime::cuda::kLayoutBatchCount) {
    std::memcpy(&layout.batches, buf, n);
  } else if (attribute == runtime::cuda::kLayoutStridedBatchOffset) {
    std::memcpy(&layout.batch_stride, buf, n);
  } else {
    return 7;
  }
  return 0;
}
rc_status layout_destroy(runtime::cuda::CublasLtMatrixLayout l) {
  delete reinterpret_cast<Layout*>(l);
  return 0;
}
rc_status pref_create(runtime::cuda::CublasLtMatmulPreference* p) {
  *p = new runtime::cuda::CublasLtMatmulPreferenceOpaque{};
  preferences.clear();
  return 0;
}
rc_status pref_set(runtime::cuda::CublasLtMatmulPreference, int attribute, const void* buf,
                   size_t n) {
  const size_t size =
      attribute == runtime::cuda::kPreferenceMaxWorkspaceBytes ? sizeof(uint64_t) : 4;
  if (n != size || attribute == failing_preference) return kInvalidValue;
  uint64_t value = 0;
  std::memcpy(&value, buf, n);
  preferences[attribute] = value;
  return 0;
}
rc_status pref_destroy(runtime::cuda::CublasLtMatmulPreference p) {
  delete p;
  return 0;
}
rc_status heuristic(runtime::cuda::CublasLtHandle, runtime::cuda::CublasLtMatmulDesc,
                    runtime::cuda::CublasLtMatrixLayout, runtime::cuda::CublasLtMatrixLayout,
                    runtime::cuda::CublasLtMatrixLayout, runtime::cuda::CublasLtMatrixLayout,
                    runtime::cuda::CublasLtMatmulPreference, int,
                    runtime::cuda::CublasLtHeuristicResult* r, int* returned) {
  ++heuristic_calls;
  *r = {};
  r->state = heuristic_state;
  *returned = heuristic_returned;
  if (preferences[runtime::cuda::kPreferenceMinAlignmentABytes] < min_a_alignment) *returned = 0;
  return 0;
}

double load(const void* base, int type, int64_t i) {
  switch (type) {
    case runtime::cuda::kCudaR16F:
      return static_cast<float>(static_cast<const Half*>(base)[i]);
    case runtime::cuda::kCudaR16BF:
      return static_cast<float>(static_cast<const BFloat16*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}
void store(void* base, int type, int64_t i, float v) {
  switch (type) {
    case runtime::cuda::kCudaR16F:
      static_cast<Half*>(base)[i] = Half(v);
      return;
    case runtime::cuda::kCudaR16BF:
      static_cast<BFloat16*>(base)[i] = BFloat16(v);
      return;
    default:
      static_cast<float*>(base)[i] = v;
  }
}

// op(X)(r, c) of batch `batch`: element (r, c) of X, or (c, r) under CUBLAS_OP_T.
double element(const void* x, const Layout& l, bool transposed, int64_t batch, uint64_t r,
               uint64_t c) {
  if (transposed) std::swap(r, c);
  return load(x, l.type, batch * l.batch_stride + static_cast<int64_t>(r + c * l.ld));
}

rc_status matmul(runtime::cuda::CublasLtHandle, runtime::cuda::CublasLtMatmulDesc d,
                 const void* alpha, const void* a, runtime::cuda::CublasLtMatrixLayout la,
                 const void* b, runtime::cuda::CublasLtMatrixLayout lb, const void* beta,
                 const void* c, runtime::cuda::CublasLtMatrixLayout, void* out,
                 runtime::cuda::CublasLtMatrixLayout ld, const runtime::cuda::CublasLtMatmulAlgo*,
                 void* workspace, size_t, runtime::cuda::CUstream stream) {
  ++matmuls;
  if (matmul_result != 0) return matmul_result;
  const Desc& desc = *reinterpret_cast<Desc*>(d);
  const Layout &A = *reinterpret_cast<Layout*>(la), &B = *reinterpret_cast<Layout*>(lb),
               &D = *reinterpret_cast<Layout*>(ld);
  if (*static_cast<const float*>(alpha) != 1 || *static_cast<const float*>(beta) != 0 || c != out ||
      workspace == nullptr) {
    return kInvalidValue;
  }
  // The library's checks: op(A) is D.rows x k, op(B) k x D.cols, and one batch count.
  const uint64_t a_rows = desc.trans_a ? A.cols : A.rows, k = desc.trans_a ? A.rows : A.cols;
  const uint64_t b_rows = desc.trans_b ? B.cols : B.rows, b_cols = desc.trans_b ? B.rows : B.cols;
  if (a_rows != D.rows || b_cols != D.cols || k != b_rows || A.batches != D.batches ||
      B.batches != D.batches) {
    return kInvalidValue;
  }
  int capturing = 0;
  runtime::cuda::CUgraph graph = nullptr;
  if (runtime::cuda::driver_api().stream_get_capture_info(stream, &capturing, nullptr, &graph,
                                                          nullptr, nullptr) != 0) {
    return 13;  // CUBLAS_STATUS_EXECUTION_FAILED
  }
  auto compute = [=, &A, &B, &D] {  // desc copied: the bias pointer as at this call
    ++computed;
    for (int32_t batch = 0; batch < D.batches; ++batch) {
      for (uint64_t i = 0; i < D.rows; ++i) {
        for (uint64_t j = 0; j < D.cols; ++j) {
          double acc = 0;
          for (uint64_t kk = 0; kk < k; ++kk) {
            acc += element(a, A, desc.trans_a, batch, i, kk) *
                   element(b, B, desc.trans_b, batch, kk, j);
          }
          if (desc.epilogue & runtime::cuda::kEpilogueBias)
            acc += load(desc.bias, D.type, static_cast<int64_t>(i));
          if (desc.epilogue & runtime::cuda::kEpilogueRelu) acc = std::max(acc, 0.0);
          store(out, D.type, batch * D.batch_stride + static_cast<int64_t>(i + j * D.ld),
                static_cast<float>(acc));
        }
      }
    }
  };
  if (capturing == runtime::cuda::kStreamCaptureStatusActive) {
    captured[graph].push_back(compute);
  } else {
    compute();
  }
  return 0;
}

// The emulated driver, with a graph's launch also running the stand-in's calls captured
// into it.
runtime::cuda::CUresult begin_capture(runtime::cuda::CUstream stream, int mode) {
  const runtime::cuda::DriverApi& emulated = testing::EmulatedDriver::get().api();
  const runtime::cuda::CUresult r = emulated.stream_begin_capture(stream, mode);
  int status = 0;
  runtime::cuda::CUgraph graph = nullptr;
  if (r == 0 &&
      emulated.stream_get_capture_info(stream, &status, nullptr, &graph, nullptr, nullptr) == 0) {
    captured.erase(graph);  // a new graph at a freed one's address
  }
  return r;
}
runtime::cuda::CUresult instantiate(runtime::cuda::CUgraphExec* exec, runtime::cuda::CUgraph g,
                                    unsigned long long flags) {
  const runtime::cuda::CUresult r =
      testing::EmulatedDriver::get().api().graph_instantiate(exec, g, flags);
  if (r == 0) instantiated[*exec] = g;
  return r;
}
runtime::cuda::CUresult launch_graph(runtime::cuda::CUgraphExec exec,
                                     runtime::cuda::CUstream stream) {
  const runtime::cuda::CUresult r = testing::EmulatedDriver::get().api().graph_launch(exec, stream);
  if (r == 0) {
    for (const std::function<void()>& call : captured[instantiated.at(exec)]) call();
  }
  return r;
}
const runtime::cuda::DriverApi& capturing_driver() {
  static const runtime::cuda::DriverApi* const api = [] {
    auto* a = new runtime::cuda::DriverApi(testing::EmulatedDriver::get().api());
    a->stream_begin_capture = begin_capture;
    a->graph_instantiate = instantiate;
    a->graph_launch = launch_graph;
    return a;
  }();  // never destroyed: the CUDA device made with it keeps it for the process
  return *api;
}

CublasLtApi api() {
  CublasLtApi a;
  a.library = "a stand-in cuBLASLt";
  a.get_version = version;
  a.create = create;
  a.destroy = destroy;
  a.matmul_desc_create = desc_create;
  a.matmul_desc_set_attribute = desc_set;
  a.matmul_desc_destroy = desc_destroy;
  a.matrix_layout_create = layout_create;
  a.matrix_layout_set_attribute = layout_set;
  a.matrix_layout_destroy = layout_destroy;
  a.preference_create = pref_create;
  a.preference_set_attribute = pref_set;
  a.preference_destroy = pref_destroy;
  a.algo_get_heuristic = heuristic;
  a.matmul = matmul;
  return a;
}

}  // namespace fake

class CublasLtStandIn : public CublasLtOnEmulatedDriver {
 protected:
  void SetUp() override {
    CublasLtOnEmulatedDriver::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    fake::reset();
    runtime::cuda::set_cublaslt_api_for_testing(&api_);
  }

  // Runs `y`'s plan on the emulated GPU and compares every element with the CPU.
  void run_and_compare(const Tensor& y, double tol) {
    const Planned p = plan_of(y);
    SCOPED_TRACE(p.plan->description);
    const std::string dump = gpu_->describe_plan(*p.plan);
    EXPECT_NE(dump.find("): cublaslt ("), std::string::npos) << dump;
    const int calls = fake::matmuls;
    const size_t before = driver_.launches().size();
    const std::vector<std::shared_ptr<base::Buffer>> out = gpu_->run(*p.plan, p.args);
    EXPECT_EQ(fake::matmuls, calls + 1);
    EXPECT_FALSE(generated_kernel_launched(p, before));
    expect_matches_cpu(y, *runtime::cuda::copy_to_host(*out[0]), tol);
  }

  const CublasLtApi api_ = fake::api();
};

TEST_F(CublasLtStandIn, ThePlanDumpSaysCublasltAndTheCallComputesWhatTheCpuComputes) {
  const Tensor x = randn({37, 70}, 40), w = randn({70, 45}, 41), b = randn({45}, 42);
  const Tensor y = relu(matmul(x, w) + b);
  EXPECT_EQ(gpu_->describe_plan(*plan_of(y).plan),
            absl::StrCat("cuda:0 matmuls:\n  kernel 0 (", plan_of(y).matmul->program->name,
                         "): cublaslt (RELU_BIAS, f32 -> f32, M 37 N 45 K 70, 1 batch)\n"));
  run_and_compare(y, 2e-5);
}

TEST_F(CublasLtStandIn, LayoutsBatchesAndCastsComputeWhatTheCpuComputes) {
  const Tensor x = randn({2, 3, 24}, 43, DType::F16), w = randn({10, 24}, 44, DType::F16),
               b = randn({10}, 45, DType::F16);
  run_and_compare(linear(x, w, b), 4e-3);  // wᵀ transposed, batches folded
  const Tensor a = randn({3, 24, 5}, 46, DType::BF16), c = randn({3, 24, 7}, 47, DType::BF16);
  run_and_compare(matmul(a.transpose(1, 2), c).astype(DType::F32), 2e-2);  // xᵀ, batched
  run_and_compare(relu(matmul(randn({9, 24}, 48), randn({24, 6}, 49))), 2e-5);
  // A slice: a leading dimension past the width, and an offset into the buffer.
  run_and_compare(matmul(randn({9, 32}, 52).slice(1, 4, 28), randn({24, 6}, 53)), 2e-5);
}

TEST_F(CublasLtStandIn, AFailedCallFallsBackToTheGeneratedKernelAndIsRemembered) {
  fake::matmul_result = 13;  // CUBLAS_STATUS_EXECUTION_FAILED
  const Tensor x = randn({5, 16}, 50), w = randn({16, 8}, 51);
  const Planned p = plan_of(matmul(x, w));
  size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 1);
  EXPECT_TRUE(generated_kernel_launched(p, before)) << "the same run fell back";
  const std::string dump = gpu_->describe_plan(*p.plan);
  EXPECT_NE(dump.find("generated kernel (cuBLASLt failed on it before: cublasLtMatmul failed"),
            std::string::npos)
      << dump;
  before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 1) << "not asked again";
  EXPECT_TRUE(generated_kernel_launched(p, before));
}

// The preferences the heuristic is given: the workspace, every operand's alignment, and
// split-K partial sums added in f32 (never in a 16-bit output type).
TEST_F(CublasLtStandIn, TheHeuristicIsGivenTheWorkspaceAlignmentsAndTheF32Reduction) {
  run_and_compare(matmul(randn({6, 16}, 66, DType::F16), randn({16, 8}, 67, DType::F16)), 4e-3);
  EXPECT_EQ(fake::preferences[runtime::cuda::kPreferenceMaxWorkspaceBytes],
            static_cast<uint64_t>(runtime::cuda::CublasLtMatmuls::kWorkspaceBytes));
  EXPECT_EQ(fake::preferences[runtime::cuda::kPreferenceReductionSchemeMask],
            runtime::cuda::kReductionSchemeComputeType);
  for (int attribute :
       {runtime::cuda::kPreferenceMinAlignmentABytes, runtime::cuda::kPreferenceMinAlignmentBBytes,
        runtime::cuda::kPreferenceMinAlignmentCBytes,
        runtime::cuda::kPreferenceMinAlignmentDBytes}) {
    EXPECT_EQ(fake::preferences[attribute], 256u) << "attribute " << attribute;
  }
}

TEST_F(CublasLtStandIn, AFailedPreferenceIsNamedAndAnUnsuccessfulAlgorithmIsNone) {
  fake::failing_preference = runtime::cuda::kPreferenceReductionSchemeMask;
  const Planned p = plan_of(matmul(randn({5, 16}, 68), randn({16, 8}, 69)));
  std::string dump = gpu_->describe_plan(*p.plan);
  EXPECT_NE(dump.find("generated kernel (cuBLASLt has no algorithm for it: "
                      "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK) failed"),
            std::string::npos)
      << dump;
  fake::failing_preference = -1;
  fake::heuristic_state = runtime::cuda::kCublasStatusNotSupported;
  const Planned q = plan_of(matmul(randn({5, 24}, 70), randn({24, 8}, 71)));
  dump = gpu_->describe_plan(*q.plan);
  EXPECT_NE(dump.find("generated kernel (cuBLASLt has no algorithm for it: the heuristic's "
                      "result failed"),
            std::string::npos)
      << dump;
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*q.plan, q.args));
  EXPECT_EQ(fake::matmuls, 0);
  EXPECT_TRUE(generated_kernel_launched(q, before));
}

// A copy of host buffer `values` on the GPU, `bytes` past a 256-byte-aligned address: what a
// view into a larger device buffer gives a plan.
std::shared_ptr<base::Buffer> misaligned_copy(const base::Buffer& values, int64_t bytes) {
  auto host = std::make_shared<base::Buffer>(values.nbytes() + bytes);
  std::memcpy(static_cast<std::byte*>(host->data()) + bytes, values.data(),
              static_cast<size_t>(values.nbytes()));
  std::shared_ptr<base::Buffer> whole = jit::place_on(host, Device{DeviceType::CUDA, kGpu});
  return std::make_shared<base::Buffer>(values.nbytes(), whole->device(),
                                        whole->device_pointer() + bytes, [whole] {});
}

// The input slot of `p` whose buffer has `bytes` bytes (the test's shapes make it unique).
size_t slot_of_size(const Planned& p, int64_t bytes) {
  for (size_t slot = 0; slot < p.args.inputs.size(); ++slot) {
    if (p.args.inputs[slot]->nbytes() == bytes) return slot;
  }
  ADD_FAILURE() << "no input of " << bytes << " bytes";
  return 0;
}

// No preference tells the heuristic the bias's alignment, so a bias that is not 16-byte
// aligned is never given to cuBLASLt: a view at an odd element offset, known when planning.
TEST_F(CublasLtStandIn, ABiasAtAnOddOffsetRunsTheGeneratedKernelWhichMatchesTheCpu) {
  const Tensor x = randn({7, 16}, 72), w = randn({16, 8}, 73), b = randn({9}, 74);
  const Tensor y = matmul(x, w) + b.slice(0, 1, 9);
  const Planned p = plan_of(y);
  const absl::StatusOr<CublasLtGemm> g = gemm_of(p);
  ASSERT_TRUE(g.ok()) << g.status() << "\n" << p.matmul->program->to_string();
  ASSERT_EQ(g->bias_offset, 1) << "a view of b, one element in";
  const std::string dump = gpu_->describe_plan(*p.plan);
  EXPECT_NE(dump.find("generated kernel (the bias is 4-byte aligned"), std::string::npos) << dump;
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 0);
  EXPECT_TRUE(generated_kernel_launched(p, before));
  expect_generated_kernel_matches_cpu(p, y);
}

// ... and a bias buffer that only the run knows is misaligned: checked with its address.
TEST_F(CublasLtStandIn, ABiasBufferMisalignedAtRunTimeRunsTheGeneratedKernel) {
  const Tensor x = randn({7, 16}, 75), w = randn({16, 8}, 76), b = randn({8}, 77);
  const Planned p = plan_of(matmul(x, w) + b);
  EXPECT_NE(gpu_->describe_plan(*p.plan).find("): cublaslt (BIAS"), std::string::npos);
  jit::PlanArguments args = p.args;
  const size_t slot = slot_of_size(p, 8 * 4);
  args.inputs[slot] = misaligned_copy(*args.inputs[slot], 4);
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, args));
  EXPECT_EQ(fake::matmuls, 0) << "cuBLASLt was given a 4-byte-aligned bias";
  EXPECT_TRUE(generated_kernel_launched(p, before));
  // The aligned buffers still take cuBLASLt.
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 1);
}

// The heuristic is asked again for buffers less aligned than planned; when it has no
// algorithm for them, that run launches the generated kernel.
TEST_F(CublasLtStandIn, NoAlgorithmForARunsAlignmentFallsBackToTheGeneratedKernel) {
  fake::min_a_alignment = 16;
  const Tensor x = randn({7, 16}, 78), w = randn({16, 8}, 79);
  const Planned p = plan_of(matmul(x, w));
  EXPECT_NE(gpu_->describe_plan(*p.plan).find("): cublaslt ("), std::string::npos);
  EXPECT_EQ(fake::heuristic_calls, 1);
  jit::PlanArguments args = p.args;
  const size_t slot = slot_of_size(p, 16 * 8 * 4);  // w: cuBLASLt's A
  args.inputs[slot] = misaligned_copy(*args.inputs[slot], 4);
  const size_t before = driver_.launches().size();
  EXPECT_NO_THROW(gpu_->run(*p.plan, args));
  EXPECT_EQ(fake::heuristic_calls, 2);
  EXPECT_EQ(fake::preferences[runtime::cuda::kPreferenceMinAlignmentABytes], 4u);
  EXPECT_EQ(fake::matmuls, 0);
  EXPECT_TRUE(generated_kernel_launched(p, before));
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 1) << "aligned buffers: the planned algorithm";
  EXPECT_EQ(fake::heuristic_calls, 2);
}

// A compiled function's plan of two cuBLASLt matmuls, replayed: the first call runs
// uncaptured, the second captures the calls into a CUDA graph, and the graph's launches
// compute them again over each call's activations. Every result matches the CPU.
TEST_F(CublasLtStandIn, AReplayedPlanOfTwoCublasLtMatmulsIsCapturedAndMatchesTheCpu) {
  runtime::cuda::set_driver_api_for_testing(&fake::capturing_driver());
  std::unique_ptr<jit::Backend> gpu = runtime::cuda::make_cuda_backend(kGpu);
  const Tensor w1 = randn({16, 12}, 80), b1 = randn({12}, 81), w2 = randn({12, 8}, 82);
  auto model = [&](const Tensor& x) { return matmul(relu(matmul(x, w1) + b1), w2); };
  const Planned p = plan_of(model(randn({5, 16}, 83)));
  ASSERT_EQ(p.plan->kernels.size(), 2u) << p.plan->description;
  const std::string dump = gpu->describe_plan(*p.plan);
  ASSERT_NE(dump.find("kernel 0 (" + p.plan->kernels[0].program->name + "): cublaslt ("),
            std::string::npos)
      << dump;
  ASSERT_NE(dump.find("kernel 1 (" + p.plan->kernels[1].program->name + "): cublaslt ("),
            std::string::npos)
      << dump;
  const int64_t captures = driver_.calls("cuStreamBeginCapture_v2");
  const int64_t graph_launches = driver_.calls("cuGraphLaunch");
  for (int call = 0; call < 4; ++call) {
    SCOPED_TRACE(::testing::Message() << "call " << call);
    const Tensor y = model(randn({5, 16}, 90 + call));
    const Planned q = plan_of(y);
    std::vector<std::shared_ptr<base::Buffer>> out;
    ASSERT_NO_THROW(out = gpu->replay(p.plan, q.args));
    expect_matches_cpu(y, *runtime::cuda::copy_to_host(*out[0]), 2e-5);
  }
  EXPECT_EQ(driver_.calls("cuStreamBeginCapture_v2") - captures, 1);
  EXPECT_EQ(driver_.calls("cuGraphLaunch") - graph_launches, 3);
  EXPECT_EQ(fake::matmuls, 4) << "two calls uncaptured, two captured";
  EXPECT_EQ(fake::computed, 8) << "each call computed both products";
}

// A plan decides how its matmuls run once: its later runs and replays neither walk the
// Kernel IR again nor derive the call again.
TEST_F(CublasLtStandIn, APlansLaterRunsDoNotDecideAgain) {
  const Tensor x = randn({5, 16}, 84), w1 = randn({16, 12}, 85), w2 = randn({12, 8}, 86);
  const Planned p = plan_of(matmul(relu(matmul(x, w1)), w2));
  ASSERT_EQ(p.plan->kernels.size(), 2u) << p.plan->description;
  EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
  EXPECT_EQ(fake::matmuls, 2);
  const uint64_t decided = runtime::cuda::cublaslt_gemm_calls();
  for (int call = 0; call < 3; ++call) {
    EXPECT_NO_THROW(gpu_->run(*p.plan, p.args));
    EXPECT_NO_THROW(gpu_->replay(p.plan, p.args));
  }
  EXPECT_EQ(runtime::cuda::cublaslt_gemm_calls(), decided);
  EXPECT_GE(fake::matmuls, 2 + 6) << "every run called cuBLASLt";
}

}  // namespace
}  // namespace kiln
