// The CPU code generator (runtime/cpu/compiled_pointwise.h): a compiled pointwise loop
// computes the same bits as the tile evaluator, element by element, over fresh random inputs
// with NaNs, infinities and signed zeros among them; kernels it does not compile, and a
// compiler that cannot run, leave the evaluator in charge with the same results.
#include "runtime/cpu/compiled_pointwise.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "runtime/cpu/host_compiler.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace cpu = runtime::cpu;

// Compiled kernels of every size while alive (the default only compiles large ones), each
// compiled at its first launch (the default compiles at the second, in the background).
class CompileEveryKernel {
 public:
  CompileEveryKernel() {
    cpu::set_compiled_pointwise_min_elements(0);
    cpu::set_host_compile_mode(cpu::HostCompileMode::kWait);
  }
  ~CompileEveryKernel() {
    cpu::set_compiled_pointwise_min_elements(-1);
    cpu::set_host_compile_mode(std::nullopt);
  }
};

// Random floats with the special values spread among them.
std::vector<float> inputs_with_specials(size_t n, std::mt19937_64& rng) {
  std::vector<float> v = testing::random_floats(n, rng, -12, 12);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e-30f,
                            -3e38f,
                            88.5f,
                            -104.0f};
  std::uniform_int_distribution<size_t> at(0, n - 1);
  for (int r = 0; r < 40; ++r) {
    for (float s : specials) v[at(rng)] = s;
  }
  return v;
}

// Whether a and b hold the same bits (any NaN matches any NaN: both devices' NaNs carry no
// payload a user can see).
::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// f(x, y)'s tensors evaluated in one sync through the tile evaluator, then through compiled
// loops.
struct BothWays {
  std::vector<std::vector<float>> evaluated, compiled;
  int64_t compiled_runs = 0, kernels_launched = 0;
};

using Outputs = std::function<std::vector<Tensor>(const Tensor&, const Tensor&)>;

std::vector<std::vector<float>> evaluate(const Outputs& f, const std::vector<float>& x,
                                         const std::vector<float>& y,
                                         const std::vector<int64_t>& shape) {
  std::vector<Tensor> outputs = f(Tensor::from_vector(x, shape), Tensor::from_vector(y, shape));
  eval(outputs);
  std::vector<std::vector<float>> values;
  values.reserve(outputs.size());
  for (const Tensor& t : outputs) values.push_back(t.to_vector<float>());
  return values;
}

// x and y have `shape`, or are vectors when it is empty.
BothWays evaluate_both_ways(const Outputs& f, const std::vector<float>& x,
                            const std::vector<float>& y, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(x.size())};
  BothWays out;
  cpu::set_compiled_pointwise_min_elements(std::numeric_limits<int64_t>::max());
  out.evaluated = evaluate(f, x, y, shape);
  CompileEveryKernel compile;
  const int64_t runs = cpu::compiled_pointwise_runs();
  const int64_t launched = stats().kernels_launched;
  out.compiled = evaluate(f, x, y, shape);
  out.compiled_runs = cpu::compiled_pointwise_runs() - runs;
  out.kernels_launched = stats().kernels_launched - launched;
  return out;
}

bool compiler_available() {
  return cpu::host_compiler_enabled() && default_device().type == DeviceType::CPU;
}

