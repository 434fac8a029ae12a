// slice with a start tensor (dynamic_slice): x[start : start + length] along one axis, the
// start read when the kernel runs. Every element against a host loop, one plan for every
// start, errors for starts outside x (never wrapped), trace files, a compiled step with a
// moving position, and the CUDA kernel through the emulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kiln/kiln.h"
#include "tests/cuda_emulation/emulated_kernels.h"
#include "tests/cuda_emulation/expect_emulated.h"
#include "tests/cuda_emulation/run_emulated.h"
#include "tests/reference_util.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

// x[start : start + length] along `axis` of a row-major array of `shape`, by index.
std::vector<float> host_slice(const std::vector<float>& x, const std::vector<int64_t>& shape,
                              int axis, int64_t start, int64_t length) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = start; k < start + length; ++k) {
      for (int64_t i = 0; i < inner; ++i) out.push_back(x[(o * shape[axis] + k) * inner + i]);
    }
  }
  return out;
}

Tensor start_tensor(int64_t start, DType dtype = DType::I64) {
  return Tensor::from_vector(std::vector<int64_t>{start}, {}).astype(dtype);
}

// Every start of every length along every axis, fused into a consumer; the reference
// evaluator agrees; a new start reuses the plan its first start built.
TEST(DynamicSlice, EveryStartAlongEveryAxisMatchesAHostLoop) {
  std::mt19937_64 rng(testing::test_seed() + 41);
  SCOPED_TRACE(testing::test_seed());
  const std::vector<int64_t> shape = {3, 7, 5};
  const std::vector<float> values = testing::random_floats(3 * 7 * 5, rng);
  const Tensor x = Tensor::from_vector(values, shape).eval();
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t length : {int64_t{0}, int64_t{1}, shape[axis] - 1, shape[axis]}) {
      int64_t plans_after_first = -1;
      for (int64_t start = 0; start + length <= shape[axis]; ++start) {
        SCOPED_TRACE(absl::StrCat("axis ", axis, " length ", length, " start ", start));
        const DType dtype = start % 2 == 0 ? DType::I64 : DType::I32;
        Tensor y = slice(x, axis - 3, start_tensor(start, dtype), length) * 2.0 + 1.0;
        std::vector<int64_t> want_shape = shape;
        want_shape[axis] = length;
        EXPECT_EQ(y.shape(), want_shape);
        std::vector<float> want = host_slice(values, shape, axis, start, length);
        for (float& w : want) w = w * 2.0f + 1.0f;
        EXPECT_EQ(testing::reference_tensor(y).to_vector<float>(), want);
        EXPECT_EQ(y.to_vector<float>(), want);
        if (start == 1) plans_after_first = stats().plans_built;
        if (start > 1) EXPECT_EQ(stats().plans_built, plans_after_first) << "a plan per start";
      }
    }
  }
}

// Wrong kinds of start and lengths that do not fit are errors when recorded; a start
// outside x (negative ones included: they are not counted from the end) is an error at the
// sync, which leaves x as it was.
TEST(DynamicSlice, BadStartsAndLengthsAreErrors) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).eval();
  testing::expect_error([&] { slice(x, 1, Tensor::zeros({}, DType::F32), 1); },
                        {"[dynamic_slice]", "start must be one I32 or I64 value", "f32[]"});
  testing::expect_error([&] { slice(x, 1, Tensor::zeros({2}, DType::I64), 1); },
                        {"[dynamic_slice]", "start must be one I32 or I64 value"});
  testing::expect_error([&] { slice(x, 1, start_tensor(0), 4); },
                        {"[dynamic_slice]", "length 4", "extent 3", "f32[2, 3]"});
  testing::expect_error([&] { slice(x, 1, start_tensor(0), -1); },
                        {"[dynamic_slice]", "length -1"});
  testing::expect_error([&] { slice(x, 2, start_tensor(0), 1); }, {"[dynamic_slice]", "axis 2"});
  testing::expect_error([&] { slice(Tensor::ones({}), 0, start_tensor(0), 1); },
                        {"[dynamic_slice]", "0-d"});
  for (int64_t bad : {-1, -2, 2, 100}) {
    SCOPED_TRACE(bad);
    Tensor y = slice(x, 1, start_tensor(bad), 2) + 1.0;
    testing::expect_error([&] { y.eval(); },
                          {"[dynamic_slice]", "start " + std::to_string(bad), "0 <= start <= 1"});
    testing::expect_error([&] { testing::reference_tensor(y); },
                          {"[dynamic_slice]", "start " + std::to_string(bad)});
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
}

