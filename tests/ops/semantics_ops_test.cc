// Semantics numpy and ONNX users reach for: slice with a negative step (Python's slice
// semantics) and flip (numpy.flip), both views with negative strides; cumsum's exclusive and
// reverse options (ONNX CumSum). Every element is checked against loops written here from
// the definitions, in double, on fresh random inputs; reversed views feed every op kind;
// errors name the op, the shapes and what was expected; trace files carry the attributes.
// (Bottom-right causal attention is in tests/ops/attention_test.cc; the CUDA emulation of all
// three in tests/cuda/cuda_emulation_test.cc and tests/ops/op_catalog_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/cpu/compiled_pointwise.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Python's slice.indices(n) followed by the length, as CPython's PySlice_AdjustIndices
// computes them: element k of the slice is start + k * step.
struct PythonSlice {
  int64_t start = 0, length = 0;
};
PythonSlice python_slice(int64_t start, int64_t stop, int64_t step, int64_t n) {
  auto adjust = [&](int64_t& i) {
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
  };
  adjust(start);
  adjust(stop);
  PythonSlice s{start, 0};
  if (step < 0) {
    if (stop < start) s.length = (start - stop - 1) / (-step) + 1;
  } else if (start < stop) {
    s.length = (stop - start - 1) / step + 1;
  }
  return s;
}

// x[start:stop:step] of a 1-D x for every extent, bound and step in the lists: the shape and
// every element against Python's rule.
TEST(SliceNegativeStep, MatchesPythonSliceIndices) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> bounds = {kMin, -9, -5, -2, -1, 0, 1, 4, 8, kMax};
  for (int64_t n : {0, 1, 2, 5, 8}) {
    const std::vector<float> xv = testing::random_floats(n, rng);
    Tensor x = Tensor::from_vector(xv, {n});
    for (int64_t step : {-1, -2, -3, -9, 1, 2, 5}) {
      for (int64_t start : bounds) {
        for (int64_t stop : bounds) {
          SCOPED_TRACE(::testing::Message()
                       << "n " << n << " [" << start << ":" << stop << ":" << step << "]");
          const PythonSlice want = python_slice(start, stop, step, n);
          Tensor y = x.slice(0, start, stop, step);
          ASSERT_EQ(y.shape(), (std::vector<int64_t>{want.length}));
          const std::vector<float> got = y.to_vector<float>();
          for (int64_t k = 0; k < want.length; ++k) {
            ASSERT_EQ(got[k], xv[want.start + k * step]) << "element " << k;
          }
        }
      }
    }
  }
}

// Backward slices of each axis of a [4, 5, 6] x, alone, chained, and fused into arithmetic.
TEST(SliceNegativeStep, EveryAxisChainedAndFused) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<float> xv = testing::random_floats(120, rng);
  Tensor x = Tensor::from_vector(xv, shape);
  struct Cut {
    int64_t start, stop, step;
  };
  const std::vector<Cut> cuts = {{-1, kMin, -1}, {4, 0, -2}, {-2, -100, -3}, {100, 1, -1}};
  for (int axis = 0; axis < 3; ++axis) {
    for (const Cut& c : cuts) {
      SCOPED_TRACE(::testing::Message()
                   << "axis " << axis << " [" << c.start << ":" << c.stop << ":" << c.step << "]");
      const PythonSlice p = python_slice(c.start, c.stop, c.step, shape[axis]);
      std::vector<int64_t> mid = shape;  // the backward slice's shape
      mid[axis] = p.length;
      // Then a forward slice of the last axis and arithmetic, all fused into one kernel.
      const PythonSlice q = python_slice(1, 6, 2, mid[2]);
      Tensor y = x.slice(axis, c.start, c.stop, c.step).slice(-1, 1, 6, 2) * 2.0 + 1.0;
      std::vector<int64_t> out_shape = mid;
      out_shape[2] = q.length;
      ASSERT_EQ(y.shape(), out_shape);
      const std::vector<float> got = y.to_vector<float>();
      for (int64_t e = 0; e < testing::count(out_shape); ++e) {
        std::vector<int64_t> at = testing::unravel(e, out_shape);
        at[2] = q.start + 2 * at[2];             // through the forward slice, into mid
        at[axis] = p.start + at[axis] * c.step;  // through the backward one, into x
        const float want = xv[(at[0] * 5 + at[1]) * 6 + at[2]] * 2.0f + 1.0f;
        ASSERT_EQ(got[e], want) << "element " << e;
      }
    }
  }
}

