// index_add, segment_sum and bincount (ops/index_add.h): values against loops written here
// from PyTorch's and TensorFlow's definitions, on fresh random data with repeated and
// negative indices, every element checked; out-of-range indices as errors at the sync on the
// CPU and in the CUDA emulation, with x left intact; errors at record time; trace files.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/cuda_emulation/expect_emulated.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

std::vector<int64_t> random_indices(int64_t n, int64_t extent, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(-extent, extent - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& i : v) i = pick(rng);
  return v;
}

// torch.index_add over every axis of a [4, 5, 6] x with 7 source slices: f32 added in the
// order of the slices, as a loop adds them, so every element is equal, not just close.
TEST(IndexAdd, MatchesALoopOnEveryAxis) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {4, 5, 6};
  const std::vector<float> xv = testing::random_floats(120, rng);
  const Tensor x = Tensor::from_vector(xv, shape);
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    std::vector<int64_t> source_shape = shape;
    source_shape[axis] = 7;
    const std::vector<float> sv = testing::random_floats(testing::count(source_shape), rng);
    const std::vector<int64_t> iv = random_indices(7, shape[axis], rng);
    const Tensor got =
        index_add(x, axis - 3, Tensor::from_vector(iv, {7}), Tensor::from_vector(sv, source_shape));
    std::vector<float> want = xv;
    for (int64_t e = 0; e < testing::count(source_shape); ++e) {
      std::vector<int64_t> at = testing::unravel(e, source_shape);
      const int64_t l = at[axis];
      at[axis] = iv[l] < 0 ? iv[l] + shape[axis] : iv[l];
      want[(at[0] * 5 + at[1]) * 6 + at[2]] += sv[e];
    }
    EXPECT_EQ(got.to_vector<float>(), want);
  }
  EXPECT_EQ(x.to_vector<float>(), xv) << "x itself is not changed";
}

// Integers wrap as two's complement; a source of another dtype is cast to x's first.
TEST(IndexAdd, IntegersWrapAndSourcesAreCastFirst) {
  const Tensor x = Tensor::from_vector(std::vector<int32_t>{2147483647, 0, -5}, {3});
  const Tensor index = Tensor::from_vector(std::vector<int64_t>{0, 2, 2}, {3});
  const Tensor source = Tensor::from_vector(std::vector<float>{1.0f, 2.9f, -3.9f}, {3});
  EXPECT_EQ(index_add(x, 0, index, source).to_vector<int32_t>(),
            (std::vector<int32_t>{-2147483647 - 1, 0, -6}));
}

// tf.math.unsorted_segment_sum and numpy.bincount, against loops; an empty segment is zero.
TEST(SegmentSum, MatchesALoopAndBincountCounts) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 1000, k = 9, width = 3;
  std::vector<int64_t> ids(n);
  std::uniform_int_distribution<int64_t> pick(0, k - 2);  // segment k - 1 stays empty
  for (int64_t& i : ids) i = pick(rng);
  const std::vector<double> data = testing::random_doubles(n * width, rng);
  const Tensor sums = segment_sum(Tensor::from_vector(data, {n, width}),
                                  Tensor::from_vector(ids, {n}).astype(DType::I32), k);
  std::vector<double> want_sums(k * width, 0.0);
  std::vector<int64_t> want_counts(k, 0);
  std::vector<double> want_weighted(k, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < width; ++c) want_sums[ids[i] * width + c] += data[i * width + c];
    want_counts[ids[i]] += 1;
    want_weighted[ids[i]] += data[i * width];
  }
  EXPECT_EQ(sums.shape(), (std::vector<int64_t>{k, width}));
  EXPECT_EQ(sums.to_vector<double>(), want_sums);
  const Tensor id_tensor = Tensor::from_vector(ids, {n});
  const Tensor counts = bincount(id_tensor, k);
  EXPECT_EQ(counts.dtype(), DType::I64);
  EXPECT_EQ(counts.to_vector<int64_t>(), want_counts);
  const Tensor first_column = Tensor::from_vector(data, {n, width}).slice(1, 0, 1).reshape({n});
  EXPECT_EQ(bincount(id_tensor, first_column, k).to_vector<double>(), want_weighted);
}

