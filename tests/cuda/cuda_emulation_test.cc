// Every generated CUDA kernel of the corpus, run on the host through the CUDA execution model
// of tests/cuda_emulation: the same source NVRTC compiles (the PTX conversions aside), the
// same packed Params, the same grid and block sizes as the CUDA backend, with both the 32-
// and the 64-bit entry points. Each result is compared element by element with the CPU
// backend, into outputs poisoned beforehand. No GPU is needed; none is claimed.
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/eval/compiled_bundle.h"
#include "jit/eval/sync_dump.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/compile.h"
#include "kiln/custom.h"
#include "kiln/io.h"
#include "kiln/nn.h"
#include "llm/llama_forward.h"
#include "llm/model_config.h"
#include "llm/model_data.h"
#include "ops/element_access.h"
#include "runtime/cuda/cuda_renderer.h"
#include "runtime/cuda/kernel_args.h"
#include "runtime/cuda/launch_geometry.h"
#include "tests/cuda/kernel_corpus.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/llm/small_llama.h"
#include "tests/quantized_util.h"
#include "tests/random_program.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

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
  // Narrow dtypes inside one fused kernel round or wrap after every op, as if stored: far
  // more than any tolerance apart from a kernel that kept f32 or i64 in between. 256 + 8 is
  // 256 in both 8-bit floats (so the difference is 0, not 8); 100 + 100 in i8 is -56 and
  // 200 + 100 in u8 is 44 (so neither is above 150).
  for (DType dt : {DType::F8E4M3, DType::F8E5M2}) {
    Tensor big = Tensor::full({37, 41}, 256, dt).eval();
    outs.push_back(((big + 8.0) - 256.0).astype(DType::F32));
  }
  for (auto [dt, start] : {std::pair{DType::I8, 100}, std::pair{DType::U8, 200}}) {
    Tensor a = Tensor::full({37, 41}, start, dt).eval();
    outs.push_back((a + Tensor::full({41}, 100, dt)) > 150.0);
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
    case DType::F8E4M3:  // one step of the mantissa: the devices' f32 math may round apart
      return 0.13;
    case DType::F8E5M2:
      return 0.26;
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

// A matmul with a block-quantized weight rounds its activations to 8-bit blocks of 32, the
// same way on both devices; but an activation the two computed a bit apart (sums in another
// order, exp from SIMD or from libm) can round to the next 8-bit step, which moves a product
// by max|x| / 127 times one weight: a few thousandths in a small model, within 1e-2 of its
// values' scale, where a wrong decoder, mask or cache write moves them far more.
constexpr double kQuantizedActivationTolerance = 1e-2;

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
    add_planned(std::move(c));
  }

  // A case whose plan and arguments come from elsewhere (a loaded bundle), its expected
  // `results` computed by the CPU backend; the tolerance is that of f32.
  void add_plan_case(std::shared_ptr<const jit::LaunchPlan> plan, jit::PlanArguments args,
                     std::vector<Tensor> results) {
    Case c;
    c.plan = std::move(plan);
    c.args = std::move(args);
    c.results = std::move(results);
    c.program = c.plan->description;
    c.tolerance = tolerance(DType::F32);
    c.has_floats = true;
    add_planned(std::move(c));
  }

  void add_planned(Case c) {
    for (const jit::PlannedKernel& k : c.plan->kernels) {
      const std::string source = runtime::cuda::render_cuda(*k.program);
      auto [it, added] = module_of_source_.emplace(source, static_cast<int>(modules_.size()));
      if (added) modules_.push_back({source, k.program->name});
      c.modules.push_back(it->second);
      families_.insert(k.program->anchor);
      if (runtime::cuda::matmul_reads_quantized_weight(*k.program)) {
        ++quantized_matmuls_;
        c.tolerance = std::max(c.tolerance, kQuantizedActivationTolerance);
      }
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
        const std::vector<std::shared_ptr<base::Buffer>> got =
            testing::run_emulated_plan(*kernels, *c.plan, c.args, c.modules, v);
        for (size_t o = 0; o < c.results.size(); ++o) checked += compare(c, o, *got[o], v);
      }
      if (HasFailure()) break;
    }
    counters_ = kernels->counters();
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
  int quantized_matmuls_ = 0;           // kernels that multiply by a block-quantized weight
  testing::EmulatedCounters counters_;  // what the last run_and_compare's kernels did

 private:
  using Variant = testing::EmulationVariant;

  // Output `o` of `c` against the CPU backend; the elements compared.
  static int64_t compare(const Case& c, size_t o, const base::Buffer& got, const Variant& v) {
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
  EXPECT_EQ(families_.size(), 11u);  // every anchor kind but the custom kernel and collectives
  run_and_compare();
}