// The reversed view (both axes, steps -1 and -2) against the same values copied by hand,
// through every kind of op: pointwise, reductions, matmul, row norms, cumsum, topk, gathers,
// concat, update_slice, attention, contiguous.
TEST(SliceNegativeStep, ReversedViewsFeedEveryOpKind) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> raw = testing::random_floats(8 * 12, rng, 0.1f, 2);
  Tensor base = Tensor::from_vector(raw, {8, 12});
  auto make_view = [&] { return base.slice(0, -2, kMin, -2).slice(1, -1, 0, -1); };  // [4, 11]
  std::vector<float> by_hand(4 * 11);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 11; ++j) by_hand[i * 11 + j] = raw[(6 - 2 * i) * 12 + (11 - j)];
  }
  ASSERT_EQ(make_view().to_vector<float>(), by_hand);
  Tensor copy = Tensor::from_vector(by_hand, {4, 11});
  Tensor w = Tensor::from_vector(testing::random_floats(11 * 3, rng), {11, 3});
  Tensor g = Tensor::from_vector(testing::random_floats(11, rng), {11});
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 0, -1, 2}, {4});
  struct Use {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
    bool gemm = false;  // sums of products: exact where one GEMM code runs them
  };
  const std::vector<Use> uses = {
      {"pointwise", [](const Tensor& t) { return exp(t) * 2 - t; }},
      {"sum", [](const Tensor& t) { return sum(t, {1}); }},
      {"max keepdims", [](const Tensor& t) { return max(t, {0}, true); }},
      {"argmax", [](const Tensor& t) { return argmax(t, 1); }},
      {"matmul", [&](const Tensor& t) { return matmul(t, w); }, true},
      {"matmul, reversed right operand",
       [&](const Tensor& t) { return matmul(w.transpose(0, 1), t.transpose(0, 1)); }, true},
      {"softmax", [](const Tensor& t) { return softmax(t, 0); }},
      {"rms_norm", [&](const Tensor& t) { return rms_norm(t, g); }},
      {"cumsum", [](const Tensor& t) { return cumsum(t, 1); }},
      {"cumsum exclusive reverse", [](const Tensor& t) { return cumsum(t, 0, true, true); }},
      {"topk", [](const Tensor& t) { return topk(t, 3, 1).values; }},
      {"take", [&](const Tensor& t) { return take(t, ids, 1); }},
      {"concat",
       [](const Tensor& t) {
         return concat({t, t * 2}, 1);
       }},
      {"update_slice", [](const Tensor& t) { return update_slice(t, t.slice(0, 0, 1), 0, 2); }},
      {"attention", [](const Tensor& t) { return scaled_dot_product_attention(t, t, t); }, true},
      {"contiguous", [](const Tensor& t) { return t.contiguous() + 1.0; }},
      {"flip back", [](const Tensor& t) { return flip(t) * 3.0; }},
  };
  for (const Use& u : uses) {
    SCOPED_TRACE(u.name);
    const std::vector<double> from_view = testing::values(u.fn(make_view()));
    const std::vector<double> from_copy = testing::values(u.fn(copy));
    ASSERT_EQ(from_view.size(), from_copy.size());
    for (size_t i = 0; i < from_view.size(); ++i) {
      if (u.gemm && !testing::matmuls_run_one_gemm()) {
        EXPECT_TRUE(testing::close(from_copy[i], from_view[i], 1e-5)) << i;
      } else {
        EXPECT_EQ(from_view[i], from_copy[i]) << i;
      }
    }
  }
}

