// softmax, log_softmax, layer_norm, rms_norm, linear against long-double loops.
#include "kiln/nn.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/kiln.h"
#include "ops/element_access.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::close;

TEST(NN, SoftmaxAndLogSoftmaxOverAnyAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {3, 4, 5};
  std::vector<float> data = testing::random_floats(60, rng, -10, 10);
  Tensor x = Tensor::from_vector(data, shape);
  for (int axis : {0, 1, 2, -1}) {
    int a = axis < 0 ? 2 : axis;
    std::vector<double> sm = testing::values(softmax(x, axis));
    std::vector<double> lsm = testing::values(log_softmax(x, axis));
    for (int64_t i = 0; i < 60; ++i) {
      std::vector<int64_t> idx = testing::unravel(i, shape);
      long double total = 0;
      for (int64_t k = 0; k < shape[a]; ++k) {
        std::vector<int64_t> j = idx;
        j[a] = k;
        total += std::exp((long double)data[(j[0] * 4 + j[1]) * 5 + j[2]]);
      }
      long double want = std::exp((long double)data[i]) / total;
      EXPECT_TRUE(close(want, sm[i], 1e-6));
      EXPECT_TRUE(close(std::log(want), lsm[i], 1e-6));
    }
  }
}

TEST(NN, SoftmaxIsStableForLargeInputs) {
  Tensor x = Tensor::from_vector<float>({1000, 1001, -1e30f}, {3});
  std::vector<float> y = softmax(x).to_vector<float>();
  EXPECT_TRUE(close(1 / (1 + std::exp(1.0L)), y[0], 1e-6));
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_FALSE(std::isnan(log_softmax(x).to_vector<float>()[0]));
}

// log_softmax of rows far from zero (ONNX's test_logsoftmax_large_number): each element is
// (x - max) - log(sum), never x - (max + log(sum)), whose rounding of max + log(sum) cost
// 2.4e-4 at 10003. Rows of f32, f16 and bf16 at offsets where that rounding is larger than
// half an ulp of the result, in rows of 4 (one vector's tail) and 37.
struct FarRowCase {
  DType dtype;
  double offset, spacing, ulp_at_one;
};
const FarRowCase kFarRowCases[] = {{DType::F32, 1e4, 1.0, 0x1p-23},
                                   {DType::F32, 3e6, 0.25, 0x1p-23},
                                   {DType::F16, 3e4, 16.0, 0x1p-10},
                                   {DType::BF16, 1e6, 8192.0, 0x1p-7}};

// 4 f32 ulps at 1 (the error of rounding max + log(sum) at 10000 is 250 times that).
constexpr double kDeviceSlack = 0x1p-21;

Tensor far_rows(const FarRowCase& c, int64_t extent, std::mt19937_64& rng) {
  std::vector<double> values(2 * extent);
  std::uniform_int_distribution<int> step(0, 3);
  for (double& v : values) v = c.offset + step(rng) * c.spacing;
  return Tensor::from_vector(values, {2, extent}).astype(c.dtype).eval();
}

// Every element of `got` (log_softmax of `x`'s two rows) within 0.6 ulp of the result's
// dtype of the long-double value computed from the stored inputs, plus `slack`: a device's
// f32 exp is a few ulps off, and log(sum) carries that relative error as an absolute one.
void expect_far_log_softmax(const FarRowCase& c, const Tensor& x, const std::vector<double>& got,
                            const char* what, double slack) {
  const std::vector<double> stored = testing::values(x);
  const int64_t extent = x.shape()[1];
  for (int64_t r = 0; r < 2; ++r) {
    long double max = stored[r * extent], total = 0;
    for (int64_t k = 0; k < extent; ++k) max = std::max(max, (long double)stored[r * extent + k]);
    for (int64_t k = 0; k < extent; ++k) total += std::exp(stored[r * extent + k] - max);
    for (int64_t k = 0; k < extent; ++k) {
      const int64_t i = r * extent + k;
      const double want = static_cast<double>((stored[i] - max) - std::log(total));
      // The ulp at |want|, never below that at 1/2 (ulps shrink towards zero).
      const double scale =
          std::max(0.5, std::exp2(std::floor(std::log2(std::fabs(want) + 1e-300))));
      EXPECT_NEAR(got[i], want, 0.6 * c.ulp_at_one * scale + slack) << what << ", element " << i;
    }
  }
}

