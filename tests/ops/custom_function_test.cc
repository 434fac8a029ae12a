// Custom elementwise functions: they fuse like built-in ops, compute what their definition
// says (checked against independently computed values on fresh random data), compile for the
// GPU through NVRTC, and reject bad definitions with clear errors.
#include <cmath>
#include <random>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/custom.h"
#include "kiln/nn.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::close;
using testing::random_floats;
using testing::test_seed;

float softplus_ref(float x) { return std::log1p(std::exp(x)); }

CustomElementwise softplus() {
  ElementwiseFunction f;
  f.name = "test_softplus";
  f.arity = 1;
  f.cuda = "__device__ float test_softplus(float x) { return log1pf(expf(x)); }";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = softplus_ref(in[0][i]);
  };
  return define_elementwise(f);
}

// a * b + c with an unusual twist, so a mix-up of operands shows.
CustomElementwise fma_twist() {
  ElementwiseFunction f;
  f.name = "test_fma_twist";
  f.arity = 3;
  f.cuda = R"(
__device__ float test_fma_twist(float a, float b, float c) { return a * b + 2.0f * c - a; })";
  f.cpu = [](int64_t n, const float* const* in, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * in[1][i] + 2.0f * in[2][i] - in[0][i];
  };
  return define_elementwise(f);
}

int64_t kernels_for(const Tensor& t) {
  const int64_t before = stats().kernels_launched;
  t.eval();
  return stats().kernels_launched - before;
}

TEST(CustomFunction, FusesWithBuiltInOpsAndComputesItsDefinition) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  CustomElementwise sp = softplus();
  const std::vector<float> xs = random_floats(3 * 1000, rng, -6, 6);
  Tensor x = Tensor::from_vector(xs, {3, 1000});
  Tensor y = sp({x * 2.0}) + 1.0;
  EXPECT_EQ(kernels_for(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_TRUE(close(softplus_ref(xs[i] * 2) + 1.0f, got[i], 1e-6)) << i;
  }
}

TEST(CustomFunction, BroadcastsConvertsDtypesAndKeepsOperandOrder) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  CustomElementwise f = fma_twist();
  const std::vector<float> a = random_floats(4 * 5, rng);
  std::vector<Half> b;
  for (float v : random_floats(5, rng)) b.push_back(Half(v));
  Tensor ta = Tensor::from_vector(a, {4, 5});
  Tensor tb = Tensor::from_vector(b, {5});
  Tensor tc = Tensor::arange(4, DType::I32).reshape({4, 1});
  Tensor y = f({ta, tb, tc});
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{4, 5}));
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 5; ++c) {
      const float av = a[r * 5 + c], bv = static_cast<float>(b[c]), cv = static_cast<float>(r);
      EXPECT_EQ(got[r * 5 + c], av * bv + 2.0f * cv - av) << r << "," << c;
    }
  }
}

TEST(CustomFunction, FusesIntoReductionAndNormProloguesAndMatchesTheReference) {
  SCOPED_TRACE(test_seed());
  std::mt19937_64 rng(test_seed());
  CustomElementwise sp = softplus();
  Tensor x = Tensor::from_vector(random_floats(64 * 33, rng), {64, 33});
  for (Tensor y : {sum(sp({x}), {1}), softmax(sp({x - 1.0})), sp({matmul(x, x.transpose(0, 1))})}) {
    Tensor want = testing::reference_tensor(y);
    EXPECT_EQ(kernels_for(y), 1);
    const std::vector<float> w = want.to_vector<float>(), g = y.to_vector<float>();
    for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(close(w[i], g[i], 1e-4)) << i;
  }
}

TEST(CustomFunction, KernelsUsingItCompileForSm80AndSm90) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok()) << runtime::cuda::nvrtc_available().message();
  CustomElementwise sp = softplus();
  CustomElementwise f = fma_twist();
  Tensor x = Tensor::rand({8, 16}, 1), w = Tensor::rand({16}, 2);
  for (Tensor y : {f({sp({x}), w, x * 2.0}), sum(sp({x}) * w, {0}), layer_norm(sp({x}), w, w)}) {
    jit::Trace trace = jit::build_trace({detail::TensorAccess::node(y).get()});
    std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
    for (const jit::PlannedKernel& k : plan->kernels) {
      const std::string source = runtime::cuda::render_cuda(*k.program);
      EXPECT_NE(source.find("custom elementwise function 'test_softplus'"), std::string::npos);
      EXPECT_NE(k.program->name.find("test_softplus"), std::string::npos) << k.program->name;
      for (int arch : {80, 90}) {
        absl::StatusOr<std::string> cubin =
            runtime::cuda::compile_to_cubin(source, k.program->name, arch);
        EXPECT_TRUE(cubin.ok()) << cubin.status().message() << "\n" << source;
      }
    }
  }
}