// A view reversed along its last dim is never read as if it were contiguous: the compiled CPU
// loop (which reads each row's loads forwards) leaves it to the evaluator, with the right
// values.
TEST(SliceNegativeStep, CompiledCpuLoopsDoNotTakeReversedViews) {
  testing::DefaultDevice cpu(Device{DeviceType::CPU, 0});
  runtime::cpu::set_compiled_pointwise_min_elements(0);
  std::mt19937_64 rng(testing::test_seed() + 3);
  SCOPED_TRACE(testing::test_seed());
  const int64_t rows = 64, cols = 300;
  const std::vector<float> xv = testing::random_floats(rows * cols, rng);
  const std::vector<float> yv = testing::random_floats(rows * cols, rng);
  Tensor x = Tensor::from_vector(xv, {rows, cols}), y = Tensor::from_vector(yv, {rows, cols});
  const std::vector<float> got = (flip(x, {-1}) * 2.0 + y).to_vector<float>();
  EXPECT_FALSE(runtime::cpu::last_kernel_ran_compiled_loop());
  runtime::cpu::set_compiled_pointwise_min_elements(-1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(got[r * cols + c], xv[r * cols + cols - 1 - c] * 2.0f + yv[r * cols + c])
          << r << ", " << c;
    }
  }
}

// numpy.flip for every set of axes of a [3, 4, 5] x (empty: all; negative counts from the
// end), in several dtypes (the bits are moved, not computed), of a computed x too.
TEST(FlipView, MatchesNumpyFlipForEveryAxisSet) {
  std::mt19937_64 rng(testing::test_seed() + 4);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {3, 4, 5};
  const std::vector<float> xv = testing::random_floats(60, rng, -50, 50);
  const std::vector<std::vector<int>> axis_sets = {{},     {0},      {1},    {2},      {-1},
                                                   {0, 2}, {-3, -2}, {2, 0}, {0, 1, 2}};
  for (DType dt : {DType::F32, DType::F16, DType::I32, DType::Bool, DType::F64}) {
    Tensor x = Tensor::from_vector(xv, shape).astype(dt).eval();
    const std::vector<double> xs = testing::values(x);
    for (const std::vector<int>& axes : axis_sets) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dt) << " axes " << ::testing::PrintToString(axes));
      std::vector<bool> flipped(3, axes.empty());
      for (int a : axes) flipped[a < 0 ? a + 3 : a] = true;
      Tensor y = flip(x, axes);
      ASSERT_EQ(y.shape(), shape);
      ASSERT_EQ(y.dtype(), dt);
      const std::vector<double> got = testing::values(y);
      for (int64_t e = 0; e < 60; ++e) {
        std::vector<int64_t> at = testing::unravel(e, shape);
        for (int d = 0; d < 3; ++d) {
          if (flipped[d]) at[d] = shape[d] - 1 - at[d];
        }
        ASSERT_EQ(got[e], xs[(at[0] * 4 + at[1]) * 5 + at[2]]) << "element " << e;
      }
    }
  }
  // A computed x: the flip reads the pending values through its index math.
  Tensor x = Tensor::from_vector(xv, shape);
  const std::vector<float> got = flip(x * 2.0, {1}).to_vector<float>();
  for (int64_t e = 0; e < 60; ++e) {
    std::vector<int64_t> at = testing::unravel(e, shape);
    ASSERT_EQ(got[e], 2.0f * xv[(at[0] * 4 + 3 - at[1]) * 5 + at[2]]) << "element " << e;
  }
}

// flip is a view: it fuses into its consumer (one kernel), flipping twice is the identity,
// and axes of extent 0 or 1 (and a 0-d x) are left as they are.
TEST(FlipView, IsAViewThatFuses) {
  Tensor x = Tensor::randn({6, 7}, 21).eval();
  const Stats before = stats();
  const std::vector<float> got = (flip(x) * 2.0 + x).to_vector<float>();
  EXPECT_EQ(stats().kernels_launched - before.kernels_launched, 1);
  const std::vector<float> xv = x.to_vector<float>();
  for (int64_t e = 0; e < 42; ++e) ASSERT_EQ(got[e], xv[41 - e] * 2.0f + xv[e]) << e;
  EXPECT_EQ(flip(flip(x, {0}), {-2}).to_vector<float>(), xv);
  Tensor scalar = Tensor::full({}, 3.0);
  EXPECT_EQ(flip(scalar).item(), 3.0);
  Tensor thin = Tensor::randn({1, 5, 0}, 22);
  EXPECT_EQ(flip(thin).shape(), (std::vector<int64_t>{1, 5, 0}));
  Tensor column = Tensor::randn({4, 1}, 23).eval();
  const std::vector<float> cv = column.to_vector<float>();
  EXPECT_EQ(flip(column).to_vector<float>(), (std::vector<float>{cv[3], cv[2], cv[1], cv[0]}));
}

