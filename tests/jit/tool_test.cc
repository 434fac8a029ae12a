// The `kiln` command and KILN_DUMP=trace, run as separate processes (as a user would).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using testing::Result;
using testing::run;

class ToolTest : public testing::ScratchDirTest {
 protected:
  std::string kiln() const { return KILN_TOOL_PATH; }
};

// The demo's sync point writes a replayable folder; `kiln replay` reproduces its outputs.
TEST_F(ToolTest, DumpedSyncFolderReplaysToTheSameOutputs) {
  Result demo = run("KILN_DUMP=trace KILN_DUMP_DIR=" + dir_.string() + " " + KILN_DEMO_PATH);
  ASSERT_EQ(demo.exit_code, 0) << demo.output;
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir_)) folders.push_back(e.path());
  ASSERT_EQ(folders.size(), 1u);
  const fs::path folder = folders[0];
  ASSERT_TRUE(fs::exists(folder / "trace.json"));
  ASSERT_TRUE(fs::exists(folder / "expected" / "out0.npy"));
  Result replay = run(kiln() + " replay " + (folder / "trace.json").string() + " --inputs " +
                      (folder / "inputs").string() + " --out " + (dir_ / "out").string());
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  for (const char* name : {"out0.npy", "out1.npy"}) {
    Tensor want = load_npy((folder / "expected" / name).string());
    Tensor got = load_npy((dir_ / "out" / name).string());
    EXPECT_EQ(testing::values(got), testing::values(want)) << name;
  }
}

TEST_F(ToolTest, BadInputExitsNonZeroWithOneLine) {
  const fs::path trace = dir_ / "trace.json";
  std::ofstream(trace) << R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
    {"id": 1, "op": "exp", "args": [0], "dtype": "f32", "shape": [2, 3]}], "outputs": [1]})";
  fs::create_directories(dir_ / "in");
  auto replay = [&] {
    return run(kiln() + " replay " + trace.string() + " --inputs " + (dir_ / "in").string() +
               " --out " + (dir_ / "out").string());
  };
  auto expect_one_line_failure = [&](const Result& r, const std::string& part) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(r.output.rfind("kiln: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
  };
  expect_one_line_failure(replay(), "x.npy");  // missing input file
  save_npy((dir_ / "in" / "x.npy").string(), Tensor::ones({3, 2}));
  expect_one_line_failure(replay(), "expects f32[2, 3]");  // wrong shape
  save_npy((dir_ / "in" / "x.npy").string(), Tensor::ones({2, 3}, DType::I32));
  expect_one_line_failure(replay(), "expects f32[2, 3]");  // wrong dtype
  std::ofstream(dir_ / "in" / "x.npy") << "garbage";
  expect_one_line_failure(replay(), "bad magic");
  save_npy((dir_ / "in" / "x.npy").string(), Tensor::ones({2, 3}));
  Result ok = replay();
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  std::vector<float> e(6, static_cast<float>(std::exp(1.0)));
  EXPECT_EQ(load_npy((dir_ / "out" / "out0.npy").string()).to_vector<float>(), e);
  std::ofstream(trace) << "{\"format\": \"kiln.trace\", \"version\": 1, \"nodes\": [";
  expect_one_line_failure(replay(), "malformed JSON");
  std::ofstream(trace) << R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2, 3]},
    {"id": 1, "op": "exp", "args": [1], "dtype": "f32", "shape": [2, 3]}], "outputs": [1]})";
  expect_one_line_failure(replay(), "cycle");
  EXPECT_EQ(run(kiln() + " replay").exit_code, 2);
  Result device = run(kiln() + " replay " + trace.string() + " --inputs x --out y --device tpu");
  expect_one_line_failure(device, "--device");
}