// A trace file keeps the start as an input of its own and the length as an attribute, so a
// replay reads where the new start says.
TEST(DynamicSlice, TraceFilesDumpLoadAndReplay) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {5});
  const Tensor y = slice(x, 0, start_tensor(1), 3);
  const std::string json = dump_trace({y}, DumpFormat::Json);
  EXPECT_NE(json.find("\"length\""), std::string::npos) << json;
  EXPECT_NE(dump_trace({y}, DumpFormat::Text).find("dynamic_slice("), std::string::npos);
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.inputs().size(), 2u);
  std::map<std::string, Tensor> inputs;
  for (const auto& in : trace.inputs()) {
    inputs[in.name] = in.dtype == DType::I64 ? start_tensor(2) : x;
  }
  EXPECT_EQ(trace.run(inputs)[0].to_vector<float>(), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

// A compiled step that writes a row of a cache at a position and reads the window ending
// there: each call reads where its position says, from one recording.
TEST(DynamicSlice, CompiledStepReadsAMovingWindow) {
  std::mt19937_64 rng(testing::test_seed() + 42);
  SCOPED_TRACE(testing::test_seed());
  const int64_t capacity = 12, dim = 4, window = 3;
  auto step = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    // in: cache [capacity, dim], row [1, dim], position (I64), window start (I64)
    Tensor cache = update_slice(in[0], in[1], 0, in[2]);
    return {sum(slice(cache, 0, in[3], window), {0}), cache};
  };
  Compiled compiled = compile(step);
  Tensor cache = Tensor::zeros({capacity, dim}).eval();
  std::vector<float> host(capacity * dim, 0.0f);
  const int64_t records_before = stats().compiled_records;
  for (int64_t pos = 0; pos < capacity; ++pos) {
    SCOPED_TRACE(pos);
    const std::vector<float> row = testing::random_floats(dim, rng);
    std::copy(row.begin(), row.end(), host.begin() + pos * dim);
    const int64_t from = pos + 1 >= window ? pos + 1 - window : 0;
    std::vector<Tensor> got = compiled(
        {cache, Tensor::from_vector(row, {1, dim}), start_tensor(pos), start_tensor(from)});
    // The window's sums in double; the kernel adds its three rows in f32 in an order of its
    // own, so each sum may be off by two roundings of the terms' magnitude (a few ulps of a
    // sum that cancels).
    std::vector<double> want(dim, 0.0), magnitude(dim, 0.0);
    for (int64_t k = from; k < from + window; ++k) {
      for (int64_t d = 0; d < dim; ++d) {
        want[d] += host[k * dim + d];
        magnitude[d] += std::fabs(host[k * dim + d]);
      }
    }
    const std::vector<float> sums = got[0].to_vector<float>();
    for (int64_t d = 0; d < dim; ++d) {
      EXPECT_NEAR(sums[d], want[d], 2.5e-7 * magnitude[d]) << "element " << d;
    }
    cache = got[1];
  }
  EXPECT_EQ(cache.to_vector<float>(), host);
  EXPECT_EQ(stats().compiled_records - records_before, 1) << "one recording, then replays";
}

// The CUDA kernel reads the start when it runs and reports one outside x to the host.
class DynamicSliceEmulationTest : public testing::ScratchDirTest {};

TEST_F(DynamicSliceEmulationTest, KernelReadsTheStartAndReportsOneOutsideX) {
  std::mt19937_64 rng(testing::test_seed() + 43);
  const Tensor x = Tensor::from_vector(testing::random_floats(3 * 10 * 4, rng), {3, 10, 4}).eval();
  testing::EmulatedPlans plans;
  std::vector<Tensor> cpu;
  for (const Tensor& start : {start_tensor(5), start_tensor(7, DType::I32), start_tensor(-1)}) {
    cpu.push_back(slice(x, 1, start, 3) * 2.0 + 1.0);
    plans.add(cpu.back());
  }
  testing::expect_cases_then_index_error(plans, cpu, dir_.string(),
                                         {"[dynamic_slice]", "start -1", "0 <= start <= 7"});
}

}  // namespace
}  // namespace kiln