// The 16-bit matmul core (docs/cuda.md): cp.async staging and ldmatrix fragments for plain
// loads, the per-element staging for the rest, 128-row and 16-row tiles, in f16 and bf16.
// Sizes are not multiples of the 128x128 tile nor of the 32-deep k-step, so every edge is
// zero-filled; a K that is not a multiple of 8 makes rows misaligned for 16-byte copies,
// which must fall back to the per-element staging (a misaligned cp.async aborts the
// emulation). Every element is compared with the CPU backend (f32 accumulation there too:
// the tolerances are those of a 16-bit result).
TEST_F(CudaEmulationTest, TensorCoreMatmulsComputeWhatTheCpuComputes) {
  for (DType dt : {DType::F16, DType::BF16}) {
    auto input = [dt](std::vector<int64_t> shape, uint64_t seed) {
      return (Tensor::randn(std::move(shape), seed, DType::F32) * 0.5).astype(dt).eval();
    };
    // A [M, K] . B [K, N], B n-contiguous: ldmatrix.trans; 2x2 tiles of 128, 3 k-steps.
    add_case({matmul(input({200, 96}, 30), input({96, 136}, 31))});
    // linear: B is the [N, K] weight, k-contiguous; K = 72 ends in a partial k-step; bias and
    // relu (or gelu) fused after the product.
    Tensor x = input({130, 72}, 32), w = input({150, 72}, 33), bias = input({150}, 34);
    add_case({relu(linear(x, w, bias))});
    add_case({gelu(matmul(x, input({72, 40}, 35)) + input({40}, 36))});
    // K = 45: rows of 90 bytes, so no 16-byte copies: the per-element fallback, both layouts.
    Tensor x45 = input({40, 45}, 37);
    add_case({matmul(x45, input({45, 70}, 38))});
    add_case({linear(x45, input({24, 45}, 39), input({24}, 40))});
    // Small M (decode): 16-row tiles, with M = 1, 5 and 16 and a batch of them.
    add_case({linear(input({1, 64}, 41), input({200, 64}, 42))});
    add_case({relu(linear(input({5, 96}, 43), input({75, 96}, 44), input({75}, 55)))});
    add_case({matmul(input({16, 40}, 45), input({40, 130}, 46))});
    add_case({matmul(input({3, 4, 56}, 47), input({3, 56, 24}, 48))});
    // Decode with a long K: 2 tiles of 16x128 on the emulation's 2 SMs split K into 4 chunks
    // of 4 k-steps (the variants without split reductions run it unsplit), bias and gelu.
    add_case({gelu(linear(input({1, 512}, 57), input({200, 512}, 58), input({200}, 59)))});
    // No rows: no tiles, so nothing to split (the chunk count divided by the 0 tiles).
    add_case({linear(input({0, 512}, 62), input({200, 512}, 63))});
    // 128-row tiles split too (1 tile; K = 300: 2 chunks of 5 k-steps, the last partial).
    add_case({matmul(input({100, 300}, 60), input({300, 64}, 61))});
    // Batched and broadcast, 128-row tiles; an A computed by a prologue (per-element staging)
    // beside a B copied by cp.async; an A sliced at an offset of 8 elements (still aligned)
    // and one at an offset of 1 (not: the fallback).
    Tensor batched = input({2, 150, 64}, 49);
    add_case({matmul(batched, input({64, 48}, 50))});
    add_case({matmul(relu(batched) * 0.5, input({2, 64, 48}, 51))});
    Tensor wide = input({20, 72}, 52);
    add_case({matmul(wide.slice(1, 8, 72), input({64, 33}, 53))});
    add_case({matmul(wide.slice(1, 1, 65), input({64, 33}, 54))});
    // Rows 72 elements apart holding K = 60: aligned, with a last chunk of 4 elements (a
    // cp.async of 8 bytes, zero-filled to 16), in A and in a k-contiguous B.
    add_case({linear(wide.slice(1, 0, 60), input({24, 72}, 56).slice(1, 0, 60))});
  }
  run_and_compare();
  EXPECT_GT(counters_.cp_async_copies, 0);
  EXPECT_GT(counters_.ldmatrix_loads, 0);
}

// 8-bit float matmuls on the tensor cores (docs/cuda.md): e4m3 and e5m2 operands staged as
// f16 element by element (no cp.async: they are not 16-bit), both B layouts ([k][n], and a
// transposed weight's [n][k]), a partial last
// k-step, a fused bias and relu, a decode step with K split over blocks. The values are
// small multiples of 1/8 (e4m3) or 1/4 (e5m2), so every f32 sum is exact on both devices
// and the rounded 8-bit results must be the CPU's, bit for bit.
TEST_F(CudaEmulationTest, EightBitFloatMatmulsRunOnTensorCores) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  testing::EmulatedPlans plans;
  std::vector<Tensor> results;
  for (DType dt : {DType::F8E4M3, DType::F8E5M2}) {
    const int steps = dt == DType::F8E4M3 ? 16 : 7;  // integers each format holds exactly
    const float unit = dt == DType::F8E4M3 ? 0.125f : 0.25f;
    auto input = [&](std::vector<int64_t> shape) {
      std::uniform_int_distribution<int> step(-steps, steps);
      std::vector<float> v(static_cast<size_t>(testing::count(shape)));
      for (float& x : v) x = static_cast<float>(step(rng)) * unit;
      return Tensor::from_vector(v, std::move(shape)).astype(dt).eval();
    };
    const Tensor x = input({130, 72});
    for (const Tensor& t :
         {relu(linear(x, input({150, 72}), input({150}))), matmul(x, input({72, 40})),
          linear(input({1, 512}), input({200, 512}), input({200}))}) {
      plans.add(t);
      results.push_back(t);
      int tensor_core_kernels = 0;
      for (const jit::PlannedKernel& k : plans.plans.back()->kernels) {
        tensor_core_kernels += runtime::cuda::matmul_uses_tensor_cores(*k.program) ? 1 : 0;
      }
      EXPECT_EQ(tensor_core_kernels, 1) << dtype_name(dt) << " case " << results.size() - 1;
    }
  }
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(plans.modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const testing::EmulationVariant& v : testing::emulation_variants()) {
    SCOPED_TRACE(v.name());
    for (size_t c = 0; c < results.size(); ++c) {
      const std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, c, v);
      const std::vector<float> want = results[c].astype(DType::F32).to_vector<float>();
      ASSERT_EQ(out[0]->nbytes(), static_cast<int64_t>(want.size())) << "case " << c;
      for (size_t e = 0; e < want.size(); ++e) {
        ASSERT_EQ(ops::load_double(*out[0], results[c].dtype(), static_cast<int64_t>(e)), want[e])
            << "case " << c << " element " << e;
      }
    }
  }
  EXPECT_GT(kernels->counters().ldmatrix_loads, 0);
  EXPECT_EQ(kernels->counters().cp_async_copies, 0);
}

