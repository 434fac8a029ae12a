// Region writes, update_slice(x, update, starts): numpy's `x[a:b, c:d] = update` as a value.
// Values against loops written here on fresh random data, every element; errors that name
// the op and the dim, with x intact; trace files; the CUDA emulation of the rendered kernel;
// and the two-grid stencil loop, whose writes land in place: one kernel a step, in x's own
// buffer, when nothing else holds it, and a copy when the update reads x.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "jit/graph/node.h"
#include "kiln/kiln.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// x with update written at starts, by a loop over the update's elements.
std::vector<float> write_by_loop(std::vector<float> x, const std::vector<int64_t>& x_shape,
                                 const std::vector<float>& update,
                                 const std::vector<int64_t>& update_shape,
                                 const std::vector<int64_t>& starts) {
  for (int64_t e = 0; e < testing::count(update_shape); ++e) {
    std::vector<int64_t> at = testing::unravel(e, update_shape);
    int64_t flat = 0;
    for (size_t d = 0; d < at.size(); ++d) flat = flat * x_shape[d] + at[d] + starts[d];
    x[flat] = update[e];
  }
  return x;
}

TEST(RegionWrite, MatchesALoopForEveryPlacement) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {5, 7, 9};
  const std::vector<float> xv = testing::random_floats(testing::count(shape), rng);
  const Tensor x = Tensor::from_vector(xv, shape);
  struct Case {
    std::vector<int64_t> update_shape, starts;
  };
  const std::vector<Case> cases = {
      {{3, 5, 7}, {1, 1, 1}}, {{5, 7, 4}, {0, 0, 5}}, {{1, 1, 1}, {4, 6, 8}},
      {{2, 7, 9}, {3, 0, 0}},  // the whole rows: a write along axis 0
      {{5, 3, 9}, {0, 2, 0}}, {{4, 2, 8}, {0, 5, 1}}, {{0, 3, 2}, {2, 1, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "update " << c.update_shape.size() << "-d at "
                                      << c.starts[0] << "," << c.starts[1] << "," << c.starts[2]);
    const std::vector<float> uv = testing::random_floats(testing::count(c.update_shape), rng);
    const Tensor update = Tensor::from_vector(uv, c.update_shape);
    // The update computed in the kernel's prologue (f64 math cast to x's f32), and as is.
    const Tensor got = update_slice(x, (update.astype(DType::F64) * 2.0) - 1.0, c.starts);
    std::vector<float> doubled(uv.size());
    for (size_t i = 0; i < uv.size(); ++i) {
      doubled[i] = static_cast<float>(static_cast<double>(uv[i]) * 2.0 - 1.0);
    }
    EXPECT_EQ(got.to_vector<float>(), write_by_loop(xv, shape, doubled, c.update_shape, c.starts));
    EXPECT_EQ(update_slice(x, update, c.starts).to_vector<float>(),
              write_by_loop(xv, shape, uv, c.update_shape, c.starts));
  }
  EXPECT_EQ(x.to_vector<float>(), xv) << "x itself is not changed";
}

TEST(RegionWrite, BadStartsAndShapesAreErrorsThatNameThem) {
  const Tensor x = Tensor::zeros({4, 6}).eval();
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 2}), {1});
      },
      {"[update_slice]", "1 starts", "one per dim"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 2}), {1, 5});
      },
      {"[update_slice]", "start 5", "axis 1 of extent 6"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 2}), {3, 0});
      },
      {"[update_slice]", "start 3", "axis 0 of extent 4"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 2}), {-1, 0});
      },
      {"[update_slice]", "start -1"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2, 7}), {0, 0});
      },
      {"[update_slice]", "axis 1 of extent 6"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::ones({2}), {0, 0});
      },
      {"[update_slice]", "rank 2"});
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(24, 0.0f)) << "x is left intact";
}

TEST(RegionWrite, TraceFilesDumpLoadAndReplay) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  const Tensor update = Tensor::from_vector(std::vector<float>{10, 20}, {1, 2});
  const Tensor out = update_slice(x, update * 2.0, {2, 1});
  const std::string json = dump_trace({out}, DumpFormat::Json);
  EXPECT_NE(json.find("\"region_starts\":[0,1]"), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) inputs[in.name] = in.name == "in0" ? x : update;
  EXPECT_EQ(trace.run(inputs)[0].to_vector<float>(), out.to_vector<float>());
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 20, 40}));
  // A write along one axis keeps its files as before: no region starts.
  const std::string row =
      dump_trace({update_slice(x, Tensor::ones({1, 3}), 0, 1)}, DumpFormat::Json);
  EXPECT_EQ(row.find("region_starts"), std::string::npos) << row;
}

// The rendered CUDA kernel in the host emulation, every variant, against the reference:
// regions whose innermost start is and is not a multiple of a 16-byte vector.
class RegionWriteEmulationTest : public testing::ScratchDirTest {};

TEST_F(RegionWriteEmulationTest, TheKernelWritesTheRegionOnly) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  const Tensor x = Tensor::from_vector(testing::random_floats(6 * 16, rng), {6, 16});
  testing::EmulatedPlans plans;
  std::vector<Tensor> results;
  for (const std::vector<int64_t>& starts : {std::vector<int64_t>{1, 4}, {2, 3}, {0, 1}}) {
    const Tensor update = Tensor::from_vector(testing::random_floats(3 * 8, rng), {3, 8});
    results.push_back(update_slice(x, exp(update), starts));
    plans.add(results.back());
  }
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(plans.modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const testing::EmulationVariant& v : testing::emulation_variants()) {
    SCOPED_TRACE(v.name());
    for (size_t c = 0; c < results.size(); ++c) {
      const std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, c, v);
      const std::vector<float> want = testing::reference_tensor(results[c]).to_vector<float>();
      ASSERT_EQ(out[0]->nbytes(), static_cast<int64_t>(want.size() * 4));
      for (size_t e = 0; e < want.size(); ++e) {
        EXPECT_FLOAT_EQ(out[0]->as<float>()[e], want[e]) << "case " << c << " element " << e;
      }
    }
  }
}

