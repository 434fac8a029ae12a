// take, take_along_axis and embedding (ops/gather.h): values against loops written here
// from numpy's definitions, out-of-range indices as errors at the sync (on the CPU and in
// the CUDA emulation), fusion into consumers, errors at record time, trace files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "jit/backend/backend.h"
#include "jit/fusion/launch_plan.h"
#include "jit/fusion/trace.h"
#include "kiln/kiln.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// Random indices in [-extent, extent) (negative ones count from the end).
std::vector<int64_t> random_indices(int64_t n, int64_t extent, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(-extent, extent - 1);
  std::vector<int64_t> v(n);
  for (int64_t& i : v) i = pick(rng);
  return v;
}

int64_t wrapped(int64_t i, int64_t extent) { return i < 0 ? i + extent : i; }

// numpy.take over every axis of a [3, 4, 5] x, with 2-D indices; every element checked.
TEST(Take, MatchesNumpyOnEveryAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {3, 4, 5};
  const std::vector<float> xv = testing::random_floats(60, rng);
  Tensor x = Tensor::from_vector(xv, shape);
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const std::vector<int64_t> iv = random_indices(6, shape[axis], rng);
    Tensor indices = Tensor::from_vector(iv, {2, 3});
    std::vector<float> got = take(x, indices, axis - 3).to_vector<float>();  // negative axis
    std::vector<int64_t> out_shape = shape;
    out_shape[axis] = 6;  // the two index dims, flattened: same row-major order
    ASSERT_EQ(got.size(), static_cast<size_t>(testing::count(out_shape)));
    for (int64_t e = 0; e < testing::count(out_shape); ++e) {
      std::vector<int64_t> at = testing::unravel(e, out_shape);
      at[axis] = wrapped(iv[at[axis]], shape[axis]);
      EXPECT_EQ(got[e], xv[(at[0] * 4 + at[1]) * 5 + at[2]]) << "element " << e;
    }
  }
}

// numpy.take_along_axis with indices broadcast against x on the other dims.
TEST(TakeAlongAxis, MatchesNumpyWithBroadcastIndices) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  const std::vector<double> xv = testing::random_doubles(12, rng);
  Tensor x = Tensor::from_vector(xv, {3, 4});
  const std::vector<int64_t> iv = random_indices(2, 3, rng);  // [2, 1]: broadcast over columns
  std::vector<int32_t> iv32(iv.begin(), iv.end());
  std::vector<double> got =
      take_along_axis(x, Tensor::from_vector(iv32, {2, 1}), 0).to_vector<double>();
  ASSERT_EQ(got.size(), 8u);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(got[r * 4 + c], xv[wrapped(iv[r], 3) * 4 + c]);
  }
  // The argmax along an axis picks the max: take_along_axis(x, argmax keepdims) == max.
  Tensor best = take_along_axis(x, argmax(x, 1, true), 1);
  EXPECT_EQ(best.to_vector<double>(), max(x, {1}, true).to_vector<double>());
}

TEST(Embedding, IsTakeAlongAxisZeroAndFusesIntoItsConsumers) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  const std::vector<float> tv = testing::random_floats(10 * 8, rng);
  Tensor table = Tensor::from_vector(tv, {10, 8});
  const std::vector<int64_t> ids = random_indices(6, 10, rng);
  Tensor idx = Tensor::from_vector(ids, {2, 3});
  Tensor w = Tensor::from_vector(testing::random_floats(8 * 4, rng), {8, 4});
  Tensor y = embedding(table, idx) * 2.0 + 1.0;
  Tensor z = matmul(embedding(table, idx), w);
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(stats().kernels_launched, 1) << "the gather fuses into the elementwise kernel";
  reset_stats();
  z.eval();
  EXPECT_EQ(stats().kernels_launched, 1) << "the gather fuses into the matmul's prologue";
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 8}));
  for (int64_t e = 0; e < 48; ++e) {
    EXPECT_EQ(got[e], tv[wrapped(ids[e / 8], 10) * 8 + e % 8] * 2.0f + 1.0f);
  }
}