// Every op the generator compiles, alone and fused between a product and a sum with
// constants, on an odd size (so the last positions take the one-lane tail). One sync, so
// the planner's few kernels are compiled once each.
TEST(CompiledPointwise, EveryCompiledOpGivesTheEvaluatorsBits) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<float> x = inputs_with_specials(40'003, rng);
  const std::vector<float> y = inputs_with_specials(40'003, rng);
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<Op> ops = {[](const Tensor& a, const Tensor&) { return neg(a); },
                               [](const Tensor& a, const Tensor&) { return abs(a); },
                               [](const Tensor& a, const Tensor&) { return sqrt(a); },
                               [](const Tensor& a, const Tensor&) { return rsqrt(a); },
                               [](const Tensor& a, const Tensor&) { return reciprocal(a); },
                               [](const Tensor& a, const Tensor&) { return square(a); },
                               [](const Tensor& a, const Tensor&) { return relu(a); },
                               [](const Tensor& a, const Tensor&) { return exp(a); },
                               [](const Tensor& a, const Tensor&) { return log(a); },
                               [](const Tensor& a, const Tensor&) { return tanh(a); },
                               [](const Tensor& a, const Tensor&) { return sigmoid(a); },
                               [](const Tensor& a, const Tensor&) { return silu(a); },
                               [](const Tensor& a, const Tensor&) { return erf(a); },
                               [](const Tensor& a, const Tensor&) { return gelu(a); },
                               [](const Tensor& a, const Tensor&) { return log1p(a); },
                               [](const Tensor& a, const Tensor&) { return expm1(a); },
                               [](const Tensor& a, const Tensor& b) { return a + b; },
                               [](const Tensor& a, const Tensor& b) { return a - b; },
                               [](const Tensor& a, const Tensor& b) { return a * b; },
                               [](const Tensor& a, const Tensor& b) { return a / b; },
                               [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
                               [](const Tensor& a, const Tensor& b) { return minimum(a, b); }};
  const BothWays both = evaluate_both_ways(
      [&](const Tensor& a, const Tensor& b) {
        std::vector<Tensor> outputs;
        for (const Op& op : ops) {
          outputs.push_back(op(a, b));
          outputs.push_back(op(a * 0.75, b) + 0.5);
        }
        return outputs;
      },
      x, y);
  EXPECT_GT(both.compiled_runs, 0);
  EXPECT_EQ(both.compiled_runs, both.kernels_launched);  // every kernel of the sync
  for (size_t k = 0; k < both.compiled.size(); ++k) {
    EXPECT_TRUE(same_bits(both.compiled[k], both.evaluated[k]))
        << "op " << k / 2 << (k % 2 == 1 ? " fused" : " alone");
  }
}

// The benchmark's chain, with a scalar tensor broadcast: each input read once, the chain in
// registers, the same bits as the evaluator's passes; and within 1e-5 of float64 math.
TEST(CompiledPointwise, AChainWithABroadcastScalarGivesTheEvaluatorsBits) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed() + 1);
  const std::vector<float> x = testing::random_floats(70'001, rng, -3, 3);
  std::vector<float> s = testing::random_floats(1, rng, 0.1f, 2);
  auto chain = [&](const Tensor& a, const Tensor&) {
    const Tensor scale = Tensor::from_vector(s, {});
    return std::vector<Tensor>{tanh(exp(a * scale + 1.0) * a - a * a) + 0.25};
  };
  const BothWays both = evaluate_both_ways(chain, x, x);
  EXPECT_EQ(both.compiled_runs, 1);
  ASSERT_EQ(both.compiled.size(), 1u);
  EXPECT_TRUE(same_bits(both.compiled[0], both.evaluated[0]));
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = x[i];
    const double want = std::tanh(std::exp(a * static_cast<double>(s[0]) + 1.0) * a - a * a) + 0.25;
    ASSERT_NEAR(both.compiled[0][i], want, 1e-5 * std::max(1.0, std::fabs(want))) << "at " << i;
  }
}