// A stencil of `steps` explicit steps on an n x n grid by a loop, boundary fixed.
std::vector<float> stencil_by_loop(std::vector<float> u, int64_t n, int steps, float alpha) {
  std::vector<float> next = u;
  for (int s = 0; s < steps; ++s) {
    for (int64_t i = 1; i + 1 < n; ++i) {
      for (int64_t j = 1; j + 1 < n; ++j) {
        const float c = u[i * n + j];
        const float lap = u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] +
                          u[i * n + j + 1] - 4.0f * c;
        next[i * n + j] = c + alpha * lap;
      }
    }
    std::swap(u, next);
  }
  return u;
}

// u after `steps` stencil steps from u0 by the loop, element by element, to within f32
// rounding of the same operations.
void expect_stencil_of(const Tensor& u, const std::vector<float>& u0, int64_t n, int steps) {
  const std::vector<float> want = stencil_by_loop(u0, n, steps, 0.2f);
  const std::vector<float> got = u.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f) << "element " << i;
  }
}

Tensor stencil_step(const Tensor& u, double alpha) {
  const int64_t n = u.shape()[0];
  const Slice in(1, -1), before(0, -2), after(2, n);
  const Tensor center = u.index({in, in});
  return center + alpha * (u.index({before, in}) + u.index({after, in}) + u.index({in, before}) +
                           u.index({in, after}) - 4.0 * center);
}

// Two grids that swap: after the first two steps each write lands in the buffer of the grid
// it replaces (an intermediate of the sync that nothing reads after the write), so a
// 30-step loop is 30 kernels and allocates only the grids of its first two steps. The
// values are the loop's to within f32 rounding of the same operations.
TEST(RegionWrite, TwoGridsThatSwapWriteInPlaceOneKernelAStep) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 24;
  const int steps = 30;
  const std::vector<float> u0 = testing::random_floats(n * n, rng, 0.0f, 1.0f);
  Tensor u = Tensor::from_vector(u0, {n, n}).eval();
  Tensor next = u;
  for (int s = 0; s < steps; ++s) {
    next = update_slice(next, stencil_step(u, 0.2), {1, 1});
    std::swap(u, next);
  }
  next = Tensor();
  reset_stats();
  u.eval();
  EXPECT_EQ(stats().kernels_launched, steps);
  EXPECT_EQ(stats().bytes_allocated, 2 * n * n * 4) << "only the first two steps' grids";
  expect_stencil_of(u, u0, n, steps);
}

// One grid written from itself (numpy's u[1:-1, 1:-1] = f(u)): the update reads x, so x is
// never written in place, even when nothing else holds it; each step computes from the
// grid as it was.
TEST(RegionWrite, AnUpdateThatReadsXWritesIntoACopy) {
  std::mt19937_64 rng(testing::test_seed() + 3);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 24;
  const int steps = 8;
  const std::vector<float> u0 = testing::random_floats(n * n, rng, 0.0f, 1.0f);
  Tensor u = Tensor::from_vector(u0, {n, n}).eval();
  for (int s = 0; s < steps; ++s) {
    u = update_slice(u, stencil_step(u, 0.2), {1, 1});
    u.eval();  // x is then a realized buffer that only the next write holds
  }
  expect_stencil_of(u, u0, n, steps);
}

// Where the output of an update_slice or index_add starts (jit::output_start): in its x, an
// intermediate the kernel reads last, only when the kernel reads nothing of x, neither
// through its update nor as its index (a GPU kernel's threads would read positions that
// others have already added to).
TEST(RegionWrite, OutputStartsInXOnlyWhenTheKernelReadsNothingOfX) {
  const Tensor x = Tensor::arange(3, DType::I64) * 2 - Tensor::arange(3, DType::I64);  // 0 1 2
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 0, 1}, {3});
  auto start_of = [](const Tensor& result) {
    const jit::Trace trace = jit::build_trace({detail::TensorAccess::node(result).get()});
    const std::shared_ptr<const jit::LaunchPlan> plan = jit::build_plan(trace);
    EXPECT_EQ(plan->kernels.size(), 2u) << "x's kernel, then the write";
    return jit::output_start(*plan, {}, plan->kernels.size() - 1);
  };
  const Tensor ones = Tensor::ones({3}, DType::I64);
  EXPECT_EQ(start_of(index_add(x, 0, ids, ones)), jit::OutputStart::kXInPlace);
  EXPECT_EQ(start_of(index_add(x, 0, x, ones)), jit::OutputStart::kCopyOfX);
  EXPECT_EQ(start_of(index_add(x, 0, ids, x * 3)), jit::OutputStart::kCopyOfX);
  EXPECT_EQ(start_of(update_slice(x, ones.slice(0, 0, 1), {1})), jit::OutputStart::kXInPlace);
  EXPECT_EQ(start_of(update_slice(x, x.slice(0, 0, 1) + 1, {1})), jit::OutputStart::kCopyOfX);
  EXPECT_EQ(index_add(x, 0, x, ones).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace kiln