// An out-of-range index fails the sync with the op, the index and the extent; the tensors
// that existed stay valid and the next sync works.
TEST(Take, OutOfRangeIndexIsAnErrorAtTheSync) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {5});
  for (int64_t bad : {5, -6, 1000}) {
    Tensor indices = Tensor::from_vector(std::vector<int64_t>{0, bad, 1}, {3});
    Tensor y = take(x, indices, 0) + 1.0;  // recording succeeds: the values are not known
    testing::expect_error([&] { y.eval(); },
                          {"[take]", "index " + std::to_string(bad), "extent 5"});
  }
  // An embedding's index is one value along each table row it reads; it is still checked.
  Tensor table = Tensor::from_vector(std::vector<float>(20, 1.0f), {5, 4});
  for (int64_t bad : {5, -6}) {
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 2, bad, 1}, {2, 2});
    testing::expect_error([&] { (embedding(table, ids) * 2.0).eval(); },
                          {"index " + std::to_string(bad), "extent 5"});
  }
  Tensor rows = Tensor::from_vector(std::vector<int32_t>{3, 0}, {1, 2});
  testing::expect_error(
      [&] {
        take_along_axis(x.reshape({1, 5}), rows + 2, 1).eval();
      },
      {"[take_along_axis]", "index 5", "extent 5"});
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(take(x, rows, 0).to_vector<float>(), (std::vector<float>{4, 1}));
}

TEST(Take, BadOperandsAreClearErrorsWhenRecorded) {
  Tensor x = Tensor::zeros({2, 3});
  testing::expect_error([&] { take(x, Tensor::zeros({2}), 0); },
                        {"[take]", "i32 or i64 indices", "f32"});
  testing::expect_error([&] { take(x, Tensor::zeros({2}, DType::I64), 2); },
                        {"[take]", "axis 2", "rank 2"});
  testing::expect_error([&] { take(Tensor::zeros({}), Tensor::zeros({2}, DType::I64), 0); },
                        {"[take]", "0-d"});
  testing::expect_error([&] { take_along_axis(x, Tensor::zeros({2}, DType::I64), 0); },
                        {"[take_along_axis]", "rank 2"});
  testing::expect_error(
      [&] {
        take_along_axis(x, Tensor::zeros({2, 2}, DType::I64), 0);
      },
      {"[take_along_axis]", "does not broadcast"});
}

// update_slice: every element against a host copy with the range overwritten, over a short
// decode loop that writes one position per step along a negative axis; casts and errors.
TEST(UpdateSlice, WritesTheRangeAndKeepsTheRest) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  SCOPED_TRACE(testing::test_seed());
  const int64_t heads = 2, capacity = 6, dim = 3;
  std::vector<float> want(heads * capacity * dim, 0.0f);
  Tensor cache = Tensor::zeros({heads, capacity, dim});
  for (int64_t pos = 0; pos < capacity; ++pos) {
    const std::vector<float> step = testing::random_floats(heads * dim, rng);
    cache = update_slice(cache, Tensor::from_vector(step, {heads, 1, dim}), -2, pos);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) want[(h * capacity + pos) * dim + d] = step[h * dim + d];
    }
    EXPECT_EQ(cache.to_vector<float>(), want) << "after step " << pos;
  }
  // A wider update in the middle, cast to x's dtype; x itself is unchanged.
  Tensor x = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  Tensor y = update_slice(x, Tensor::from_vector(std::vector<float>{9.5, 8, 7, 6}, {2, 2}), 1, 1);
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 9, 8, 4, 5, 7, 6, 8}));
  EXPECT_EQ(x.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(update_slice(x, Tensor::zeros({1, 4}, DType::I32), 0, 1).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0}));
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::zeros({2, 2}, DType::I32), 1, 3);
      },
      {"[update_slice]", "start 3", "extent 4", "0 <= start <= 2", "i32[2, 4]"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::zeros({2, 1}, DType::I32), 1, -1);
      },
      {"[update_slice]", "start -1"});
  testing::expect_error(
      [&] {
        update_slice(x, Tensor::zeros({3, 1}, DType::I32), 1, 0);
      },
      {"[update_slice]", "dim 0 of update must equal x's (2)", "i32[3, 1]"});
  testing::expect_error([&] { update_slice(x, Tensor::zeros({4}, DType::I32), 0, 0); },
                        {"[update_slice]", "x's rank 2"});
  testing::expect_error([&] { update_slice(x, x, 2, 0); }, {"[update_slice]", "axis 2"});
}