TEST(CustomFunction, BadDefinitionsAreRejectedWithTheReason) {
  ASSERT_TRUE(runtime::cuda::nvrtc_available().ok());
  ElementwiseFunction f;
  f.name = "test_broken";
  f.arity = 1;
  f.cuda = "__device__ float test_broken(float x) { return x +* 2; }";
  f.cpu = [](int64_t, const float* const*, float*) {};
  testing::expect_error([&] { define_elementwise(f); },
                        {"[define_elementwise]", "test_broken", "does not compile",
                         "kiln_check_test_broken.cu(1): error"});
  f.cuda = "__device__ float other_name(float x) { return x; }";  // the name does not match
  testing::expect_error([&] { define_elementwise(f); }, {"test_broken", "does not compile"});
  f.cuda = "__device__ float test_broken(float x, float y) { return x; }";  // wrong arity
  testing::expect_error([&] { define_elementwise(f); }, {"test_broken", "does not compile"});
  f.cuda = "__device__ float test_broken(float x) { return x; }";
  f.name = "2bad";
  testing::expect_error([&] { define_elementwise(f); }, {"'2bad'", "C identifier"});
  f.name = "test_broken";
  f.arity = 4;
  testing::expect_error([&] { define_elementwise(f); }, {"arity 4", "1 to 3"});
  f.arity = 1;
  f.cpu = nullptr;
  testing::expect_error([&] { define_elementwise(f); }, {"C++ (CPU) definition is empty"});
  // A different definition under a taken name is refused; the same one is the same function.
  CustomElementwise sp = softplus();
  EXPECT_EQ(softplus().name(), sp.name());
  ElementwiseFunction clash;
  clash.name = "test_softplus";
  clash.cuda = "__device__ float test_softplus(float x) { return x; }";
  clash.cpu = [](int64_t, const float* const*, float*) {};
  testing::expect_error([&] { define_elementwise(clash); }, {"already registered"});
}

TEST(CustomFunction, BadCallsNameTheFunctionAndShapes) {
  CustomElementwise f = fma_twist();
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  testing::expect_error([&] { f({a, a}); }, {"[custom test_fma_twist]", "takes 3 inputs, got 2"});
  testing::expect_error(
      [&] {
        f({a, b, a});
      },
      {"[custom test_fma_twist]", "[2, 3]", "[4]", "inputs[1]"});
}

TEST(CustomFunction, TracesDumpAndLoadByName) {
  CustomElementwise sp = softplus();
  Tensor x = Tensor::from_vector<float>({-1, 0, 1}, {3});
  Tensor y = sp({x}) * 3.0;
  const std::string json = dump_trace({y}, DumpFormat::Json);
  EXPECT_NE(json.find("\"function\":\"test_softplus\""), std::string::npos) << json;
  LoadedTrace loaded = load_trace(json);
  Tensor x2 = Tensor::from_vector<float>({2, 3, 4}, {3});
  const std::vector<float> got = loaded.run({{loaded.inputs()[0].name, x2}})[0].to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[i], 3 * softplus_ref(2.0f + i));
  std::string unknown = json;
  unknown.replace(unknown.find("test_softplus"), 13, "nobody_defined");
  testing::expect_error([&] { load_trace(unknown); }, {"nobody_defined", "not registered"});
}

TEST(CustomFunction, TwoFunctionsOfTheSameShapeNeverShareAKernel) {
  ElementwiseFunction plus_one{"test_plus_one", 1,
                               "__device__ float test_plus_one(float x) { return x + 1.0f; }",
                               [](int64_t n, const float* const* in, float* out) {
                                 for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] + 1;
                               }};
  ElementwiseFunction times_ten{"test_times_ten", 1,
                                "__device__ float test_times_ten(float x) { return x * 10.0f; }",
                                [](int64_t n, const float* const* in, float* out) {
                                  for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * 10;
                                }};
  CustomElementwise p = define_elementwise(plus_one), t = define_elementwise(times_ten);
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  EXPECT_EQ(p({x}).to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(t({x}).to_vector<float>(), (std::vector<float>{10, 20}));
  EXPECT_EQ(p({x}).to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(CustomFunction, WorksInsideACompiledFunction) {
  CustomElementwise sp = softplus();
  Compiled fn =
      compile([&](const std::vector<Tensor>& in) { return std::vector{sp({in[0]}) - 1.0}; });
  for (float v : {0.5f, -3.0f, 2.0f}) {
    const float got = static_cast<float>(fn({Tensor::full({1}, v)})[0].item());
    EXPECT_FLOAT_EQ(got, softplus_ref(v) - 1.0f);
  }
  EXPECT_EQ(fn.num_signatures(), 1u);
}

}  // namespace
}  // namespace kiln
