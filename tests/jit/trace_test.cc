// Trace dumps (text, JSON, DOT), loading them back, and rejecting bad trace files.
#include <nlohmann/json.hpp>

#include "kiln/nn.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

TEST(TraceDump, JsonMatchesTheDesignExample) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = sum(x * 2.0, {1});
  nlohmann::json doc = nlohmann::json::parse(dump_trace({y}, DumpFormat::Json));
  nlohmann::json want = nlohmann::json::parse(R"({"format": "kiln.trace", "version": 1,
   "nodes": [
    {"id": 0, "op": "input", "name": "in0", "dtype": "f32", "shape": [2, 3]},
    {"id": 1, "op": "constant", "dtype": "f32", "shape": [], "value": 2.0},
    {"id": 2, "op": "mul", "args": [0, 1], "dtype": "f32", "shape": [2, 3]},
    {"id": 3, "op": "sum", "args": [2], "attrs": {"axes": [1], "keepdims": false},
     "dtype": "f32", "shape": [2]}],
   "outputs": [3]})");
  EXPECT_EQ(doc, want);
  EXPECT_FALSE(y.is_realized());  // dumping evaluates nothing
}

TEST(TraceDump, TextAndDotNameEveryNode) {
  Tensor x = Tensor::ones({2, 2});
  Tensor y = softmax(x.transpose(0, 1) - 1.0);
  std::string text = dump_trace({y}, DumpFormat::Text);
  EXPECT_NE(text.find("%0 = constant 1.0 : f32[2, 2]"), std::string::npos) << text;
  EXPECT_NE(text.find("permute(%0) {axes=[1,0]}"), std::string::npos) << text;
  EXPECT_NE(text.find("softmax(%3) {axis=1} : f32[2, 2]"), std::string::npos) << text;
  EXPECT_NE(text.find("outputs: %4"), std::string::npos) << text;
  std::string dot = dump_trace({y}, DumpFormat::Dot);
  EXPECT_EQ(dot.rfind("digraph kiln_trace {", 0), 0u);
  EXPECT_NE(dot.find("n3 -> n4;"), std::string::npos) << dot;
}

// A program touching every op kind: dump to JSON, load, run on the same inputs: identical.
TEST(TraceRoundTrip, DumpLoadReplayGivesIdenticalOutputs) {
  std::mt19937_64 rng(testing::test_seed());
  SCOPED_TRACE(testing::test_seed());
  Tensor x = Tensor::from_vector(testing::random_floats(24, rng), {2, 3, 4});
  Tensor w = Tensor::from_vector(testing::random_floats(16, rng), {4, 4});
  Tensor g = Tensor::from_vector(testing::random_floats(4, rng), {4});
  Tensor h = layer_norm(gelu(matmul(x, w)), g, g * 0.5);
  Tensor parts = concat({h.slice(1, 0, 3, 2), rms_norm(h, g).slice(1, 1, 2)}, 1);
  Tensor r = Tensor::rand({2, 3, 4}, 9) + Tensor::randn({4}, 3) + Tensor::arange(4);
  std::vector<Tensor> outs = {
      parts,
      argmax(log_softmax(h.permute({2, 0, 1}), 0), -1, true),
      where(h > 0.0, h, r).astype(DType::BF16),
      mean(maximum(h, r).broadcast_to({5, 2, 3, 4}), {0, 2}),
      sum(x.astype(DType::I32) + Tensor::ones({4}, DType::I64), {}),
      pow(abs(x) + 1, 0.5).reshape({-1, 2}).unsqueeze(0).squeeze(0),
      logical_or(x < 0.0, logical_not(x > 1.0)),
      min(tanh(x) / sigmoid(x), {2}, true),
  };
  std::string json = dump_trace(outs, DumpFormat::Json);
  LoadedTrace trace = load_trace(json);
  ASSERT_EQ(trace.num_outputs(), outs.size());
  std::map<std::string, Tensor> inputs;
  ASSERT_EQ(trace.inputs().size(), 3u);
  for (const auto& in : trace.inputs()) {
    inputs[in.name] = in.name == "in0" ? x : in.name == "in1" ? w : g;
  }
  std::vector<Tensor> again = trace.run(inputs);
  EXPECT_EQ(dump_trace(again, DumpFormat::Json), json);  // the same trace, node for node
  for (size_t i = 0; i < outs.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(again[i].dtype(), outs[i].dtype());
    EXPECT_EQ(again[i].shape(), outs[i].shape());
    std::vector<double> a = testing::values(again[i]), b = testing::values(outs[i]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k], b[k]);
  }
}