// The tensor-core attention (docs/cuda.md): K and V tiles staged by 16-byte
// cp.async (K of the next tile while P V of this one runs), K's fragments by ldmatrix, V's by
// ldmatrix.trans, Q's by ldmatrix; per-element staging where the head dim is not a multiple
// of 8 (36: rows of 72 bytes, a misaligned cp.async would abort the emulation) or a prologue
// computes K; a head dim of 20 in rows of 32 copies a partial last chunk. Key counts are not
// multiples of the 64-key tile (zero-filled edges); causal, an additive mask (score ops),
// grouped-query heads, and K/V as the head-split views of [batch, tokens, heads * dim] projections
// a model passes (a fused qkv slice too: offset heads * dim, aligned). Every element is compared
// with the CPU backend.
TEST_F(CudaEmulationTest, TensorCoreAttentionComputesWhatTheCpuComputes) {
  for (DType dt : {DType::F16, DType::BF16}) {
    auto input = [dt](std::vector<int64_t> shape, uint64_t seed) {
      return Tensor::randn(std::move(shape), seed, DType::F32).astype(dt).eval();
    };
    for (int64_t dim : {32, 64, 128, 36}) {
      // 2 query heads over 1 key/value head; 70 queries (a partial 128-row block), 100 keys.
      Tensor q = input({1, 2, 70, dim}, 70 + dim), k = input({1, 1, 100, dim}, 71 + dim),
             v = input({1, 1, 100, dim}, 72 + dim);
      add_case({scaled_dot_product_attention(q, k, v, Tensor(), /*causal=*/true)});
      Tensor mask = input({70, 100}, 73 + dim);
      add_case({scaled_dot_product_attention(q, k, v, mask)});
    }
    // A model's layout: q, k, v as [batch, heads, tokens, dim] views of one [2, 150, 3 * 4 * 32]
    // projection (strided, head dim contiguous, K at an offset of 128 elements); then 4 query
    // heads over 2 key/value heads from a [2, 150, 2 * 2 * 64] one, K's head dim cut to 32.
    Tensor qkv = input({2, 150, 3 * 4 * 32}, 80).reshape({2, 150, 12, 32});
    Tensor q = qkv.slice(2, 0, 4).transpose(1, 2), k = qkv.slice(2, 4, 8).transpose(1, 2),
           v = qkv.slice(2, 8, 12).transpose(1, 2);
    add_case({scaled_dot_product_attention(q, k, v, Tensor(), /*causal=*/true)});
    Tensor kv = input({2, 150, 2 * 2 * 64}, 81).reshape({2, 150, 4, 64});
    add_case({scaled_dot_product_attention(q, kv.slice(2, 0, 2).transpose(1, 2).slice(3, 0, 32),
                                           kv.slice(2, 2, 4).transpose(1, 2))});
    // A head dim of 20 cut from rows of 32: aligned, so copied, with a last chunk of 4
    // elements (8 bytes, zero-filled to 16) and a 16-column block past the head dim.
    Tensor wide = input({1, 2, 100, 32}, 82);
    add_case({scaled_dot_product_attention(input({1, 2, 70, 20}, 83), wide.slice(3, 0, 20),
                                           wide.slice(3, 8, 28), Tensor(), /*causal=*/true)});
    // K computed by a prologue (per-element staging) beside a V copied by cp.async.
    add_case({scaled_dot_product_attention(q, k * 0.5, v)});
  }
  run_and_compare();
  EXPECT_GT(counters_.cp_async_copies, 0);
  EXPECT_GT(counters_.ldmatrix_loads, 0);
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

// Concat, update_slice and cumsum: groups of 16 bytes along the innermost
// dim where the launch allows it (aligned, whole vectors), single elements where it does not
// (an innermost dim or an operand's share that is no multiple of the vector, a start off the
// vector grid), and grid-stride loops whose multi-index steps by the grid's stride with
// carries: the larger cases have more groups than the emulation's 2 SMs x 32 blocks x 256
// threads, so threads step across rows and dims. f32 (4 per vector) and bf16 (8).
TEST_F(CudaEmulationTest, ConcatUpdateSliceAndCumsumComputeWhatTheCpuComputes) {
  for (DType dt : {DType::F32, DType::BF16}) {
    uint64_t seed = 70;
    auto input = [&](std::vector<int64_t> shape) {
      return Tensor::randn(std::move(shape), ++seed, dt).eval();
    };
    // Concat along the innermost dim: shares of 16 and 24 (aligned for both dtypes' vectors
    // only in f32: 24 is no multiple of 8) and of 3 and 6 (never); along an outer dim with
    // an innermost dim of 16 (aligned) and of 7 (not); rank 3 along the middle with a
    // prologue; and large ones whose groups outnumber the threads, with innermost dims (240
    // and 127 elements) that the grid stride does not divide, so the stepped multi-index
    // carries along every dim, in the vector and in the scalar loop.
    add_case({concat({input({6, 16}), input({6, 24})}, 1)});
    add_case({concat({input({6, 16}), input({6, 32}), input({6, 8})}, 1) * 2.0});
    add_case({concat({input({5, 3}), input({5, 6})}, 1)});
    add_case({concat({input({3, 16}), input({5, 16})}, 0)});
    add_case({concat({input({3, 7}), input({4, 7})}, 0)});
    add_case({concat({relu(input({2, 3, 16})), input({2, 5, 16})}, 1)});
    add_case({concat({input({800, 96}), input({800, 144})}, 1)});
    add_case({concat({input({300, 77}), input({300, 50})}, 1)});
    add_case({concat({input({3, 40, 128}), input({3, 60, 128})}, 1)});
    // update_slice along the outermost dim (aligned), along the innermost dim at a start on
    // the vector grid (aligned) and off it (not), with an innermost dim of 10 (not), and
    // large ones that step (rows of 24 elements: aligned; of 13: not).
    add_case({update_slice(input({4, 64, 64}), input({1, 64, 64}), 0, 2)});
    add_case({update_slice(input({8, 40}), input({8, 16}), 1, 8)});
    add_case({update_slice(input({8, 40}), input({8, 16}), 1, 3)});
    add_case({update_slice(input({6, 10}), input({2, 10}), 0, 1)});
    add_case({update_slice(input({90, 100, 24}), relu(input({80, 100, 24})), 0, 9)});
    add_case({update_slice(input({45, 100, 13}), input({40, 100, 13}), 0, 2)});
    add_case({update_slice(input({3, 40, 32}), input({3, 20, 32}), 1, 13)});
    // cumsum along the innermost dim: rows of 2400 (several chunks of 256 vectors), 600,
    // 301 (not whole vectors); along outer dims; with a prologue and an epilogue.
    add_case({cumsum(input({20, 2400}), 1)});
    add_case({cumsum(input({37, 600}) * 0.5, 1) + 1.0});
    add_case({cumsum(input({20, 301}), 1)});
    add_case({cumsum(input({300, 20}), 0)});
    add_case({cumsum(input({4, 300, 6}), 1)});
    add_case({cumsum(abs(input({3, 5, 1000})), 2)});
    // Along outer axes with at least 32 rows: a block per 32 rows, warps along the axis
    // (70 rows: a partial last block; 83 positions: a partial last chunk of 8).
    add_case({cumsum(input({83, 70}), 0)});
    add_case({cumsum(input({3, 50, 40}) * 2.0, 1) - 1.0});
    // ONNX's exclusive and reverse forms in each path: the vector rows (forward only), the
    // row loop (reverse rows, rows of 301, an outer axis of fewer than 32 rows) and the
    // column scan.
    add_case({cumsum(input({20, 2400}), 1, /*exclusive=*/true)});
    add_case({cumsum(input({37, 600}) * 0.5, 1, true, true) + 1.0});
    add_case({cumsum(input({20, 301}), 1, false, /*reverse=*/true)});
    add_case({cumsum(input({20, 301}), 1, true)});
    add_case({cumsum(input({300, 20}), 0, true, true)});
    add_case({cumsum(input({83, 70}), 0, true)});
    add_case({cumsum(input({83, 70}), 0, false, true)});
    add_case({cumsum(input({3, 50, 40}) * 2.0, 1, true, true) - 1.0});
  }
  // An inf in rows the vector path reads: the sums before it stay finite in every form (a
  // thread's prefix is an exclusive scan, not an inclusive one with its own total taken off).
  std::vector<float> with_inf(4 * 2400, 0.25f);
  with_inf[7] = std::numeric_limits<float>::infinity();
  with_inf[2400 + 1234] = -std::numeric_limits<float>::infinity();
  Tensor inf_rows = Tensor::from_vector(with_inf, {4, 2400});
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) add_case({cumsum(inf_rows, 1, exclusive, reverse)});
  }
  // Integers wrap exactly: i32 rows of 1000 (aligned) and 999 (not).
  add_case({cumsum(Tensor::arange(20000, DType::I32).reshape({20, 1000}), 1)});
  add_case({cumsum(Tensor::arange(19980, DType::I32).reshape({20, 999}) * 100000, 1)});
  add_case({cumsum(Tensor::arange(19980, DType::I32).reshape({999, 20}) * 100000, 0)});
  add_case({cumsum(Tensor::arange(4000, DType::I64).reshape({100, 40}), 0)});
  add_case({cumsum(Tensor::arange(20000, DType::I32).reshape({20, 1000}), 1, true)});
  add_case({cumsum(Tensor::arange(19980, DType::I32).reshape({999, 20}) * 100000, 0, true, true)});
  add_case({cumsum(Tensor::arange(19980, DType::I32).reshape({20, 999}) * 100000, 1, false, true)});
  run_and_compare();
}

