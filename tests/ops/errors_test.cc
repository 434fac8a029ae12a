// Every bad call throws kiln::Error naming the op, the shapes/dtypes and what was expected;
// a failed op records nothing and leaves every existing tensor valid.
#include <fstream>
#include <limits>

#include "absl/strings/str_join.h"
#include "kiln/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(Errors, IncompatibleBroadcast) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 3});
  expect_error([&] { a + b; }, {"[add]", "[2, 3]", "[4, 3]", "do not broadcast", "a: f32[2, 3]"});
  expect_error([&] { where(Tensor::ones({2}, DType::Bool), a, b); }, {"[where]", "broadcast"});
  expect_error([&] { a.broadcast_to({3, 3}); }, {"[broadcast_to]", "[3, 3]", "x: f32[2, 3]"});
  expect_error([&] { a.broadcast_to({3}); }, {"[broadcast_to]"});
}

TEST(Errors, BadAxes) {
  Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { sum(x, {2}); }, {"[sum]", "axis 2", "rank 2", "x: f32[2, 3]"});
  expect_error([&] { sum(x, {-3}); }, {"[sum]", "axis -3"});
  expect_error([&] { sum(x, {0, -2}); }, {"[sum]", "more than once"});
  expect_error([&] { argmax(x, 5); }, {"[argmax]", "axis 5"});
  expect_error([&] { softmax(x, 2); }, {"[softmax]", "axis 2"});
  expect_error([&] { x.permute({0, 0}); }, {"[permute]", "twice"});
  expect_error([&] { x.permute({0}); }, {"[permute]", "each of the 2 axes"});
  expect_error([&] { x.transpose(0, 2); }, {"[transpose]", "axis 2"});
  expect_error([&] { x.squeeze(0); }, {"[squeeze]", "size 2", "expected 1"});
  expect_error([&] { x.unsqueeze(4); }, {"[unsqueeze]", "axis 4"});
  expect_error([&] { x.slice(2, 0, 1); }, {"[slice]", "axis 2"});
  expect_error([&] { x.slice(0, 0, 1, 0); }, {"[slice]", "step 0"});
  expect_error([&] { concat({x, x}, 3); }, {"[concat]", "axis 3"});
  expect_error([&] { concat({x, Tensor::zeros({2, 3, 1})}, 0); }, {"[concat]", "tensors[1]"});
  expect_error([&] { concat({}, 0); }, {"[concat]", "at least one"});
}

TEST(Errors, BadReshape) {
  Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { x.reshape({4, 2}); }, {"[reshape]", "[4, 2] has 8 elements", "6"});
  expect_error([&] { x.reshape({-1, -1}); }, {"[reshape]", "more than one -1"});
  expect_error([&] { x.reshape({-1, 4}); }, {"[reshape]", "cannot infer"});
  expect_error([&] { x.reshape({-2, 3}); }, {"[reshape]", "negative"});
  expect_error([&] { Tensor::zeros({0, 3}).reshape({-1, 0}); }, {"[reshape]", "cannot infer"});
}

TEST(Errors, MatmulInnerDimensions) {
  expect_error(
      [&] {
        matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
      },
      {"[matmul] inner dimensions 3 and 4 differ (a: f32[2, 3], b: f32[4, 5])"});
  expect_error(
      [&] {
        matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4}));
      },
      {"[matmul]", "batch"});
  expect_error([&] { matmul(Tensor::zeros({}), Tensor::zeros({3})); }, {"[matmul]", "rank >= 1"});
  expect_error(
      [&] {
        matmul(Tensor::ones({2, 2}, DType::Bool), Tensor::ones({2, 2}, DType::Bool));
      },
      {"[matmul]", "bool"});
}

TEST(Errors, DataAccess) {
  Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { x.to_vector<double>(); }, {"[to_vector]", "f64", "f32[2, 3]"});
  expect_error([&] { x.to_vector<int32_t>(); }, {"[to_vector]", "i32"});
  expect_error([&] { x.item(); }, {"[item]", "exactly one element", "f32[2, 3]"});
  expect_error(
      [&] {
        Tensor::from_vector<float>({1, 2, 3}, {2, 2});
      },
      {"[from_vector]", "[2, 2] needs 4", "has 3"});
}