TEST(TraceLoad, AcceptsCompositesAndNegativeAxes) {
  LoadedTrace t = load_trace(R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
    {"id": 1, "op": "input", "name": "w", "dtype": "f32", "shape": [4, 3]},
    {"id": 2, "op": "input", "name": "b", "dtype": "f32", "shape": [4]},
    {"id": 3, "op": "linear", "args": [0, 1, 2], "dtype": "f32", "shape": [2, 4]},
    {"id": 4, "op": "transpose", "args": [3], "attrs": {"a": 0, "b": 1}, "dtype": "f32", "shape": [4, 2]},
    {"id": 5, "op": "sum", "args": [4], "attrs": {"axes": [-1]}, "dtype": "f32", "shape": [4]},
    {"id": 6, "op": "unsqueeze", "args": [5], "attrs": {"axis": 0}, "dtype": "f32", "shape": [1, 4]},
    {"id": 7, "op": "constant", "dtype": "f32", "shape": [], "value": "-inf"},
    {"id": 8, "op": "maximum", "args": [6, 7], "dtype": "f32", "shape": [1, 4]}],
    "outputs": [8]})");
  Tensor x = Tensor::ones({2, 3}), w = Tensor::ones({4, 3}), b = Tensor::full({4}, 0.5);
  std::vector<Tensor> out = t.run({{"x", x}, {"w", w}, {"b", b}});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>(4, 7.0f)));  // 2 rows * (3 + 0.5)
}

// Nodes listed out of order still load when the graph is acyclic.
TEST(TraceLoad, NodesMayComeInAnyOrder) {
  LoadedTrace t = load_trace(R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 5, "op": "neg", "args": [2], "dtype": "f32", "shape": [2]},
    {"id": 2, "op": "input", "name": "x", "dtype": "f32", "shape": [2]}], "outputs": [5]})");
  EXPECT_EQ(t.run({{"x", Tensor::ones({2})}})[0].to_vector<float>(), (std::vector<float>{-1, -1}));
}

std::string doc(const std::string& nodes, const std::string& outputs = "[1]") {
  return R"({"format": "kiln.trace", "version": 1, "nodes": [)" + nodes + R"(], "outputs": )" +
         outputs + "}";
}
const std::string kInput =
    R"({"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]})";

TEST(TraceLoad, RejectsBadFilesWithAReasonNamingTheNode) {
  expect_error([] { load_trace("{not json"); }, {"malformed JSON"});
  expect_error([] { load_trace("[1, 2]"); }, {"JSON object"});
  expect_error([] { load_trace(R"({"format": "other", "version": 1})"); }, {"format"});
  expect_error([] { load_trace(R"({"format": "kiln.trace", "version": 2, "nodes": []})"); },
               {"version"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "frobnicate", "args": [0],
      "dtype": "f32", "shape": [2, 3]})"));
      },
      {"node 1 (frobnicate)", "unknown op"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "exp", "args": [7],
      "dtype": "f32", "shape": [2, 3]})"));
      },
      {"node 1 (exp)", "argument 7"});
  expect_error(
      [] {
        load_trace(doc(R"({"id": 1, "op": "exp", "args": [2], "dtype": "f32", "shape": [2]},
      {"id": 2, "op": "exp", "args": [1], "dtype": "f32", "shape": [2]})"));
      },
      {"cycle"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "exp", "args": [0],
      "dtype": "f32", "shape": [3, 2]})"));
      },
      {"node 1 (exp)", "declared f32[3, 2]", "inference gives f32[2, 3]"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "exp", "args": [0],
      "dtype": "f64", "shape": [2, 3]})"));
      },
      {"node 1 (exp)", "declared f64"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "sum", "args": [0],
      "attrs": {"axes": [5]}, "dtype": "f32", "shape": [2]})"));
      },
      {"node 1 (sum)", "axis 5"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "sum", "args": [0],
      "attrs": {"axes": "all"}, "dtype": "f32", "shape": []})"));
      },
      {"node 1", "wrong type"});
  expect_error(
      [] {
        load_trace(doc(kInput + R"(, {"id": 1, "op": "add", "args": [0],
      "dtype": "f32", "shape": [2, 3]})"));
      },
      {"node 1 (add)", "takes 2 inputs"});
  expect_error([] { load_trace(doc(kInput + "," + kInput, "[0]")); }, {"duplicate id"});
  expect_error([] { load_trace(doc(kInput, "[4]")); }, {"output 4"});
  expect_error(
      [] { load_trace(doc(R"({"id": 0, "op": "input", "dtype": "f32", "shape": [2]})", "[0]")); },
      {"name"});
  expect_error(
      [] {
        load_trace(
            doc(R"({"id": 0, "op": "input", "name": "x", "dtype": "f99", "shape": [2]})", "[0]"));
      },
      {"node 0", "unknown dtype"});
  expect_error(
      [] {
        load_trace(
            doc(R"({"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [-2]})", "[0]"));
      },
      {"node 0", "negative"});
  expect_error(
      [] { load_trace(doc(R"({"id": 0, "op": "constant", "dtype": "f32", "shape": []})", "[0]")); },
      {"node 0", "value"});
}