// Reversed views (flip and backward slices: negative strides) read by every family. The
// 16-byte pointwise path must not take a view reversed along its innermost dim (the scalar
// loop reads it), while one reversed along an outer dim, its rows contiguous and aligned,
// still loads vectors; reductions, row norms, cumsum, concat, update_slice and argmax read
// through the view; tensor-core matmul and attention copy a row-reversed operand by
// cp.async with a negative row stride (still a multiple of 8), and stage the others element
// by element. Bottom-right causal attention: the tensor-core form, and the portable one
// (f32) with Sq < Sk and Sq > Sk (the first rows see no key: NaN on both devices).
TEST_F(CudaEmulationTest, ReversedViewsAndBottomRightAttentionComputeWhatTheCpuComputes) {
  constexpr int64_t kBeforeFirst = std::numeric_limits<int64_t>::min();
  for (DType dt : {DType::F32, DType::BF16}) {
    uint64_t seed = 90;
    auto input = [&](std::vector<int64_t> shape) {
      return Tensor::randn(std::move(shape), ++seed, dt).eval();
    };
    Tensor x = input({150, 304}), w = input({304});
    add_case({flip(x, {1}) * 2.0 + x});
    add_case({flip(x, {0}) * 2.0 + x});
    add_case({x.slice(1, -1, kBeforeFirst, -3) + 1.0});
    add_case({x.slice(0, 140, 3, -7).slice(1, 300, 0, -1) - x.slice(0, 0, 20).slice(1, 0, 300)});
    add_case({sum(flip(x), {1})});
    add_case({max(flip(x, {0}), {0})});
    add_case({argmax(flip(x, {1}), 1)});
    add_case({softmax(flip(x, {1}))});
    add_case({layer_norm(flip(x, {0}), w, flip(w))});
    add_case({cumsum(flip(x, {1}), 1)});
    add_case({cumsum(flip(x, {0}), 0, true)});
    add_case({concat({flip(x, {1}), x}, 1)});
    add_case({update_slice(x, flip(x.slice(0, 0, 10)), 0, 20)});
    add_case({matmul(flip(input({70, 64}), {0}), flip(input({64, 40}), {1}))});
    add_case({matmul(input({70, 64}), flip(input({64, 40}), {0}))});
  }
  for (DType dt : {DType::F16, DType::BF16}) {
    uint64_t seed = 120;
    auto input = [&](std::vector<int64_t> shape) {
      return Tensor::randn(std::move(shape), ++seed, dt).eval();
    };
    Tensor q = input({1, 4, 70, 64}), k = input({1, 2, 100, 64}), v = input({1, 2, 100, 64});
    add_case({scaled_dot_product_attention(flip(q, {2}), flip(k, {2}), flip(v, {2, 3}), Tensor(),
                                           CausalAlignment::BottomRight)});
    add_case({scaled_dot_product_attention(q, k, v, Tensor(), CausalAlignment::BottomRight)});
    // 130 queries over 100 keys: two 128-row blocks, the first 30 rows see no key.
    add_case({scaled_dot_product_attention(input({1, 4, 130, 64}), k, v, input({130, 100}),
                                           CausalAlignment::BottomRight, 0.2)});
  }
  uint64_t seed = 140;
  auto input = [&](std::vector<int64_t> shape) {
    return Tensor::randn(std::move(shape), ++seed, DType::F32).eval();
  };
  Tensor k = input({1, 2, 300, 16}), v = input({1, 2, 300, 12});
  add_case({scaled_dot_product_attention(input({1, 2, 70, 16}), k, v, Tensor(),
                                         CausalAlignment::BottomRight)});
  add_case({scaled_dot_product_attention(input({1, 2, 130, 16}), k.slice(2, 0, 100),
                                         flip(v.slice(2, 0, 100), {2}), input({130, 100}),
                                         CausalAlignment::BottomRight)});
  run_and_compare();
}