// Kernels over offset slices run row by row: a stencil written as a pointwise kernel, one
// whose column vector is broadcast along each row (one value per row), and the same stencil
// written into a region of a grid (update_slice), along one axis at a start tensor's place,
// each with the evaluator's bits; the region's border keeps x's values.
TEST(CompiledPointwise, OffsetSlicesAndRegionWritesRunRowByRowWithTheEvaluatorsBits) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed() + 4);
  const int64_t rows = 37, cols = 301;
  const std::vector<float> x = inputs_with_specials(rows * cols, rng);
  const std::vector<float> y = inputs_with_specials(rows * cols, rng);
  const Slice in(1, -1), before(0, -2), after_rows(2, rows), after_cols(2, cols);
  auto stencil = [&](const Tensor& u) {
    return u.index({before, in}) + u.index({after_rows, in}) + u.index({in, before}) +
           u.index({in, after_cols}) - 4.0 * u.index({in, in});
  };
  const BothWays both = evaluate_both_ways(
      [&](const Tensor& a, const Tensor& b) {
        const Tensor start = Tensor::from_vector(std::vector<int64_t>{5}, {});
        return std::vector<Tensor>{
            stencil(a),                                 // pointwise, strided views
            a * b.index({Slice(), Slice(7, 8)}) + 0.5,  // a value per row
            update_slice(b, a.index({in, in}) + 0.25 * stencil(a), {1, 1}),      // a region
            update_slice(b, sqrt(a.index({Slice(3, 20), Slice()})), 0, start),   // rows at a start
            update_slice(b, a.index({Slice(), Slice(0, 100)}) * 3.0, 1, start),  // columns
            flip(a, {0}) - b,                     // rows read backwards
            a - b.index({Slice(3, 4), Slice()}),  // one row down every row
            a.reshape({rows, 7, 43}).index({Slice(), Slice(1, 7), Slice()}) + 1.0};  // rank 3
      },
      x, y, {rows, cols});
  EXPECT_GE(both.compiled_runs, 6);  // outputs of one space may share a kernel
  EXPECT_EQ(both.compiled_runs, both.kernels_launched);
  for (size_t k = 0; k < both.compiled.size(); ++k) {
    EXPECT_TRUE(same_bits(both.compiled[k], both.evaluated[k])) << "output " << k;
  }
  // Independently: the region's border is y's, its interior the stencil written out.
  const std::vector<float>& region = both.compiled[2];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      if (r == 0 || c == 0 || r == rows - 1 || c == cols - 1) {
        ASSERT_TRUE(same_bits({region[i]}, {y[i]})) << r << ", " << c;
        continue;
      }
      const float lap = x[i - cols] + x[i + cols] + x[i - 1] + x[i + 1] - 4.0f * x[i];
      ASSERT_TRUE(same_bits({region[i]}, {x[i] + 0.25f * lap})) << r << ", " << c;
    }
  }
  const std::vector<float>& columns = both.compiled[4];
  const std::vector<float>& flipped = both.compiled[5];
  const std::vector<float>& row_down = both.compiled[6];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float in_columns = c >= 5 && c < 105 ? x[r * cols + c - 5] * 3.0f : y[i];
      ASSERT_TRUE(same_bits({columns[i]}, {in_columns})) << r << ", " << c;
      ASSERT_TRUE(same_bits({flipped[i]}, {x[(rows - 1 - r) * cols + c] - y[i]})) << r << ", " << c;
      ASSERT_TRUE(same_bits({row_down[i]}, {x[i] - y[3 * cols + c]})) << r << ", " << c;
    }
  }
  const std::vector<float>& at_start = both.compiled[3];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float want = r >= 5 && r < 22 ? std::sqrt(x[(r - 2) * cols + c]) : y[i];
      ASSERT_TRUE(same_bits({at_start[i]}, {want})) << r << ", " << c;
    }
  }
}

// One long row (a 1-D offset slice) runs in segments, each with its pointers placed.
TEST(CompiledPointwise, ALongOffsetSliceRunsInSegmentsWithTheEvaluatorsBits) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed() + 6);
  const int64_t n = 70'001;
  const std::vector<float> x = inputs_with_specials(static_cast<size_t>(n), rng);
  const BothWays both = evaluate_both_ways(
      [&](const Tensor& a, const Tensor&) {
        return std::vector<Tensor>{a.index({Slice(1, n)}) * 3.0 - a.index({Slice(0, n - 1)})};
      },
      x, x);
  EXPECT_EQ(both.compiled_runs, 1);
  ASSERT_EQ(both.compiled[0].size(), static_cast<size_t>(n - 1));
  EXPECT_TRUE(same_bits(both.compiled[0], both.evaluated[0]));
  for (int64_t i = 0; i + 1 < n; ++i) {
    ASSERT_TRUE(same_bits({both.compiled[0][i]}, {x[i + 1] * 3.0f - x[i]})) << "at " << i;
  }
}