// Found by fuzz_trace_loader: fields of the wrong JSON type escaped as nlohmann exceptions
// (std::terminate in the fuzzer) instead of kiln::Error.
TEST(TraceLoad, FieldsOfTheWrongJsonTypeAreErrorsNotCrashes) {
  const std::vector<std::string> bad = {
      R"({"format": 1,
 "nodes": [
  {"id": 0, "op": {"es": [1], "keepdims": false},
 "dtype": "f32", "shape": [2]}],
 "/utputs": [3]})",  // the fuzzer's input as it found it
      R"({"format": "kiln.trace", "version": "1", "nodes": [], "outputs": []})",
      R"({"format": ["kiln.trace"], "version": 1, "nodes": [], "outputs": []})",
      R"({"format": "kiln.trace", "version": 1, "nodes": {}, "outputs": []})",
      R"({"format": "kiln.trace", "version": 1, "nodes": [], "outputs": "x"})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [0],
          "nodes": [{"id": "0", "op": "input", "name": "x", "dtype": "f32", "shape": [1]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [0],
          "nodes": [{"id": 0, "op": {"o": 1}, "name": "x", "dtype": "f32", "shape": [1]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [0],
          "nodes": [{"id": 0, "op": "input", "name": 3, "dtype": "f32", "shape": [1]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [0],
          "nodes": [{"id": 0, "op": "input", "name": "x", "dtype": 5, "shape": "1"}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [1], "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2]},
          {"id": 1, "op": "sum", "args": "0", "attrs": [], "dtype": "f32", "shape": []}]})",
      // Found by fuzz_trace_loader under UBSan: an integer field holding a float out of range.
      R"({"format": "kiln.trace", "version": 1, "outputs": [1], "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2]},
          {"id": 1, "op": "neg", "args": [2.2e119], "dtype": "f32", "shape": [2]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [0],
          "nodes": [{"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [1e40]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [1], "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
          {"id": 1, "op": "sum", "args": [0], "attrs": {"axes": [1e30]}, "dtype": "f32",
           "shape": [2]}]})",
      R"({"format": "kiln.trace", "version": 1, "outputs": [1], "nodes": [
          {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
          {"id": 1, "op": "sum", "args": [0], "attrs": {"axes": [4294967296]}, "dtype": "f32",
           "shape": [2]}]})",
  };
  for (const std::string& text : bad) {
    testing::expect_error([&] { load_trace(text); }, {"trace: "});
  }
}

TEST(TraceLoad, RunChecksTheGivenInputs) {
  LoadedTrace t = load_trace(
      doc(kInput + R"(, {"id": 1, "op": "exp", "args": [0], "dtype": "f32", "shape": [2, 3]})"));
  expect_error([&] { t.run({}); }, {"no tensor given for input 'x'"});
  expect_error([&] { t.run({{"x", Tensor::ones({3, 2})}}); }, {"node 0", "declared f32[2, 3]"});
  expect_error([&] { t.run({{"x", Tensor::ones({2, 3}, DType::F64)}}); }, {"node 0"});
}

}  // namespace
}  // namespace kiln