// Row norms whose rows are longer than the emulation's row cache (48 KiB: 12,224 floats), so
// passes 2 and 3 read the row from global memory again: as 16-byte vectors in the groups
// pass 1 took when the row is contiguous and aligned (13,000 elements, f32 and bf16), one
// element at a time when it is not (13,001: the rows' starts misaligned), with outputs
// stored as vectors or, when a single row of 13,001 leaves a tail, per element; and rows of
// 1,000, cached (in the variants with dynamic shared memory), whose later passes read their
// groups back from the cache.
TEST_F(CudaEmulationTest, LongRowNormsComputeWhatTheCpuComputes) {
  for (DType dt : {DType::F32, DType::BF16}) {
    uint64_t seed = 90;
    auto input = [&](std::vector<int64_t> shape) {
      return Tensor::randn(std::move(shape), ++seed, dt).eval();
    };
    for (int64_t extent : {13000, 13001, 1000}) {
      Tensor x = input({3, extent}), w = input({extent}), b = input({extent});
      add_case({softmax(x)});
      add_case({log_softmax(x * 2.0, 1)});
      add_case({layer_norm(x, w, b) + 1.0});
      add_case({rms_norm(relu(x), w)});
      // One row: aligned loads (no other strides) even when the extent is no multiple of
      // the vector, so the groups' outputs are stored per element and a tail remains.
      Tensor row = input({extent});
      add_case({softmax(row)});
      add_case({layer_norm(row, w, b)});
    }
  }
  run_and_compare();
}