TEST(FlipView, BadAxesAndStepsAreClearErrors) {
  Tensor x = Tensor::zeros({3, 4, 5});
  testing::expect_error([&] { flip(x, {3}); },
                        {"[flip]", "axis 3", "rank 3", "-3 <= axis < 3", "f32[3, 4, 5]"});
  testing::expect_error(
      [&] {
        flip(x, {1, -2});
      },
      {"[flip]", "axis -2 appears more than once", "f32[3, 4, 5]"});
  testing::expect_error([&] { flip(Tensor(), {}); }, {"[flip]", "undefined"});
  testing::expect_error([&] { x.slice(1, 0, 4, 0); },
                        {"[slice]", "step 0", "expected step != 0", "f32[3, 4, 5]"});
  testing::expect_error([&] { x.slice(3, -1, kMin, -1); },
                        {"[slice]", "axis 3", "rank 3", "f32[3, 4, 5]"});
  testing::expect_error([&] { x.slice(0, 0, 1, kMin); }, {"[slice]", "out of range"});
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(60, 0.0f)) << "x stays valid";
}

// ONNX CumSum's four forms, from its definition: y[i] sums x[j] for j <= i (inclusive), j < i
// (exclusive), j >= i (reverse), j > i (both), along the axis.
double onnx_cumsum(const std::vector<double>& x, const std::vector<int64_t>& shape, int axis,
                   int64_t e, bool exclusive, bool reverse) {
  const std::vector<int64_t> at = testing::unravel(e, shape);
  double total = 0;
  for (int64_t j = 0; j < shape[axis]; ++j) {
    const bool taken = reverse ? (exclusive ? j > at[axis] : j >= at[axis])
                               : (exclusive ? j < at[axis] : j <= at[axis]);
    if (!taken) continue;
    std::vector<int64_t> from = at;
    from[axis] = j;
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + from[d];
    total += x[flat];
  }
  return total;
}

TEST(CumsumOptions, MatchOnnxCumSumOnEveryAxis) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<float> xv = testing::random_floats(120, rng);
  std::vector<double> twice(120);
  for (int64_t e = 0; e < 120; ++e) twice[e] = 2.0 * xv[e];
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor x = Tensor::from_vector(xv, shape).astype(dt);
    for (int axis = 0; axis < 3; ++axis) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dt) << " axis " << axis << (exclusive ? " exclusive" : "")
                       << (reverse ? " reverse" : ""));
          Tensor y = cumsum(x * 2.0, axis - 3, exclusive, reverse);  // a fused prologue
          ASSERT_EQ(y.shape(), shape);
          ASSERT_EQ(y.dtype(), dt);
          const std::vector<double> got = testing::values(y);
          for (int64_t e = 0; e < 120; ++e) {
            const double want = onnx_cumsum(twice, shape, axis, e, exclusive, reverse);
            ASSERT_TRUE(testing::close(want, got[e], dt == DType::F32 ? 1e-5 : 1e-12))
                << "element " << e;
          }
        }
      }
    }
  }
}