// f32 sums of a stored tensor (its rows added where they lie) and of a computed one (through
// the evaluator) both add each output's rows in index order, with negative indices counting
// from the end and x's own values first: bit for bit a loop's f32 sums.
TEST(IndexAdd, FloatSumsAddInIndexOrderWhetherTheSourceIsStoredOrComputed) {
  std::mt19937_64 rng(testing::test_seed() + 5);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 20001, k = 11, width = 2;
  std::vector<int64_t> ids(n);
  std::uniform_int_distribution<int64_t> pick(-k, k - 1);
  for (int64_t& i : ids) i = pick(rng);
  const std::vector<float> data = testing::random_floats(n * width, rng, -100, 100);
  const std::vector<float> x = testing::random_floats(k * width, rng);
  const Tensor source = Tensor::from_vector(data, {n, width});
  const Tensor index = Tensor::from_vector(ids, {n}), start = Tensor::from_vector(x, {k, width});
  const std::vector<float> stored = index_add(start, 0, index, source).to_vector<float>();
  const std::vector<float> computed = index_add(start, 0, index, source * 0.5).to_vector<float>();
  std::vector<float> want_stored = x, want_computed = x;
  for (int64_t l = 0; l < n; ++l) {
    const int64_t at = (ids[l] < 0 ? ids[l] + k : ids[l]) * width;
    for (int64_t c = 0; c < width; ++c) {
      want_stored[at + c] += data[l * width + c];
      want_computed[at + c] += data[l * width + c] * 0.5f;
    }
  }
  EXPECT_EQ(stored, want_stored);
  EXPECT_EQ(computed, want_computed);
}

// Long integer sums with one outer slice are added by several threads into partials
// (runtime/cpu/index_add_kernel.cc): counts and i32 sums that wrap, against loops.
TEST(SegmentSum, LongIntegerSumsWrapAndCountAsALoopDoes) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  const int64_t n = 50001, k = 37;
  std::vector<int64_t> ids(n);
  std::uniform_int_distribution<int64_t> pick(0, k - 1);
  for (int64_t& i : ids) i = pick(rng);
  std::vector<int32_t> values(2 * n);
  for (int32_t& v : values) v = static_cast<int32_t>(rng());  // sums wrap many times
  const Tensor id_tensor = Tensor::from_vector(ids, {n});
  std::vector<int64_t> want_counts(k, 0);
  std::vector<uint32_t> want_sums(2 * k, 0);  // two's complement wrap, without overflow
  for (int64_t i = 0; i < n; ++i) {
    want_counts[ids[i]] += 1;
    for (int64_t c = 0; c < 2; ++c) {
      want_sums[ids[i] * 2 + c] += static_cast<uint32_t>(values[i * 2 + c]);
    }
  }
  EXPECT_EQ(bincount(id_tensor, k).to_vector<int64_t>(), want_counts);
  const std::vector<int32_t> got =
      segment_sum(Tensor::from_vector(values, {n, 2}), id_tensor, k).to_vector<int32_t>();
  ASSERT_EQ(got.size(), want_sums.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], static_cast<int32_t>(want_sums[i])) << "at " << i;
  }
}

// An index out of range fails the sync that reads the result, naming the op, the index and
// the extent; x and the cache stay as they were.
TEST(IndexAdd, OutOfRangeIndicesAreErrorsAtTheSync) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor source = Tensor::from_vector(std::vector<float>{10, 20}, {2});
  const Tensor bad = index_add(x, 0, Tensor::from_vector(std::vector<int64_t>{1, 3}, {2}), source);
  testing::expect_error([&] { bad.eval(); }, {"[index_add]", "index 3", "extent 3"});
  testing::expect_error(
      [&] {
        bincount(Tensor::from_vector(std::vector<int32_t>{0, -5}, {2}), 4).eval();
      },
      {"[index_add]", "index -5", "extent 4"});
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  const Tensor good =
      index_add(x, 0, Tensor::from_vector(std::vector<int64_t>{1, -1}, {2}), source);
  EXPECT_EQ(good.to_vector<float>(), (std::vector<float>{1, 12, 23}));
}