// f64 kernels of the ops the evaluator computes with IEEE operations alone compile too: a
// stencil written into a region, and every such op once, with the evaluator's bits; an f64
// exp does not compile (the evaluator's f64 exp is not Highway's).
TEST(CompiledPointwise, F64KernelsOfExactOpsGiveTheEvaluatorsBits) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  std::mt19937_64 rng(testing::test_seed() + 7);
  const int64_t rows = 33, cols = 257;
  const std::vector<double> x = testing::random_doubles(rows * cols, rng);
  const std::vector<double> y = testing::random_doubles(rows * cols, rng);
  const Slice in(1, -1);
  auto outputs = [&] {
    const Tensor a = Tensor::from_vector(x, {rows, cols}), b = Tensor::from_vector(y, {rows, cols});
    const Tensor lap = a.index({Slice(0, -2), in}) + a.index({Slice(2, rows), in}) +
                       a.index({in, Slice(0, -2)}) + a.index({in, Slice(2, cols)}) -
                       4.0 * a.index({in, in});
    std::vector<Tensor> all = {update_slice(b, a.index({in, in}) + 0.2 * lap, {1, 1}),
                               rsqrt(abs(a)) + reciprocal(b) - square(-a) / sqrt(abs(b)),
                               exp(a.index({Slice(0, 5), Slice()}))};  // a kernel of its own
    eval(all);
    std::vector<std::vector<double>> values;
    values.reserve(all.size());
    for (const Tensor& t : all) values.push_back(t.to_vector<double>());
    return values;
  };
  cpu::set_compiled_pointwise_min_elements(std::numeric_limits<int64_t>::max());
  const std::vector<std::vector<double>> evaluated = outputs();
  CompileEveryKernel compile;
  const int64_t runs = cpu::compiled_pointwise_runs();
  const int64_t launched = stats().kernels_launched;
  const std::vector<std::vector<double>> compiled = outputs();
  EXPECT_EQ(cpu::compiled_pointwise_runs() - runs, stats().kernels_launched - launched - 1)
      << "every kernel but exp's";
  for (size_t k = 0; k < compiled.size(); ++k) {
    ASSERT_EQ(compiled[k].size(), evaluated[k].size());
    for (size_t i = 0; i < compiled[k].size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint64_t>(compiled[k][i]), std::bit_cast<uint64_t>(evaluated[k][i]))
          << "output " << k << " at " << i;
    }
  }
  for (int64_t r = 1; r + 1 < rows; ++r) {
    for (int64_t c = 1; c + 1 < cols; ++c) {
      const int64_t i = r * cols + c;
      const double lap = x[i - cols] + x[i + cols] + x[i - 1] + x[i + 1] - 4.0 * x[i];
      ASSERT_EQ(compiled[0][i], x[i] + 0.2 * lap) << r << ", " << c;
    }
  }
}

// Rows shorter than a compiled call pays for stay on the evaluator.
TEST(CompiledPointwise, ShortRowsOfOffsetSlicesStayOnTheEvaluator) {
  CompileEveryKernel compile;
  std::mt19937_64 rng(testing::test_seed() + 5);
  const std::vector<float> x = testing::random_floats(500 * 20, rng);
  const Tensor t = Tensor::from_vector(x, {500, 20});
  const int64_t before = cpu::compiled_pointwise_runs();
  const std::vector<float> got =
      (t.index({Slice(), Slice(1, 20)}) - t.index({Slice(), Slice(0, 19)})).to_vector<float>();
  EXPECT_EQ(cpu::compiled_pointwise_runs(), before);
  for (int64_t r = 0; r < 500; ++r) {
    for (int64_t c = 0; c < 19; ++c) {
      ASSERT_EQ(got[r * 19 + c], x[r * 20 + c + 1] - x[r * 20 + c]) << r << ", " << c;
    }
  }
}

// Kernels outside the generator's reach (an f64 value, a strided view) run as before.
TEST(CompiledPointwise, KernelsItDoesNotCompileRunThroughTheEvaluator) {
  CompileEveryKernel compile;
  std::mt19937_64 rng(testing::test_seed() + 2);
  const std::vector<float> x = testing::random_floats(64 * 48, rng);
  const Tensor t = Tensor::from_vector(x, {64, 48});
  const int64_t before = cpu::compiled_pointwise_runs();
  const std::vector<float> transposed = exp(t.transpose(0, 1)).to_vector<float>();
  const std::vector<double> doubled = testing::values(exp(t.astype(DType::F64)));
  EXPECT_EQ(cpu::compiled_pointwise_runs(), before);
  for (int64_t i = 0; i < 48; ++i) {
    for (int64_t j = 0; j < 64; ++j) {
      ASSERT_NEAR(transposed[i * 64 + j], std::exp(double{x[j * 48 + i]}),
                  2e-6 * std::exp(double{x[j * 48 + i]}));
    }
  }
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(doubled[i], std::exp(double{x[i]}), 1e-12 * doubled[i] + 1e-300);
}