// Integers and bool sum in I64 and wrap; a 0-d x is a row of one (exclusive gives 0).
TEST(CumsumOptions, IntegersWrapAndBoolCounts) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor i = Tensor::from_vector(std::vector<int64_t>{1, big, 5}, {3});
  EXPECT_EQ(cumsum(i, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, kMin}));
  // big + 5 wraps to kMin + 4; 1 + big + 5 to kMin + 5.
  EXPECT_EQ(cumsum(i, 0, false, true).to_vector<int64_t>(),
            (std::vector<int64_t>{kMin + 5, kMin + 4, 5}));
  EXPECT_EQ(cumsum(i, 0, true, true).to_vector<int64_t>(), (std::vector<int64_t>{kMin + 4, 5, 0}));
  Tensor mask =
      Tensor::from_vector<bool>({true, false, true, true, false, false, true, true}, {2, 4});
  Tensor counts = cumsum(mask, -1, /*exclusive=*/true);
  EXPECT_EQ(counts.dtype(), DType::I64);
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 2, 0, 0, 0, 1}));
  EXPECT_EQ(cumsum(mask, 1, false, true).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 2, 2, 1, 2, 2, 2, 1}));
  Tensor small = Tensor::from_vector(std::vector<int32_t>{-3, 7, 2}, {3, 1});
  EXPECT_EQ(cumsum(small, 0, true, true).to_vector<int64_t>(), (std::vector<int64_t>{9, 2, 0}));
  EXPECT_EQ(cumsum(Tensor::full({}, 4.0), 0, true).item(), 0.0);
  EXPECT_EQ(cumsum(Tensor::full({}, 4.0), -1, false, true).item(), 4.0);
}

// An inf or NaN reaches exactly the sums that include it: exclusive sums before it stay
// finite (a sum is never an inclusive sum with the element subtracted again).
TEST(CumsumOptions, InfAndNanReachOnlyTheSumsThatTakeThem) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, inf, 4}, {4});
  EXPECT_EQ(cumsum(x, 0).to_vector<float>(), (std::vector<float>{1, 3, inf, inf}));
  EXPECT_EQ(cumsum(x, 0, true).to_vector<float>(), (std::vector<float>{0, 1, 3, inf}));
  EXPECT_EQ(cumsum(x, 0, false, true).to_vector<float>(), (std::vector<float>{inf, inf, inf, 4}));
  EXPECT_EQ(cumsum(x, 0, true, true).to_vector<float>(), (std::vector<float>{inf, inf, 4, 0}));
  const std::vector<float> n =
      cumsum(Tensor::from_vector(std::vector<float>{1, std::nanf(""), 2}, {3}), 0, true, true)
          .to_vector<float>();
  EXPECT_TRUE(std::isnan(n[0]));
  EXPECT_EQ(n[1], 2.0f);
  EXPECT_EQ(n[2], 0.0f);
}

// Long rows of ones count exactly in every form, along the last axis and along the first.
TEST(CumsumOptions, LongRowsOfOnesCountExactly) {
  Tensor ones = Tensor::ones({3, 5000});
  const std::vector<float> exclusive = cumsum(ones, 1, true).to_vector<float>();
  const std::vector<float> reverse = cumsum(ones, 1, false, true).to_vector<float>();
  const std::vector<float> both = cumsum(ones, -1, true, true).to_vector<float>();
  for (int64_t e = 0; e < 15000; ++e) {
    const int64_t k = e % 5000;
    ASSERT_EQ(exclusive[e], static_cast<float>(k)) << e;
    ASSERT_EQ(reverse[e], static_cast<float>(5000 - k)) << e;
    ASSERT_EQ(both[e], static_cast<float>(4999 - k)) << e;
  }
  const std::vector<float> down = cumsum(Tensor::ones({3000, 3}), 0, true, true).to_vector<float>();
  for (int64_t e = 0; e < 9000; ++e) ASSERT_EQ(down[e], static_cast<float>(2999 - e / 3)) << e;
}