TEST(NN, LogSoftmaxKeepsItsPrecisionFarFromZero) {
  std::mt19937_64 rng(testing::test_seed() + 12);
  SCOPED_TRACE(testing::test_seed());
  for (const FarRowCase& c : kFarRowCases) {
    for (int64_t extent : {4, 37}) {
      SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " offset " + std::to_string(c.offset) +
                   " extent " + std::to_string(extent));
      const Tensor x = far_rows(c, extent, rng);
      const Tensor y = log_softmax(x);
      expect_far_log_softmax(c, x, testing::values(testing::reference_tensor(y)), "reference", 0);
      expect_far_log_softmax(c, x, testing::values(y), "device", kDeviceSlack);
    }
  }
  // The row from ONNX's node test.
  const std::vector<float> onnx =
      log_softmax(Tensor::from_vector(std::vector<float>{10000, 10001, 10002, 10003}, {4}))
          .to_vector<float>();
  EXPECT_NEAR(onnx[0], -3.4401897f, 3e-7f);
  EXPECT_NEAR(onnx[3], -0.4401897f, 3e-7f);
}

// The same rows through the generated CUDA, run in the host emulation.
class FarRowEmulationTest : public testing::ScratchDirTest {};

TEST_F(FarRowEmulationTest, LogSoftmaxKeepsItsPrecisionFarFromZero) {
  std::mt19937_64 rng(testing::test_seed() + 13);
  std::vector<Tensor> inputs;
  std::vector<const FarRowCase*> cases;
  testing::EmulatedPlans plans;
  for (const FarRowCase& c : kFarRowCases) {
    for (int64_t extent : {4, 37}) {
      inputs.push_back(far_rows(c, extent, rng));
      cases.push_back(&c);
      plans.add(log_softmax(inputs.back()));
    }
  }
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(plans.modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const testing::EmulationVariant& v : testing::emulation_variants()) {
    SCOPED_TRACE(v.name());
    for (size_t i = 0; i < plans.plans.size(); ++i) {
      std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, i, v);
      std::vector<double> got(inputs[i].numel());
      for (size_t e = 0; e < got.size(); ++e) {
        got[e] = ops::load_double(*out[0], cases[i]->dtype, static_cast<int64_t>(e));
      }
      expect_far_log_softmax(*cases[i], inputs[i], got, dtype_name(cases[i]->dtype), kDeviceSlack);
    }
  }
}

// Row lengths below, at and past one vector, with a ragged tail, and past the 512-element
// blocks whose f32 sums are added in double.
class NormRowLength : public ::testing::TestWithParam<int64_t> {};

TEST_P(NormRowLength, LayerNormAndRmsNormOverTheLastAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const int64_t rows = 6, d = GetParam();
  std::vector<float> x = testing::random_floats(rows * d, rng, -3, 5);
  std::vector<float> w = testing::random_floats(d, rng), b = testing::random_floats(d, rng);
  Tensor tx = Tensor::from_vector(x, {2, 3, d});
  Tensor tw = Tensor::from_vector(w, {d}), tb = Tensor::from_vector(b, {d});
  std::vector<double> ln = testing::values(layer_norm(tx, tw, tb, 1e-5));
  std::vector<double> rms = testing::values(rms_norm(tx, tw, 1e-6));
  for (int64_t r = 0; r < rows; ++r) {
    long double mean = 0, var = 0, sq = 0;
    for (int64_t k = 0; k < d; ++k) mean += x[r * d + k];
    mean /= d;
    for (int64_t k = 0; k < d; ++k) {
      var += (x[r * d + k] - mean) * (x[r * d + k] - mean);
      sq += (long double)x[r * d + k] * x[r * d + k];
    }
    var /= d;
    sq /= d;
    for (int64_t k = 0; k < d; ++k) {
      long double want_ln = (x[r * d + k] - mean) / std::sqrt(var + 1e-5L) * w[k] + b[k];
      long double want_rms = x[r * d + k] / std::sqrt(sq + 1e-6L) * w[k];
      EXPECT_TRUE(close(want_ln, ln[r * d + k], 1e-5));
      EXPECT_TRUE(close(want_rms, rms[r * d + k], 1e-5));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NN, NormRowLength, ::testing::Values(16, 7, 37, 384, 1100));

TEST(NN, LinearIsXTimesWTransposedPlusB) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = Tensor::from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 3});  // [out=2, in=3]
  Tensor b = Tensor::from_vector<float>({0.5f, -1}, {2});
  // Row 0: [1*1 + 3*-1 + 0.5, 1*2 + 2*1 - 1] = [-1.5, 3]; row 1: [4 - 6 + 0.5, 8 + 5 - 1].
  EXPECT_EQ(linear(x, w, b).to_vector<float>(), (std::vector<float>{-1.5f, 3, -1.5f, 12}));
  testing::expect_error([&] { linear(x, w.transpose(0, 1), b); },
                        {"[linear]", "w [out, in]", "f32[3, 2]"});
  // Without a bias: the same rows less b.
  EXPECT_EQ(linear(x, w).to_vector<float>(), (std::vector<float>{-2, 4, -2, 13}));
  testing::expect_error([&] { linear(x, w.transpose(0, 1)); },
                        {"[linear]", "w [out, in]", "f32[3, 2]"});
}