TEST(Errors, UnsupportedDtypes) {
  Tensor b = Tensor::ones({2}, DType::Bool);
  expect_error([&] { neg(b); }, {"[neg]", "bool"});
  expect_error([&] { b - b; }, {"[sub]", "bool"});
  expect_error([&] { mean(Tensor::ones({2}, DType::I64)); }, {"[mean]", "floating", "i64[2]"});
  expect_error([&] { where(Tensor::ones({2}), b, b); }, {"[where]", "bool"});
  expect_error([&] { Tensor::rand({2}, 0, DType::I64); }, {"[rand]", "floating"});
}

TEST(Errors, NegativeAndOverflowingSizes) {
  expect_error([&] { Tensor::zeros({-1, 2}); }, {"[constant]", "negative"});
  expect_error([&] { Tensor::ones({int64_t{1} << 40, int64_t{1} << 40}); }, {"overflow"});
  // No elements, but strides past 64 bits (a zero first, then two huge dims).
  expect_error(
      [&] {
        Tensor::from_vector<float>({}, {0, int64_t{1} << 40, int64_t{1} << 40});
      },
      {"[from_vector]", "overflow"});
  expect_error([&] { Tensor::from_vector<float>({}, {-2}); }, {"[from_vector]", "negative"});
  expect_error([&] { Tensor::arange(-5); }, {"[arange]", "negative"});
  expect_error(
      [&] {
        Tensor::zeros({2}).broadcast_to({int64_t{1} << 40, int64_t{1} << 40, 2});
      },
      {"overflow"});
}

// After every kind of failure, existing tensors are intact and evaluable, and nothing was
// recorded (the pending graph behind them is unchanged).
TEST(Errors, FailedOpsRecordNothingAndLeaveTensorsValid) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor pending = exp(a) + 1;
  const std::string before = dump_trace({pending}, DumpFormat::Text);
  for (auto bad : std::vector<std::function<void()>>{
           [&] { pending + Tensor::zeros({4}); }, [&] { sum(pending, {7}); },
           [&] { pending.reshape({5}); }, [&] { matmul(pending, pending); },
           [&] { pending.to_vector<int64_t>(); }, [&] { pending.item(); }}) {
    EXPECT_THROW(bad(), Error);
  }
  EXPECT_EQ(dump_trace({pending}, DumpFormat::Text), before);
  EXPECT_FALSE(pending.is_realized());
  std::vector<float> got = pending.to_vector<float>();
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(got[i], std::exp(static_cast<float>(i + 1)) + 1);
  EXPECT_EQ(a.to_vector<float>()[5], 6.0f);
}

// Shapes above ops::kMaxRank are refused wherever a shape comes from outside: trace files
// (inputs and inferred nodes), .npy and .safetensors headers.
class ErrorsInFiles : public testing::ScratchDirTest {};

TEST_F(ErrorsInFiles, ShapesAboveTheRankLimit) {
  std::vector<int64_t> ones(70, 1);
  const std::string dims = absl::StrJoin(ones, ", ");
  expect_error(
      [&] {
        load_trace(R"({"format": "kiln.trace", "version": 1, "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [)" +
                   dims + R"(]}], "outputs": [0]})");
      },
      {"trace: node 0", "rank 70", "limit of 32 dimensions"});
  expect_error(
      [&] {
        load_trace(R"({"format": "kiln.trace", "version": 1, "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [1]},
          {"id": 1, "op": "reshape", "args": [0], "attrs": {"shape": [)" +
                   dims + R"(]}, "dtype": "f32", "shape": [)" + dims + R"(]}], "outputs": [1]})");
      },
      {"trace: node 1", "[reshape]", "rank 70", "limit of 32 dimensions"});

  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + absl::StrJoin(ones, ",") + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream(path("a.npy"), std::ios::binary)
      << std::string("\x93NUMPY\x01\x00", 8) << static_cast<char>(header.size() & 0xff)
      << static_cast<char>(header.size() >> 8) << header << std::string(4, '\0');
  expect_error([&] { load_npy(path("a.npy")); }, {"a.npy", "rank 70", "limit of 32"});

  const std::string json =
      R"({"w": {"dtype": "F32", "shape": [)" + dims + R"(], "data_offsets": [0, 4]}})";
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  std::ofstream(path("a.safetensors"), std::ios::binary) << length << json << std::string(4, '\0');
  expect_error([&] { load_safetensors(path("a.safetensors")); },
               {"tensor 'w'", "rank 70", "limit of 32"});
}

}  // namespace
}  // namespace kiln