// A 200-step decode loop writing one position per step: `start` is a launch parameter, so
// steps after the second build no plan and compile nothing; the cache is written in place
// (its handle is replaced each step), so the bytes allocated per step are the step's
// input alone, never the cache's size. Every element is checked against a host copy.
TEST(UpdateSlice, DecodeLoopReusesOnePlanAndWritesInPlace) {
  std::mt19937_64 rng(testing::test_seed() + 6);
  SCOPED_TRACE(testing::test_seed());
  const int64_t heads = 2, capacity = 200, dim = 8;
  const int64_t cache_bytes = heads * capacity * dim * 4, step_bytes = heads * dim * 4;
  std::vector<float> want(heads * capacity * dim, 0.0f);
  Tensor cache = Tensor::zeros({heads, capacity, dim}).eval();
  Stats after_second{};
  for (int64_t pos = 0; pos < capacity; ++pos) {
    const std::vector<float> step = testing::random_floats(heads * dim, rng);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) want[(h * capacity + pos) * dim + d] = step[h * dim + d];
    }
    const Stats before = stats();
    cache = update_slice(cache, Tensor::from_vector(step, {heads, 1, dim}), 1, pos);
    cache.eval();
    const Stats now = stats();
    ASSERT_EQ(now.bytes_allocated - before.bytes_allocated,
              step_bytes * testing::buffers_per_host_tensor())
        << "step " << pos << ": only the step's input is allocated (the cache is " << cache_bytes
        << " bytes)";
    ASSERT_EQ(now.kernels_launched - before.kernels_launched, 1) << "step " << pos;
    if (pos == 1) after_second = now;
  }
  const Stats end = stats();
  EXPECT_EQ(end.plans_built, after_second.plans_built) << "a plan was built after step 2";
  EXPECT_EQ(end.kernels_compiled, after_second.kernels_compiled);
  EXPECT_EQ(cache.to_vector<float>(), want);
}

// In place only when nothing else can see x: a kept handle, or a pending op that reads x,
// still sees the old values (then the kernel writes into a copy).
TEST(UpdateSlice, KeepsXWhenSomethingStillSeesIt) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}).eval();
  Tensor kept = x;
  Tensor pending = x * 10.0;
  const Stats before = stats();
  x = update_slice(x, Tensor::from_vector(std::vector<float>{-1, -2}, {2}), 0, 1);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, -1, -2, 4}));
  EXPECT_GE(stats().bytes_allocated - before.bytes_allocated, 16) << "a copy of x";
  EXPECT_EQ(kept.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{10, 20, 30, 40}));
  // Without the kept handle and the pending reader, the next write is in place.
  kept = Tensor();
  pending = Tensor();
  const Stats again = stats();
  x = update_slice(x, Tensor::from_vector(std::vector<float>{9}, {1}), 0, 0);
  x.eval();  // (reading x back from a GPU would allocate its host copy)
  EXPECT_EQ(stats().bytes_allocated - again.bytes_allocated, 4 * testing::buffers_per_host_tensor())
      << "only the update";
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{9, -1, -2, 4}));
}

TEST(Take, TraceFilesDumpLoadAndReplay) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor i = Tensor::from_vector(std::vector<int32_t>{2, -3}, {2});
  Tensor j = Tensor::from_vector(std::vector<int64_t>{1, 0}, {2, 1});
  std::vector<Tensor> outs = {take(x, i, 1), take_along_axis(x, j, 1) * 2.0};
  const std::string json = dump_trace(outs, DumpFormat::Json);
  EXPECT_NE(json.find("\"op\":\"take\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"take_along_axis\""), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) {
    inputs[in.name] = in.name == "in0" ? x : in.name == "in1" ? i : j;
  }
  std::vector<Tensor> again = trace.run(inputs);
  EXPECT_EQ(again[0].to_vector<float>(), (std::vector<float>{3, 1, 6, 4}));
  EXPECT_EQ(again[1].to_vector<float>(), (std::vector<float>{4, 8}));
}

// The same errors from generated CUDA, run in the host emulation: the kernel reports into
// the index error word and the launcher raises it after the plan.
class GatherEmulationTest : public testing::ScratchDirTest {};

TEST_F(GatherEmulationTest, OutOfRangeIndexIsReportedByTheKernel) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor good = Tensor::from_vector(std::vector<int64_t>{-1, 0}, {2});
  Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, -4}, {2});
  testing::EmulatedPlans plans;
  for (const Tensor& indices : {good, bad}) plans.add(exp(take(x, indices, 1)));
  absl::StatusOr<testing::EmulatedKernels> kernels =
      testing::EmulatedKernels::build(plans.modules, dir_.string());
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const testing::EmulationVariant& v : testing::emulation_variants()) {
    SCOPED_TRACE(v.name());
    std::vector<std::shared_ptr<base::Buffer>> out = plans.run(*kernels, 0, v);
    const float* got = out[0]->as<float>();
    const float want[] = {3, 1, 6, 4};
    for (int e = 0; e < 4; ++e) EXPECT_FLOAT_EQ(got[e], std::exp(want[e]));
    testing::expect_error([&] { plans.run(*kernels, 1, v); }, {"[take]", "index -4", "extent 3"});
  }
}

}  // namespace
}  // namespace kiln