// Outer reductions (the last axis kept) with fewer than 32 outputs: a block's lanes split
// the reduced rows among them (lane l on output l % W, W the power of two that holds the
// outputs), then fold each output's shares through shuffles and shared memory. Every width
// from 1 to 31 outputs class (1, 2, 3, 4, 5, 8, 9, 16, 17, 31), sums (compensated in f32),
// means, max and the arg-reductions, over a few hundred rows; several reduced dims; a long
// extent that splits over blocks; integers.
TEST_F(CudaEmulationTest, NarrowOuterReductionsComputeWhatTheCpuComputes) {
  for (DType dt : {DType::F32, DType::BF16}) {
    uint64_t seed = 110;
    for (int64_t columns : {1, 2, 3, 4, 5, 8, 9, 16, 17, 31}) {
      Tensor x = Tensor::randn({700, columns}, ++seed, dt).eval();
      add_case({sum(x, {0})});
      add_case({mean(x * x, {0}, true)});
      add_case({max(x, {0})});
      add_case({argmax(x, 0)});
      add_case({argmin(x, 0)});
    }
    Tensor cube = Tensor::randn({20, 50, 3}, ++seed, dt).eval();
    add_case({sum(cube, {0, 1})});
    add_case({min(cube, {0, 1})});
    add_case({sum(Tensor::randn({5000, 7}, ++seed, dt).eval(), {0})});
  }
  add_case({sum(Tensor::arange(1500, DType::I32).reshape({300, 5}), {0})});
  run_and_compare();
}

// The small model of `architecture` (tests/llm/small_llama.h) as the forward reads it, its
// matrices stored as `format` where their rows hold whole blocks: every one but the MLP's
// down projection, whose rows of 48 values are no multiple of 32, so it stays f32. Read with
// the loader's own steps, from memory rather than a file: the kernels are under test here,
// not the loading.
llm::Model::Data small_model_data(const std::string& architecture, bool tied, DType format) {
  GgufFile file = testing::small_model(architecture, tied);
  if (format != DType::F32) {
    for (auto& [name, t] : file.tensors) {
      if (t.ndim() == 2 && t.shape()[1] % block_values(format) == 0) t = t.astype(format);
    }
  }
  const std::string path = architecture + ".gguf";  // only named in errors
  return llm::read_weights(file, llm::read_config(file, path), path);
}

// The kernels of kiln::llm's forward (llm/llama_forward.cc) as a Session runs them: a prefill
// of 5 tokens, a decode step, then a chunk of 4 tokens at position 6. Each step's logits and
// every layer's updated keys and values are checked, then evaluated on the CPU, so that the
// next step reads a cache that holds values. llama, and gemma3 with its sliding-window layer
// (the decode step and the chunk no longer see position 0), QK norms, post norms and GELU;
// each with f32 weights and with block-quantized ones (Q4_1, Q8_0), whose projections run the
// integer products of a real decode. What the corpus checks one op at a time meets here as a
// model's plans fuse it: the quantized matrix-vector and matrix products with their
// epilogues, RMSNorm and RoPE on the projected heads, attention over a slice of the cache
// with its mask (a bias row for one query, compared positions for a chunk), and the cache
// writes.
TEST_F(CudaEmulationTest, LlmForwardStepsComputeWhatTheCpuComputes) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE("KILN_TEST_SEED=" + std::to_string(testing::test_seed()));
  struct SmallModel {
    std::string architecture;
    bool tied;
    DType weights;
  };
  for (const SmallModel& m :
       {SmallModel{"llama", false, DType::F32}, SmallModel{"llama", false, DType::Q4_1},
        SmallModel{"gemma3", true, DType::F32}, SmallModel{"gemma3", true, DType::Q8_0}}) {
    const llm::Model::Data model = small_model_data(m.architecture, m.tied, m.weights);
    // 80 positions, of which attention reads the first 64 (its stride): a slice of the cache.
    llm::KvCache cache = llm::empty_kv_cache(model, 80);
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.config.vocab) - 1);
    auto step = [&](int64_t start, int64_t tokens) {
      std::vector<int32_t> ids(static_cast<size_t>(tokens));
      for (int32_t& id : ids) id = token(rng);
      std::vector<Tensor> results = {llm::llama_forward(model, cache, ids, start)};
      results.insert(results.end(), cache.keys.begin(), cache.keys.end());
      results.insert(results.end(), cache.values.begin(), cache.values.end());
      add_case(results);
      kiln::eval(results);
    };
    step(0, 5);
    step(5, 1);
    step(6, 4);
  }
  EXPECT_TRUE(families_.count(jit::AnchorKind::kAttention));
  EXPECT_TRUE(families_.count(jit::AnchorKind::kUpdateSlice));
  EXPECT_GT(quantized_matmuls_, 0);
  run_and_compare();
}

