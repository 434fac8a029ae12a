// Golden tests of the compiler's passes, one small program each: the canonical trace (the
// planner's input), the plan (its kernel groups, and why each stored intermediate is stored),
// each kernel's Kernel IR (lowering's output) and its CUDA C++ (the renderer's output), as
// text, compared line by line with tests/passes/golden/<case>.txt.
//
// Every other test checks results; these show what the passes decided. A change that moves a
// fusion boundary, adds a kernel or renders different code fails here with the lines that
// moved, and `scripts/update_golden.sh` rewrites the files so that review reads the diff.
// Nothing runs a kernel: planning and rendering need no device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jit/formats/trace_format.h"
#include "jit/fusion/trace.h"
#include "kiln/debug.h"
#include "kiln/kiln.h"
#include "ops/op_catalog.h"

namespace kiln {
namespace {

// The canonical trace, a node a line: `%2 = matmul %0 %1 : f32[4, 16]`, with the attributes
// as trace files write them, the input slot of an input and the parameter slot of a scalar.
std::string trace_text(const std::vector<Tensor>& outputs) {
  std::vector<detail::Node*> targets;
  for (const Tensor& t : outputs) targets.push_back(detail::TensorAccess::node(t).get());
  const jit::Trace trace = jit::build_trace(targets);
  std::string out;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const jit::TraceNode& node = trace.nodes[i];
    std::vector<std::string> args;
    for (int a : node.args) args.push_back(absl::StrCat("%", a));
    absl::StrAppend(&out, "%", i, " = ", ops::op_name(node.op));
    if (!args.empty()) absl::StrAppend(&out, " ", absl::StrJoin(args, " "));
    if (node.input_slot >= 0) absl::StrAppend(&out, " slot ", node.input_slot);
    if (node.param_slot >= 0) absl::StrAppend(&out, " param ", node.param_slot);
    if (node.op != ops::OpKind::Input) {
      const nlohmann::json attrs = jit::attrs_to_json(node.op, *node.attrs);
      if (!attrs.empty()) absl::StrAppend(&out, " ", attrs.dump());
    }
    absl::StrAppend(&out, " : ", dtype_name(node.type->dtype), "[",
                    absl::StrJoin(node.type->shape, ", "), "]\n");
  }
  std::vector<std::string> outs;
  for (int o : trace.outputs) outs.push_back(absl::StrCat("%", o));
  absl::StrAppend(&out, "outputs: ", absl::StrJoin(outs, " "), "\n");
  return out;
}

// explain_plan's plan, Kernel IR and CUDA C++, with each module's shared preamble (the same
// few hundred lines in every kernel: cuda_preamble.h and the op functors) left out.
std::string plan_text(const std::vector<Tensor>& outputs) {
  const std::string explained = explain_plan(outputs, ExplainDetail::kCuda);
  std::string out;
  bool in_preamble = false;
  for (absl::string_view line : absl::StrSplit(explained, '\n')) {
    if (line == "// ---- kiln preamble ----") {
      in_preamble = true;
      absl::StrAppend(&out, "// (the preamble every module shares)\n");
      continue;
    }
    if (in_preamble) {
      in_preamble = line != "// ---- end of preamble ----";
      continue;
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string golden_path(const std::string& name) {
  return absl::StrCat(KILN_SOURCE_DIR, "/tests/passes/golden/", name, ".txt");
}

// The first lines where `want` and `got` differ, numbered as in the golden file.
std::string first_differences(const std::string& want, const std::string& got) {
  const std::vector<std::string> a = absl::StrSplit(want, '\n');
  const std::vector<std::string> b = absl::StrSplit(got, '\n');
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) && shown < 12; ++i) {
    const std::string* x = i < a.size() ? &a[i] : nullptr;
    const std::string* y = i < b.size() ? &b[i] : nullptr;
    if (x != nullptr && y != nullptr && *x == *y) continue;
    absl::StrAppend(&out, "line ", i + 1, ":\n  golden: ", x ? *x : "(end of file)",
                    "\n  now:    ", y ? *y : "(end of text)", "\n");
    ++shown;
  }
  return out;
}

struct GoldenCase {
  std::string name;
  std::function<std::vector<Tensor>()> program;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

// Inputs are computed tensors (trace inputs), with made-up values: only shapes and dtypes
// reach the plan.
Tensor input(std::vector<int64_t> shape, DType dt = DType::F32) {
  return Tensor::zeros(std::move(shape), dt).eval();
}

std::vector<GoldenCase> cases() {
  return {
      {"linear_gelu",  // a matmul with its bias and activation as the epilogue
       [] {
         Tensor x = input({4, 32}), w = input({32, 16}), b = input({16});
         return std::vector<Tensor>{gelu(matmul(x, w) + b)};
       }},
      {"softmax_of_scaled_scores",  // elementwise ops feeding a row op fuse into it
       [] {
         Tensor s = input({8, 64});
         return std::vector<Tensor>{softmax(s * 0.125, -1)};
       }},
      {"sum_then_broadcast",  // a reduction's result read per element: two kernels
       [] {
         Tensor x = input({16, 32});
         Tensor centered = x - mean(x, 1, true);
         return std::vector<Tensor>{centered * centered};
       }},
      {"two_outputs_share_a_kernel",  // outputs of one shape in one kernel
       [] {
         Tensor x = input({64}), y = input({64});
         Tensor s = x + y;
         return std::vector<Tensor>{exp(s), s * 2.0};
       }},
      {"views_become_index_math",  // permute, slice and broadcast read in place
       [] {
         Tensor x = input({6, 8}), b = input({6});
         Tensor t = x.transpose(0, 1).slice(0, 2, 6);
         return std::vector<Tensor>{t + b.unsqueeze(0)};
       }},
      {"cumsum_in_f16",  // a scan in a narrow dtype, computed in f32
       [] {
         Tensor x = input({4, 100}, DType::F16);
         return std::vector<Tensor>{cumsum(relu(x), 1)};
       }},
  };
}

class PassGolden : public ::testing::TestWithParam<GoldenCase> {
 protected:
  // The plan is the same on every device (only its describe_plan notes differ, and the CPU
  // has none); the CPU keeps the text the same on a GPU machine.
  void SetUp() override {
    previous_ = default_device();
    set_default_device(Device{DeviceType::CPU, 0});
  }
  void TearDown() override { set_default_device(previous_); }

 private:
  Device previous_;
};

TEST_P(PassGolden, MatchesTheCheckedInText) {
  const GoldenCase& c = GetParam();
  const std::vector<Tensor> outputs = c.program();
  const std::string got = absl::StrCat("== canonical trace\n", trace_text(outputs),
                                       "\n== plan, Kernel IR and CUDA C++\n", plan_text(outputs));
  const std::string path = golden_path(c.name);
  if (const char* update = std::getenv("KILN_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream out(path);
    out << got;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << "no golden file " << path << "; scripts/update_golden.sh writes it";
  std::stringstream want;
  want << file.rdbuf();
  EXPECT_TRUE(want.str() == got)
      << c.name << " differs from " << path << "\n"
      << first_differences(want.str(), got)
      << "If the change is intended, scripts/update_golden.sh rewrites the file; review its diff.";
}

INSTANTIATE_TEST_SUITE_P(Passes, PassGolden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace kiln