TEST(IndexAdd, BadOperandsAreErrorsThatNameThem) {
  const Tensor x = Tensor::zeros({3, 4});
  const Tensor index = Tensor::from_vector(std::vector<int64_t>{0, 1}, {2});
  testing::expect_error(
      [&] {
        index_add(x.astype(DType::Bool), 0, index, Tensor::ones({2, 4}));
      },
      {"[index_add]", "bool", "astype"});
  testing::expect_error(
      [&] {
        index_add(x, 0, index.astype(DType::F32), Tensor::ones({2, 4}));
      },
      {"[index_add]", "i32 or i64"});
  testing::expect_error(
      [&] {
        index_add(x, 0, index.reshape({1, 2}), Tensor::ones({2, 4}));
      },
      {"[index_add]", "one dim"});
  testing::expect_error(
      [&] {
        index_add(x, 0, index, Tensor::ones({3, 4}));
      },
      {"[index_add]", "3 slices along axis 0", "index has 2"});
  testing::expect_error(
      [&] {
        index_add(x, 1, index, Tensor::ones({2, 2}));
      },
      {"[index_add]", "dim 0 of source", "(3)"});
  testing::expect_error([&] { index_add(x, 2, index, Tensor::ones({3, 2})); }, {"[index_add]"});
  testing::expect_error([&] { segment_sum(Tensor::ones({}), index, 3); }, {"[segment_sum]"});
  testing::expect_error([&] { bincount(index, -1); }, {"[bincount]", "length -1"});
  testing::expect_error([&] { bincount(index, Tensor::ones({3}), 3); }, {"[bincount]", "weights"});
}

TEST(IndexAdd, TraceFilesDumpLoadAndReplay) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor index = Tensor::from_vector(std::vector<int32_t>{2, 0, 2}, {3});
  const Tensor source = Tensor::from_vector(std::vector<float>{1, 1, 2, 2, 3, 3}, {3, 2});
  const Tensor out = index_add(x, 0, index, source * 10.0);
  const std::string json = dump_trace({out}, DumpFormat::Json);
  EXPECT_NE(json.find("\"op\":\"index_add\""), std::string::npos) << json;
  LoadedTrace trace = load_trace(json);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) {
    inputs[in.name] = in.name == "in0" ? x : in.name == "in1" ? source : index;
  }
  EXPECT_EQ(trace.run(inputs)[0].to_vector<float>(), out.to_vector<float>());
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{21, 22, 3, 4, 45, 46}));
}

// The generated CUDA, run in the host emulation: repeated indices add up through the
// atomics, and an index out of range is reported by the kernel and raised after the plan.
class IndexAddEmulationTest : public testing::ScratchDirTest {};

TEST_F(IndexAddEmulationTest, AtomicAddsSumRepeatsAndBadIndicesAreReported) {
  std::mt19937_64 rng(testing::test_seed() + 2);
  SCOPED_TRACE(testing::test_seed());
  const Tensor x = Tensor::from_vector(testing::random_floats(40, rng), {8, 5});
  const Tensor source = Tensor::from_vector(testing::random_floats(60, rng), {12, 5});
  testing::EmulatedPlans plans;
  std::vector<Tensor> results;
  for (const std::vector<int64_t>& ids :
       {random_indices(12, 8, rng), std::vector<int64_t>(12, -1),
        std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2}}) {
    results.push_back(index_add(x, 0, Tensor::from_vector(ids, {12}), exp(source)) * 2.0);
    plans.add(results.back());
  }
  // Repeated indices add through atomics in any order: up to 12 terms of one sign (exp) on
  // an x of either sign, so the sums agree to a few roundings of the result, not bit for bit.
  testing::expect_cases_then_index_error(plans, results, dir_.string(),
                                         {"[index_add]", "index 8", "extent 8"}, 1e-5f);
}

// An empty source (x has an empty dim) still has its indices checked, as on the host: one
// out of range fails the sync.
TEST_F(IndexAddEmulationTest, IndicesOfAnEmptySourceAreCheckedToo) {
  testing::EmulatedPlans plans;
  std::vector<Tensor> results;
  for (int64_t bad : {1, 5}) {  // in range, then not
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, bad}, {2});
    results.push_back(index_add(Tensor::zeros({0, 3}), 1, ids, Tensor::zeros({0, 2})));
    plans.add(results.back());
  }
  testing::expect_error([&] { results[1].eval(); }, {"[index_add]", "index 5", "extent 3"});
  testing::expect_cases_then_index_error(plans, results, dir_.string(),
                                         {"[index_add]", "index 5", "extent 3"});
}

}  // namespace
}  // namespace kiln