// A bundle saved from the CPU: the plans it loads, run by the CUDA kernels rendered from its
// programs (with the captured weights bound from the bundle), compute what the CPU computes.
// Plans are the same for every device (the planner never asks which), so a bundle's plans
// serve either.
TEST_F(CudaEmulationTest, ABundlesLoadedPlansComputeWhatTheCpuComputes) {
  const Tensor w1 = Tensor::randn({32, 48}, 21).eval(), b1 = Tensor::randn({48}, 22).eval();
  const Tensor w2 = Tensor::randn({48, 32}, 23).eval(), g = Tensor::rand({32}, 24).eval();
  Compiled block = compile([&](const std::vector<Tensor>& in) {
    const Tensor x = in[0];
    const Tensor q = x.reshape({2, 6, 2, 16}).transpose(1, 2);
    const Tensor attended = scaled_dot_product_attention(q, q, q, Tensor(), true, 0.25);
    const Tensor h = layer_norm(x + attended.transpose(1, 2).reshape({2, 6, 32}), g, g * 0.5, 1e-5);
    return std::vector{h + matmul(gelu(matmul(h, w1) + b1), w2), softmax(h, -1)};
  });
  std::vector<Tensor> inputs = {Tensor::randn({2, 6, 32}, 25).eval()};
  block(inputs);
  save_compiled(block, path("bundle"));
  std::vector<jit::BundleRecording> loaded = jit::read_bundle_recordings(path("bundle"));
  ASSERT_EQ(loaded.size(), 1u);
  for (int64_t seed : {26, 27}) {  // fresh inputs: the recording's own are not reused
    const Tensor x = Tensor::randn({2, 6, 32}, seed).eval();
    const jit::Recording& rec = *loaded[0].recording;
    jit::PlanArguments args;
    args.params = rec.params;
    for (const jit::InputBinding& b : rec.inputs) {
      args.inputs.push_back(b.arg >= 0 ? detail::TensorAccess::node(x)->buffer : b.fixed);
    }
    std::vector<Tensor> want = block({x});
    eval(want);
    add_plan_case(rec.plan, args, want);
  }
  EXPECT_TRUE(families_.count(jit::AnchorKind::kAttention));
  EXPECT_TRUE(families_.count(jit::AnchorKind::kMatmul));
  run_and_compare();
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Quantized weights in CUDA kernels (every block format). A matmul with the transposed weight
// runs the quantized kernel (render_quantized_matmul.cc): activations rounded to 8-bit blocks
// as on the CPU, integer dot products, so each result must lie within the accuracy contract
// of docs/contracts.md around the exact product with the dequantized weight, computed here in
// double from the dequantized values. The shapes take every path: 8-row tiles (5 rows, and a
// matrix-vector product), 64-row tiles (70 rows: two, the second partial), a last chunk
// shorter than 256 values, K split over blocks (the split variants), a bias with gelu fused,
// a rank-3 A, a view that slices k at block boundaries, more tiles than blocks, and a NaN
// activation. The untransposed weight and a k-slice that cuts a block are decoded value by
// value in f32 (as the embedding gather does), checked against the reference evaluator to
// f32 rounding. A decoder off by one step of a block's scale moves the products far outside
// either bound.
class CudaEmulationQuantized : public testing::ScratchDirTest {};

// One plan of the test: y = gelu(x w^T + b) * 2 when `epilogue`, else x w^T, rows x n,
// checked against the contract's bound; or (`exact`) a result the kernels compute from the
// decoded values in f32, checked against the reference evaluator.
struct QuantizedCase {
  Tensor result;
  bool exact = false;
  std::vector<float> x, w;  // x [rows, k], the dequantized w [n, k]
  int64_t rows = 0, n = 0, k = 0;
  bool epilogue = false;
};

// The largest error the contract allows at output (r, j) of `c`: the product's bound, times
// gelu's steepest slope (1.13) and 2 after the epilogue.
double allowed(const QuantizedCase& c, int64_t r, int64_t j) {
  const double bound = testing::quantized_product_bound(&c.x[r * c.k], &c.w[j * c.k], c.k);
  return c.epilogue ? 2 * 1.13 * bound + 1e-6 : bound;
}

// Every element of `got` against `c`.
void expect_quantized_case(const QuantizedCase& c, const base::Buffer& got, size_t plan) {
  const std::vector<float> want = testing::reference_tensor(c.result).to_vector<float>();
  ASSERT_EQ(got.nbytes(), static_cast<int64_t>(want.size() * 4)) << "plan " << plan;
  const float* y = got.as<float>();
  if (c.exact) {
    // f32 sums against double ones: within f32 rounding of the largest value (sums cancel).
    float magnitude = 0;
    for (float w : want) magnitude = std::max(magnitude, std::fabs(w));
    for (size_t e = 0; e < want.size(); ++e) {
      ASSERT_NEAR(y[e], want[e], 2e-5 * (1 + magnitude)) << "plan " << plan << " element " << e;
    }
    return;
  }
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t j = 0; j < c.n; ++j) {
      const float wanted = want[r * c.n + j], value = y[r * c.n + j];
      if (std::isnan(wanted)) {  // a row with a NaN activation is NaN, as on the CPU
        ASSERT_TRUE(std::isnan(value)) << "plan " << plan << ", row " << r << ", column " << j;
        continue;
      }
      ASSERT_NEAR(value, wanted, allowed(c, r, j))
          << "plan " << plan << ", row " << r << ", column " << j;
    }
  }
}