// The generated source names the kernel and comments each value with its instruction.
TEST(CompiledPointwise, TheSourceIsReadable) {
  jit::KernelProgram program;
  program.name = "pointwise_mul_exp";
  program.space_ranks = {1};
  program.input_dtypes = {DType::F32};
  program.output_dtypes = {DType::F32};
  program.view_patterns = {jit::ViewPattern{1, jit::ViewAccess::kContiguous, {}}};
  program.num_params = 1;
  jit::Instr load;
  load.kind = jit::InstrKind::kLoad;
  load.input = 0;
  load.view = 0;
  jit::Instr param;
  param.kind = jit::InstrKind::kParam;
  param.param = 0;
  jit::Instr mul;
  mul.kind = jit::InstrKind::kBinary;
  mul.op = ops::OpKind::Mul;
  mul.operands = {0, 1, -1};
  jit::Instr exp_of;
  exp_of.kind = jit::InstrKind::kUnary;
  exp_of.op = ops::OpKind::Exp;
  exp_of.operands = {2, -1, -1};
  program.instrs = {load, param, mul, exp_of};
  program.stores = {{3, 0}};
  const std::optional<std::string> source = cpu::compiled_pointwise_source(program);
  ASSERT_TRUE(source.has_value());
  EXPECT_NE(source->find("Kiln compiled CPU kernel pointwise_mul_exp"), std::string::npos);
  EXPECT_NE(source->find("const auto v2 = hn::Mul(v0, v1);  // %2 mul"), std::string::npos);
  EXPECT_NE(source->find("const auto v3 = exp_vec(d, v2);  // %3 exp"), std::string::npos);
  EXPECT_NE(source->find("hn::StoreU(v3, d, static_cast<T*>(outputs[0]) + i);"), std::string::npos);

  program.instrs[3].op = ops::OpKind::Sin;  // sin has no compiled form: not compiled
  EXPECT_FALSE(cpu::compiled_pointwise_source(program).has_value());
  program.instrs[3].op = ops::OpKind::Exp;
  program.instrs[3].dtype = DType::F64;
  EXPECT_FALSE(cpu::compiled_pointwise_source(program).has_value());
}

// A compiler that cannot be run costs speed, never results: the evaluator computes the
// kernel.
TEST(CompiledPointwise, ACompilerThatCannotRunLeavesTheEvaluatorInCharge) {
  if (!compiler_available()) GTEST_SKIP() << "compiled CPU kernels are off (KILN_CPU_JIT=0)";
  const char* kept = std::getenv("KILN_CXX");
  const std::string previous = kept != nullptr ? kept : "";
  ::setenv("KILN_CXX", "/nonexistent/kiln-test-c++", 1);
  CompileEveryKernel compile;
  std::mt19937_64 rng(testing::test_seed() + 3);
  const std::vector<float> x = testing::random_floats(5'001, rng, -4, 4);
  const int64_t before = cpu::compiled_pointwise_runs();
  // A chain no other test builds, so that no earlier compile of it is reused.
  const std::vector<float> got =
      (expm1(Tensor::from_vector(x, {5'001}) * 0.3125) - 0.0625).to_vector<float>();
  if (kept != nullptr) {
    ::setenv("KILN_CXX", previous.c_str(), 1);
  } else {
    ::unsetenv("KILN_CXX");
  }
  EXPECT_EQ(cpu::compiled_pointwise_runs(), before);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::expm1(double{x[i]} * 0.3125) - 0.0625;
    ASSERT_NEAR(got[i], want, 2e-6 * std::max(1.0, std::fabs(want))) << "at " << i;
  }
}

}  // namespace
}  // namespace kiln