TEST_F(ToolTest, DumpPrintsALoadedTrace) {
  const fs::path trace = dir_ / "t.json";
  std::ofstream(trace) << R"({"format": "kiln.trace", "version": 1, "nodes": [
    {"id": 0, "op": "input", "name": "x", "dtype": "f32", "shape": [2]},
    {"id": 1, "op": "relu", "args": [0], "dtype": "f32", "shape": [2]}], "outputs": [1]})";
  Result r = run(kiln() + " dump " + trace.string());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("relu(%0) : f32[2]"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// KILN_DUMP=plan,kernels writes the plan and every kernel's program; KILN_LOG=2 prints one
// line per sync and one per kernel launch.
TEST(DebugOutput, PlanAndKernelDumpsAndLogLines) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_plan_dump_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  Result r =
      run("KILN_LOG=2 KILN_DUMP=plan,kernels KILN_DUMP_DIR=" + dir.string() + " " + KILN_DEMO_PATH);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: sync on cpu: 10 nodes, 3 kernels, plan miss (built)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kiln:   kernel matmul_add_relu_mul nodes [%2 %4 %5 %6 %7] compiled"),
            std::string::npos)
      << r.output;
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir)) folders.push_back(e.path());
  ASSERT_EQ(folders.size(), 1u);
  std::ifstream plan_file(folders[0] / "plan.txt");
  std::stringstream plan;
  plan << plan_file.rdbuf();
  EXPECT_NE(plan.str().find("plan: 10 nodes, 3 kernels"), std::string::npos) << plan.str();
  EXPECT_NE(plan.str().find("kernel 1: softmax (rownorm)"), std::string::npos) << plan.str();
  EXPECT_NE(plan.str().find("(mul): it feeds another anchor at node 8 (softmax)"),
            std::string::npos)
      << plan.str();
  int kernels = 0, sources = 0;
  for (const auto& e : fs::directory_iterator(folders[0] / "kernels")) {
    std::ifstream f(e.path());
    std::stringstream text;
    text << f.rdbuf();
    if (e.path().extension() == ".cu") {  // the CUDA C++ of the same kernel
      ++sources;
      EXPECT_NE(text.str().find("extern \"C\" __global__"), std::string::npos) << e.path();
      EXPECT_TRUE(fs::exists(fs::path(e.path()).replace_extension(".txt"))) << e.path();
      continue;
    }
    ++kernels;
    EXPECT_EQ(text.str().rfind("kernel ", 0), 0u) << e.path();
    EXPECT_NE(text.str().find("store %"), std::string::npos) << e.path();
  }
  EXPECT_EQ(kernels, 3);
  EXPECT_EQ(sources, 3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST_F(ToolTest, InfoAndCompileCuda) {
  Result info = run(kiln() + " info");
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("default device: cpu"), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("NVRTC: "), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("kernel cache: "), std::string::npos) << info.output;
  // A good kernel compiles; a broken one fails with NVRTC's log and the file's name.
  std::ofstream(dir_ / "good.cu")
      << "extern \"C\" __global__ void good(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  // `kiln compile-cuda DIR <flags>` exits with `exit_code` and says each of `said`.
  auto compile_cuda = [&](const std::string& flags, int exit_code,
                          std::initializer_list<std::string_view> said) {
    Result r = run(kiln() + " compile-cuda " + dir_.string() + " " + flags);
    EXPECT_EQ(r.exit_code, exit_code) << flags << ": " << r.output;
    for (std::string_view text : said) {
      EXPECT_NE(r.output.find(text), std::string::npos) << flags << ": " << r.output;
    }
  };
  compile_cuda("--arch 90", 0, {"compiled 1 kernels to cubins for sm_90"});
  compile_cuda("--arch 80,90 --check syntax", 0,
               {"checked 1 kernels with NVRTC's front end for sm_80, sm_90"});
  // --every 2 takes a.cu and c.cu (name order): good, then good again.
  std::ofstream(dir_ / "c.cu") << "extern \"C\" __global__ void c(float* x) { x[0] = 1.0f; }\n";
  std::ofstream(dir_ / "b.cu") << "this is not CUDA\n";
  std::filesystem::rename(dir_ / "good.cu", dir_ / "a.cu");
  compile_cuda("--arch 80 --every 2", 0, {"compiled 2 kernels to cubins for sm_80"});
  compile_cuda("--arch 80", 1, {"b.cu"});
  std::filesystem::remove(dir_ / "b.cu");
  std::filesystem::remove(dir_ / "c.cu");
  std::ofstream(dir_ / "bad.cu")
      << "extern \"C\" __global__ void bad(float* x) { x[0] = undeclared; }\n";
  for (const char* check : {"cubin", "syntax"}) {
    compile_cuda(std::string("--arch 80 --check ") + check, 1, {"undeclared", "bad.cu"});
  }
  compile_cuda("--check ptx", 1, {"--check takes cubin or syntax, got 'ptx'"});
}

// --check syntax runs NVRTC's front end over generated modules in batches of one program each
// (the shared preamble once, every module in a namespace of its own): modules whose entries
// have the same name pass together, and a broken one among them is named with its own error.
TEST_F(ToolTest, CompileCudaChecksModulesThatShareAPreambleInBatches) {
  const std::string preamble =
      "// ---- kiln preamble ----\n"
      "__device__ float twice(float v) { return 2.0f * v; }\n"
      "// ---- end of preamble ----\n";
  for (const char* name : {"m1", "m2", "m3"}) {
    std::ofstream(dir_ / (std::string(name) + ".cu"))
        << preamble << "struct Params { float* x; };\n"
        << "extern \"C\" __global__ void k(Params a) { a.x[0] = twice(a.x[0]); }\n";
  }
  Result ok = run(kiln() + " compile-cuda " + dir_.string() + " --arch 80,90 --check syntax");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("checked 3 kernels"), std::string::npos) << ok.output;
  std::ofstream(dir_ / "m2.cu") << preamble << "struct Params { float* x; };\n"
                                << "extern \"C\" __global__ void k(Params a) { a.x[0] = "
                                   "thrice(a.x[0]); }\n";
  Result bad = run(kiln() + " compile-cuda " + dir_.string() + " --arch 80 --check syntax");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("m2.cu"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("thrice"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("m1.cu"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("m3.cu"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace kiln