// Columns [from, from + count) of each row of the [rows, k] matrix `m`.
std::vector<float> columns(const std::vector<float>& m, int64_t k, int64_t from, int64_t count) {
  std::vector<float> out;
  for (size_t r = 0; r < m.size() / static_cast<size_t>(k); ++r) {
    out.insert(out.end(), m.begin() + r * k + from, m.begin() + r * k + from + count);
  }
  return out;
}

TEST_F(CudaEmulationQuantized, QuantizedWeightsComputeTheReferenceProduct) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  testing::EmulatedPlans plans;
  std::vector<QuantizedCase> cases;  // one per plan
  auto add = [&](QuantizedCase c) {
    plans.add(c.result);
    cases.push_back(std::move(c));
  };
  for (DType format : kBlockDTypes) {
    const int64_t bv = block_values(format), n = 40;
    // Long enough for 4 chunks of 256 (so split in two), the 32-formats' last one partial.
    const int64_t short_k = 2 * bv, long_k = bv == 32 ? 800 : 1024;
    for (const int64_t k : {short_k, long_k}) {
      const Tensor w = testing::random_block_tensor(format, {n, k}, rng);
      const std::vector<float> wf = w.astype(DType::F32).to_vector<float>();
      const Tensor bias = Tensor::from_vector(testing::random_floats(n, rng), {n});
      auto product = [&](int64_t rows, bool epilogue) {
        std::vector<float> x = testing::random_floats(rows * k, rng);
        const Tensor xt = Tensor::from_vector(
            x, rows == 1 ? std::vector<int64_t>{k} : std::vector<int64_t>{rows, k});
        const Tensor y = epilogue ? gelu(linear(xt, w, bias)) * 2.0 : matmul(xt, w.transpose(0, 1));
        add({y, false, std::move(x), wf, rows, n, k, epilogue});
      };
      product(1, false);
      product(5, k == short_k);
      product(70, k == long_k);
      if (k == short_k) {
        add({embedding(w, Tensor::from_vector(std::vector<int32_t>{5, 0, 39, 5}, {4})) + 1.0,
             true});
      }
    }
    // Views of the transposed weight that slice k: from a block boundary over whole blocks
    // (read in place), and one that cuts a block (a 32-block, or a super-block at 32
    // values), which the kernel decodes value by value. A of rank 3 (6 rows).
    {
      const int64_t k = 4 * bv, n = 24;
      const Tensor w = testing::random_block_tensor(format, {n, k}, rng);
      const std::vector<float> wf = w.astype(DType::F32).to_vector<float>();
      std::vector<float> x = testing::random_floats(6 * 2 * bv, rng);
      const Tensor xt = Tensor::from_vector(x, {2, 3, 2 * bv});
      add({matmul(xt, w.transpose(0, 1).slice(0, bv, 3 * bv)), false, std::move(x),
           columns(wf, k, bv, 2 * bv), 6, n, 2 * bv, false});
      const int64_t cut = bv == 32 ? 40 : 288;
      add({matmul(Tensor::from_vector(testing::random_floats(3 * cut, rng), {3, cut}),
                  w.transpose(0, 1).slice(0, 0, cut)),
           true});
    }
    // The weight as [k, n'], not transposed: k is not contiguous, so it is decoded; with
    // K = 1024 split in two as well.
    for (const int64_t k : {int64_t{48}, int64_t{1024}}) {
      const Tensor w = testing::random_block_tensor(format, {k, bv}, rng);
      add({matmul(Tensor::from_vector(testing::random_floats(3 * k, rng), {3, k}), w), true});
    }
  }
  // More tiles than the grid has blocks (the emulation's 2 SMs give 64): 66 tiles of 32
  // columns, each block looping over two.
  for (DType format : {DType::Q4_0, DType::Q6_K}) {
    const int64_t bv = block_values(format), n = 2100;
    const Tensor w = testing::random_block_tensor(format, {n, bv}, rng);
    std::vector<float> x = testing::random_floats(3 * bv, rng);
    const Tensor y = matmul(Tensor::from_vector(x, {3, bv}), w.transpose(0, 1));
    add({y, false, std::move(x), w.astype(DType::F32).to_vector<float>(), 3, n, bv, false});
  }
  // A NaN in one row of A: that row's results are NaN, the others are not.
  {
    const Tensor w = testing::random_block_tensor(DType::Q8_0, {24, 64}, rng);
    std::vector<float> x = testing::random_floats(4 * 64, rng);
    x[2 * 64 + 17] = std::numeric_limits<float>::quiet_NaN();
    const Tensor y = matmul(Tensor::from_vector(x, {4, 64}), w.transpose(0, 1));
    add({y, false, std::move(x), w.astype(DType::F32).to_vector<float>(), 4, 24, 64, false});
  }
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(plans.modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const testing::EmulationVariant& v : testing::emulation_variants()) {
    SCOPED_TRACE(v.name());
    for (size_t p = 0; p < cases.size(); ++p) {
      const int64_t copies = kernels->counters().cp_async_copies;
      const std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, p, v);
      // The quantized kernel stages the weight by cp.async; the decoding paths copy nothing.
      EXPECT_EQ(kernels->counters().cp_async_copies > copies, !cases[p].exact) << "plan " << p;
      expect_quantized_case(cases[p], *out[0], p);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace kiln