TEST(NN, NormsNeedFloatingDtypes) {
  Tensor i = Tensor::ones({2, 3}, DType::I32);
  testing::expect_error([&] { softmax(i); }, {"[softmax]", "floating x", "i32[2, 3]"});
  testing::expect_error([&] { rms_norm(i, Tensor::ones({3})); }, {"[rms_norm]"});
  testing::expect_error(
      [&] {
        layer_norm(Tensor::ones({2, 3}), Tensor::ones({4}), Tensor::ones({3}));
      },
      {"[layer_norm]", "weight must have shape [3]"});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Rows longer than the executor's tile, and many of them (every core takes some).
TEST(NN, LongRowsMatchTheReference) {
  Tensor x = Tensor::randn({64, 5000}, 11), w = Tensor::rand({5000}, 12),
         b = Tensor::randn({5000}, 13);
  for (Tensor y : {softmax(x), log_softmax(x * 3.0), layer_norm(x, w, b), rms_norm(x + 1.0, w)}) {
    std::vector<double> want = testing::values(testing::reference_tensor(y));
    std::vector<double> got = testing::values(y);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(testing::close(want[i], got[i], 2e-5)) << i;
  }
}

// A linear layer's bias is added by the CPU GEMM core as it stores the product, and the rest
// of the epilogue reads the sum from there. Every form of epilogue around such an add, and
// adds that only look like a bias (a column, a per-batch row, an anchor read twice), against
// the reference evaluator. Depth 400 spans two of the core's depth slices (of 384); 45
// columns end in a partial panel; the batch dim is broadcast over by the bias; 2 x 200 x 400
// x 45 is large enough that each batch matrix runs on all cores (not a batch per core). A
// misplaced term is off by about 1; the tolerance is the suite's for f32 against the
// reference, since f32 sums of 400 products of normal values round by about 1e-5.
TEST(NN, LinearBiasInEveryEpilogueMatchesTheReference) {
  const Tensor x = Tensor::randn({2, 200, 400}, 21), w = Tensor::randn({45, 400}, 22);
  const Tensor b = Tensor::randn({45}, 23), residual = Tensor::randn({2, 200, 45}, 24);
  const Tensor column = Tensor::randn({200, 1}, 25), per_batch = Tensor::randn({2, 1, 45}, 26);
  const Tensor residual_t = Tensor::randn({2, 45, 200}, 27).transpose(1, 2);
  kiln::eval({x, w, b, residual, column, per_batch, residual_t});  // buffers, not leaves
  const Tensor product = matmul(x, w.transpose(0, 1));
  struct Case {
    const char* name;
    Tensor y;
  };
  const std::vector<Case> cases = {
      {"bias only (stored by the core)", linear(x, w, b)},
      {"batches whose rows are apart (one product each)", linear(x.slice(1, 0, 150), w, b)},
      {"bias then gelu (applied by the core)", gelu(linear(x, w, b))},
      {"gelu of the product, no bias", gelu(product)},
      {"bias, relu, then residual", relu(linear(x, w, b)) + residual},
      {"bias then tanh, the sum read twice", tanh(linear(x, w, b)) * linear(x, w, b)},
      {"bias then gelu, the gelu read twice", gelu(linear(x, w, b)) * gelu(linear(x, w, b))},
      {"bias then residual (added by the core)", linear(x, w, b) + residual},
      {"residual on the left, then relu", relu(residual + linear(x, w, b))},
      {"residual without a bias", product + residual},
      {"a transposed residual, not contiguous", linear(x, w, b) + residual_t},
      {"residual, then a second one", (linear(x, w, b) + residual) + residual * 0.5},
      {"bias added on the left", b + product},
      {"anchor read twice", (product + b) * product},
      {"a column, not a bias row", product + column},
      {"a row per batch, not one bias", product + per_batch},
      {"bias of a product of f64",
       (matmul(x.astype(DType::F64), w.astype(DType::F64).transpose(0, 1)) + b.astype(DType::F64))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<double> want = testing::values(testing::reference_tensor(c.y));
    const std::vector<double> got = testing::values(c.y);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_TRUE(close(want[i], got[i], testing::reference_tolerance(DType::F32))) << i;
  }
  // The biased product and its relu stored by one kernel: the add is both stored and read.
  Tensor y = linear(x, w, b), z = relu(y);
  kiln::eval({y, z});
  const std::vector<double> want_y = testing::values(testing::reference_tensor(y));
  const std::vector<double> want_z = testing::values(testing::reference_tensor(z));
  const std::vector<double> got_y = testing::values(y), got_z = testing::values(z);
  for (size_t i = 0; i < got_y.size(); ++i) {
    ASSERT_TRUE(close(want_y[i], got_y[i], testing::reference_tolerance(DType::F32))) << i;
    ASSERT_TRUE(close(want_z[i], got_z[i], testing::reference_tolerance(DType::F32))) << i;
  }
}

// The activation and residual add the GEMM core applies to a linear layer's rows are the
// evaluator's own f32 ops: the same bits as when the biased product is stored and they run
// as a kernel of their own, for every op the core takes (fresh inputs each run).
TEST(NN, EpilogueInTheGemmCoreHasTheBitsOfASeparateKernel) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE("KILN_TEST_SEED=" + std::to_string(seed));
  const Tensor x = Tensor::randn({150, 200}, seed), w = Tensor::randn({70, 200}, seed + 1);
  const Tensor b = Tensor::randn({70}, seed + 2);
  kiln::eval({x, w, b});
  const Tensor residual = Tensor::randn({150, 70}, seed + 3);
  residual.eval();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"residual add", [&](const Tensor& t) { return t + residual; }},
      {"residual add then gelu", [&](const Tensor& t) { return gelu(residual + t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"silu", [](const Tensor& t) { return silu(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"exp", [](const Tensor& t) { return exp(t); }}};
  // On a GPU, cuBLASLt computes the product whose epilogue it can take (bias, relu) and the
  // generated kernel the others: there the same bits are promised only with KILN_CUBLASLT=0
  // (scripts/gpu-check.sh runs the suite both ways), and otherwise the reference tolerance.
  const bool same_product = testing::matmuls_run_one_gemm();
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    Tensor biased = linear(x, w, b);
    biased.eval();
    const std::vector<double> separate = testing::values(op(biased));  // a kernel of its own
    const std::vector<double> fused = testing::values(op(linear(x, w, b)));
    ASSERT_EQ(fused.size(), separate.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      if (same_product) {
        ASSERT_EQ(static_cast<float>(fused[i]), static_cast<float>(separate[i])) << i;
      } else {
        ASSERT_TRUE(testing::close(separate[i], fused[i], testing::reference_tolerance(DType::F32)))
            << i;
      }
    }
  }
}

// rope against angles in long double: both pair conventions, positions laid out for x [B, S,
// H, D] and for x [B, H, S, D], integer positions up to 200000 (angles of 10^5 radians, whose
// f32 product would be off by 10^-2) and fractional ones, linear scaling, f32 and f64.
TEST(NN, RopeTurnsEachPairByItsPositionsAngle) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  for (RopePairs pairs : {RopePairs::Adjacent, RopePairs::Halves}) {
    for (bool heads_first : {false, true}) {
      for (DType dt : {DType::F32, DType::F64}) {
        SCOPED_TRACE(std::string(pairs == RopePairs::Adjacent ? "adjacent" : "halves") +
                     (heads_first ? ", [B, H, S, D]" : ", [B, S, H, D]") + ", " + dtype_name(dt));
        const int64_t b = 2, s = 5, h = 3, d = 12;
        const double base = heads_first ? 10000.0 : 500.0, scale = heads_first ? 1.0 : 2.5;
        std::vector<float> xs = testing::random_floats(b * s * h * d, rng, -1, 1);
        std::vector<double> pos(s);
        std::uniform_int_distribution<int> position(0, 200000);
        for (int64_t i = 0; i < s; ++i) pos[i] = position(rng) + (heads_first ? 0.0 : 0.25 * i);
        const std::vector<int64_t> shape =
            heads_first ? std::vector<int64_t>{b, h, s, d} : std::vector<int64_t>{b, s, h, d};
        const Tensor x = Tensor::from_vector(xs, shape).astype(dt);
        const Tensor positions = heads_first ? Tensor::from_vector(pos, {s}).astype(DType::I64)
                                             : Tensor::from_vector(pos, {s, 1});
        if (heads_first) {
          for (double& p : pos) p = std::floor(p);
        }
        const std::vector<double> got = testing::values(rope(x, positions, pairs, base, scale));
        for (int64_t e = 0; e < b * s * h * d; ++e) {
          const std::vector<int64_t> at = testing::unravel(e, shape);
          const int64_t i = at[3], seq = heads_first ? at[2] : at[1], half = d / 2;
          const bool adjacent = pairs == RopePairs::Adjacent;
          const int64_t j = adjacent ? i / 2 : i % half;
          const bool first = adjacent ? i % 2 == 0 : i < half;
          const int64_t partner = e - i + (adjacent ? (i ^ 1) : (i + half) % d);
          const long double theta = pos[seq] / scale * std::pow((long double)base, -2.0L * j / d);
          const long double a = xs[e], other = xs[partner];
          const long double want = a * std::cos(theta) + (first ? -other : other) * std::sin(theta);
          ASSERT_NEAR(got[e], static_cast<double>(want), 2e-6) << "element " << e;
        }
      }
    }
  }
}

// rope fuses into the kernel that reads it: alone, one kernel; ahead of attention, the
// attention's one kernel.
TEST(NN, RopeFusesIntoItsReader) {
  const Tensor q = Tensor::randn({1, 4, 7, 16}, 1).eval(),
               k = Tensor::randn({1, 2, 7, 16}, 2).eval();
  const Tensor positions = (Tensor::arange(7, DType::I64) + 100.0).eval();
  reset_stats();
  rope(q, positions, RopePairs::Halves).eval();
  EXPECT_EQ(stats().kernels_launched, 1);
  reset_stats();
  scaled_dot_product_attention(rope(q, positions, RopePairs::Adjacent),
                               rope(k, positions, RopePairs::Adjacent), k, Tensor(), true)
      .eval();
  EXPECT_EQ(stats().kernels_launched, 1);
}

TEST(NN, RopeErrorsNameWhatIsWrong) {
  const Tensor x = Tensor::zeros({2, 3, 8});
  testing::expect_error(
      [&] {
        rope(Tensor::zeros({2, 3, 7}), Tensor::zeros({3}), RopePairs::Halves);
      },
      {"[rope]", "even number of dims", "dims: 7"});
  testing::expect_error([&] { rope(x, Tensor::zeros({4}), RopePairs::Halves); },
                        {"[rope]", "[4, 8]", "must broadcast to x's shape", "f32[2, 3, 8]"});
  testing::expect_error([&] { rope(x, Tensor::zeros({3}, DType::Bool), RopePairs::Adjacent); },
                        {"[rope]", "not bool"});
  testing::expect_error([&] { rope(x, Tensor::zeros({3}), RopePairs::Adjacent, 0.0); },
                        {"[rope]", "base and scale must be > 0", "base: 0"});
  testing::expect_error(
      [&] { rope(x.astype(DType::I32), Tensor::zeros({3}), RopePairs::Adjacent); },
      {"[rope]", "floating x", "i32[2, 3, 8]"});
}

}  // namespace
}  // namespace kiln