// Each form is its own kernel: the Kernel IR names the options, so the kernel cache keeps
// them apart (and the plan cache, whose key holds the node's attributes).
TEST(CumsumOptions, EachFormIsItsOwnKernel) {
  Tensor x = Tensor::randn({5, 9}, 31).eval();
  const std::string plain = explain_plan({cumsum(x, 1)});
  const std::string exclusive = explain_plan({cumsum(x, 1, true)});
  const std::string reverse = explain_plan({cumsum(x, 1, false, true)});
  const std::string both = explain_plan({cumsum(x, 1, true, true)});
  // The printed program (the kernel cache key) ends its anchor's attributes with the options.
  EXPECT_NE(plain.find("keepdims=0 operands="), std::string::npos) << plain;
  EXPECT_NE(exclusive.find("keepdims=0 exclusive operands="), std::string::npos) << exclusive;
  EXPECT_NE(reverse.find("keepdims=0 reverse operands="), std::string::npos) << reverse;
  EXPECT_NE(both.find("keepdims=0 exclusive reverse operands="), std::string::npos) << both;
  // Synced one after the other, each gives its own values (no plan or kernel is shared).
  const std::vector<float> xv = x.to_vector<float>();
  EXPECT_EQ(cumsum(x, 1).to_vector<float>()[0], xv[0]);
  EXPECT_EQ(cumsum(x, 1, true).to_vector<float>()[0], 0.0f);
  EXPECT_EQ(cumsum(x, 1, false, true).to_vector<float>()[8], xv[8]);
  EXPECT_EQ(cumsum(x, 1, true, true).to_vector<float>()[8], 0.0f);
}

// Trace files: a backward slice (its canonical stop "before element 0" written as
// -(extent + 1)), an empty one, flip (as slices), and cumsum's options dump, load and replay
// to the same values; the loader takes the API's forms of the bounds too.
TEST(SemanticsTrace, BackwardSlicesFlipAndCumsumOptionsRoundTrip) {
  std::mt19937_64 rng(testing::test_seed() + 6);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<float> xv = testing::random_floats(4 * 6, rng);
  Tensor x = Tensor::from_vector(xv, {4, 6});
  std::vector<Tensor> outs = {x.slice(1, -1, kMin, -1) * 2.0,
                              x.slice(0, 3, 0, -2),
                              x.slice(1, 2, 4, -1),  // empty
                              flip(x, {0}) + 1.0,
                              cumsum(x, 1, true, true),
                              cumsum(x, 0, false, true),
                              cumsum(x, 0, true)};
  const std::string json = dump_trace(outs, DumpFormat::Json);
  EXPECT_NE(json.find("\"start\":5,\"step\":-1,\"stop\":-7"), std::string::npos) << json;
  EXPECT_NE(json.find("\"exclusive\":true,\"reverse\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"exclusive\":false,\"reverse\":true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"exclusive\":true,\"reverse\":false"), std::string::npos) << json;
  EXPECT_NE(
      dump_trace(outs, DumpFormat::Text).find("slice(%0) {axis=1, start=5, step=-1, stop=-7}"),
      std::string::npos)
      << dump_trace(outs, DumpFormat::Text);
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.num_outputs(), outs.size());
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) inputs[in.name] = x;
  const std::vector<Tensor> again = trace.run(inputs);
  for (size_t o = 0; o < outs.size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    EXPECT_EQ(again[o].shape(), outs[o].shape());
    EXPECT_EQ(again[o].to_vector<float>(), outs[o].to_vector<float>());
  }
  EXPECT_EQ(outs[2].numel(), 0);
  // The API's form of the bounds in a file: start -1, stop -100.
  const std::string by_hand = R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [4, 6]},
    {"id": 1, "op": "slice", "args": [0], "attrs": {"axis": -1, "start": -1, "stop": -100,
     "step": -2}, "dtype": "f32", "shape": [4, 3]},
    {"id": 2, "op": "cumsum", "args": [1], "attrs": {"axis": 1, "reverse": true},
     "dtype": "f32", "shape": [4, 3]}],
    "outputs": [2]})";
  const std::vector<float> got = load_trace(by_hand).run({{"x", x}}).at(0).to_vector<float>();
  const std::vector<float> want =
      cumsum(x.slice(1, 5, kMin, -2), 1, false, true).to_vector<float>();
  EXPECT_EQ(got, want);
  for (int64_t r = 0; r < 4; ++r) {  // columns 5, 3, 1, summed from the end
    EXPECT_FLOAT_EQ(want[r * 3 + 2], xv[r * 6 + 1]);
    EXPECT_FLOAT_EQ(want[r * 3], xv[r * 6 + 5] + xv[r * 6 + 3] + xv[r * 6 + 1]);
  }
}

}  // namespace
}  // namespace kiln
